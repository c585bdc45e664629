package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCheckerFindsEveryDefect feeds the checker histories with one defect
// each (and clean ones) and checks that it names exactly that defect.
func TestCheckerFindsEveryDefect(t *testing.T) {
	k := func(p string, s uint64) key { return key{p, s} }
	// The stream of a clean run: producer a in session s0, b in s1; id 3
	// is a session record no subscriber sees.
	clean := []stored{
		{1, "s0", k("a", 0)}, {2, "s1", k("b", 0)}, {4, "s0", k("a", 1)}, {5, "s1", k("b", 1)}, {6, "s0", k("a", 2)},
	}
	ev := func(id uint64, p string, s uint64) item { return item{ID: id, Key: k(p, s)} }
	gap := func(after, from uint64) item {
		return item{Gap: &gapFrame{Reason: "feed_gap", After: after, CompleteFrom: from}}
	}
	sub := func(session string, items ...item) subscriberLog {
		return subscriberLog{Name: "node/" + session, Session: session, Items: items}
	}
	allS0 := sub("s0", ev(1, "a", 0), ev(4, "a", 1), ev(6, "a", 2))
	allS1 := sub("s1", ev(2, "b", 0), ev(5, "b", 1))
	acked := []ack{{Key: k("a", 0), ID: 1}, {Key: k("a", 1), ID: 4}, {Key: k("a", 2)}, {Key: k("b", 0), ID: 2}, {Key: k("b", 1), ID: 5, Partitioned: true}}

	tests := []struct {
		name  string
		st    []stored
		acks  []ack
		subs  []subscriberLog
		check func(t *testing.T, v verdict)
	}{
		{
			name: "clean run", st: clean, acks: acked, subs: []subscriberLog{allS0, allS1},
			check: func(t *testing.T, v verdict) {
				assert.Empty(t, v.Failed)
				assert.Equal(t, 5, v.Acked)
				assert.Equal(t, 1, v.AckedDup)
				assert.Equal(t, 1, v.AckedPartitioned)
				assert.Equal(t, 5, v.Delivered)
			},
		},
		{
			name: "an acknowledged event is not stored", st: clean[:4], acks: acked, subs: []subscriberLog{sub("s0", ev(1, "a", 0), ev(4, "a", 1)), allS1},
			check: func(t *testing.T, v verdict) {
				assert.Equal(t, []string{"a#2 (acked id 0)"}, v.Lost)
				assert.Len(t, v.Failed, 1)
			},
		},
		{
			name: "a 202's id holds another event (a minority leader acknowledged, its id reused by the majority)",
			st:   clean, acks: []ack{{Key: k("a", 1), ID: 5}}, subs: []subscriberLog{allS0, allS1},
			check: func(t *testing.T, v verdict) {
				assert.Equal(t, []string{"a#1 acked at id 5, which holds b#1"}, v.AckMismatch)
				assert.Len(t, v.Failed, 1)
			},
		},
		{
			name: "a producer sequence stored twice",
			st:   append(clean[:len(clean):len(clean)], stored{7, "s0", k("a", 1)}),
			subs: []subscriberLog{sub("s0", ev(1, "a", 0), ev(4, "a", 1), ev(6, "a", 2), ev(7, "a", 1)), allS1},
			check: func(t *testing.T, v verdict) {
				assert.Equal(t, []string{"a#1 (again at id 7)"}, v.DupStored)
				assert.Len(t, v.Failed, 1)
			},
		},
		{
			name: "a producer's sequences stored with a hole",
			st:   []stored{{1, "s0", k("a", 0)}, {2, "s0", k("a", 2)}},
			subs: []subscriberLog{sub("s0", ev(1, "a", 0), ev(2, "a", 2))},
			check: func(t *testing.T, v verdict) {
				assert.Equal(t, []string{"a#2 stored at id 2 after seq 0"}, v.ProducerOrder)
				assert.Len(t, v.Failed, 1)
			},
		},
		{
			name: "a subscriber silently misses an event",
			st:   clean, acks: acked, subs: []subscriberLog{sub("s0", ev(1, "a", 0), ev(6, "a", 2)), allS1},
			check: func(t *testing.T, v verdict) {
				assert.Equal(t, 1, v.SilentGaps)
				assert.Equal(t, []string{"node/s0: id 4 (a#1)"}, v.SilentExamples)
				assert.Len(t, v.Failed, 1)
			},
		},
		{
			name: "a subscriber never gets the tail",
			st:   clean, acks: acked, subs: []subscriberLog{sub("s0", ev(1, "a", 0)), allS1},
			check: func(t *testing.T, v verdict) {
				assert.Equal(t, 2, v.SilentGaps)
				assert.Len(t, v.Failed, 1)
			},
		},
		{
			name: "a missed event announced by a gap frame",
			st:   clean, acks: acked, subs: []subscriberLog{sub("s0", ev(1, "a", 0), gap(1, 6), ev(6, "a", 2)), allS1},
			check: func(t *testing.T, v verdict) {
				assert.Empty(t, v.Failed)
				assert.Equal(t, 1, v.AnnouncedGaps)
				assert.Equal(t, 1, v.AnnouncedMissing)
			},
		},
		{
			name: "a gap frame without completeFromId covers up to the next event read",
			st:   clean, acks: acked, subs: []subscriberLog{sub("s0", ev(1, "a", 0), gap(1, 0), ev(6, "a", 2)), allS1},
			check: func(t *testing.T, v verdict) {
				assert.Empty(t, v.Failed)
				assert.Equal(t, 1, v.AnnouncedMissing)
			},
		},
		{
			name: "a gap frame covers only its range",
			st:   clean, acks: acked, subs: []subscriberLog{sub("s0", gap(1, 4), ev(4, "a", 1)), allS1},
			check: func(t *testing.T, v verdict) {
				assert.Equal(t, 2, v.SilentGaps, "ids 1 and 6 are outside (1, 4)")
			},
		},
		{
			name: "an event delivered twice",
			st:   clean, acks: acked, subs: []subscriberLog{sub("s0", ev(1, "a", 0), ev(4, "a", 1), ev(4, "a", 1), ev(6, "a", 2)), allS1},
			check: func(t *testing.T, v verdict) {
				assert.Equal(t, 1, v.Duplicated)
				assert.Len(t, v.Failed, 1)
			},
		},
		{
			name: "events delivered out of order",
			st:   clean, acks: acked, subs: []subscriberLog{sub("s0", ev(1, "a", 0), ev(6, "a", 2), ev(4, "a", 1)), allS1},
			check: func(t *testing.T, v verdict) {
				assert.Equal(t, 1, v.Reordered)
				assert.Len(t, v.Failed, 1)
			},
		},
		{
			name: "an event delivered that the stream does not hold, or of another session",
			st:   clean, acks: acked, subs: []subscriberLog{sub("s0", ev(1, "a", 0), ev(4, "a", 1), ev(5, "b", 1), ev(6, "a", 2), ev(9, "a", 3)), allS1},
			check: func(t *testing.T, v verdict) {
				assert.Equal(t, 2, v.Phantom)
				assert.Len(t, v.Failed, 1)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, check(tt.st, tt.acks, tt.subs))
		})
	}
}

func TestPercentile(t *testing.T) {
	xs := []int64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	assert.Equal(t, int64(1), percentile(xs, 0))
	assert.Equal(t, int64(5), percentile(xs, 50))
	assert.Equal(t, int64(10), percentile(xs, 99))
	assert.Equal(t, int64(10), percentile(xs, 100))
	assert.Equal(t, int64(0), percentile([]int64(nil), 99))
	assert.Equal(t, []int64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}, xs, "not sorted in place")
}
