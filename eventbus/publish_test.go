package eventbus_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// 8 goroutines × 125 publishes: ids are exactly 1…1000, every subscriber
// sees them strictly increasing, and each publisher's order is kept.
func TestConcurrentPublishers(t *testing.T) {
	t.Parallel()
	const publishers, each = 8, 125
	b := newBus(t, eventbus.Options{ReplayBufferSize: 1000, MaxQueueSize: 2000})
	type item struct{ P, I int }
	var subs []*eventbus.Subscription
	for _, o := range []eventbus.SubscribeOptions{{}, {NoReplay: true}, {Cursor: eventbus.At(0)}} {
		subs = append(subs, subscribe(t, b, "s", o))
	}
	results := make([][]eventbus.Event, len(subs))
	var readers sync.WaitGroup
	for i, s := range subs {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for len(ids(results[i])) < publishers*each {
				ctx, cancel := context.WithTimeout(context.Background(), waitFor)
				ev, err := s.Next(ctx)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				results[i] = append(results[i], ev)
			}
		}()
	}
	returned := make([][]uint64, publishers)
	var wg sync.WaitGroup
	for p := 0; p < publishers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				ev, err := b.Publish("s", "msg", item{p, i})
				if err != nil {
					t.Error(err)
					return
				}
				returned[p] = append(returned[p], ev.ID)
			}
		}()
	}
	wg.Wait()
	readers.Wait()

	seen := map[uint64]bool{}
	for p, r := range returned {
		require.Len(t, r, each)
		for i := 1; i < len(r); i++ {
			assert.Greater(t, r[i], r[i-1], "publisher %d ids", p)
		}
		for _, id := range r {
			seen[id] = true
		}
	}
	assert.Len(t, seen, publishers*each)
	for id := uint64(1); id <= publishers*each; id++ {
		assert.True(t, seen[id], "id %d never returned", id)
	}
	for i, evs := range results {
		assert.Equal(t, seq(1, publishers*each), ids(evs), "subscriber %d", i)
		next := make([]int, publishers)
		for _, e := range evs {
			if e.ID == 0 {
				continue
			}
			var it item
			require.NoError(t, json.Unmarshal(e.Data, &it))
			assert.Equal(t, next[it.P], it.I, "subscriber %d, publisher %d out of order", i, it.P)
			next[it.P] = it.I + 1
		}
	}
	assert.Equal(t, uint64(publishers*each), b.LastEventID())
	assert.Zero(t, b.Stats().Guarded)
}

// Interleaved publishes to A and B: B's subscribers and resumes never see A.
func TestSessionIsolation(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 5})
	live := subscribe(t, b, "B", eventbus.SubscribeOptions{})
	var bIDs []uint64
	for i := 0; i < 20; i++ {
		_, err := b.Publish("A", "msg", i)
		require.NoError(t, err)
		ev, err := b.Publish("B", "msg", i)
		require.NoError(t, err)
		bIDs = append(bIDs, ev.ID)
	}
	got := drain(live)
	assert.Equal(t, bIDs, ids(got))
	for _, cursor := range []uint64{0, 1, 2, 20, 30, 33, 39, 40} {
		s := subscribe(t, b, "B", eventbus.SubscribeOptions{Cursor: eventbus.At(cursor)})
		var gotIDs []uint64
		for _, e := range drain(s) {
			assert.NotEqual(t, "A", e.Session, "cursor %d", cursor)
			if e.ID != 0 {
				assert.Equal(t, uint64(0), e.ID%2, "cursor %d: id %d is A's", cursor, e.ID)
				gotIDs = append(gotIDs, e.ID)
			}
		}
		// Exactly B's ids after the cursor that its ring of 5 still holds.
		var want []uint64
		for _, id := range bIDs[len(bIDs)-5:] {
			if id > cursor {
				want = append(want, id)
			}
		}
		assert.Equal(t, want, gotIDs, "cursor %d", cursor)
		s.Close()
	}
}

func TestPublishValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, session, typ string
		data               any
	}{
		{"empty type", "s", "", nil},
		{"empty session", "", "msg", nil},
		{"CR in type", "s", "a\rb", nil},
		{"LF in type", "s", "a\nb", nil},
		{"CRLF in session", "s\r\n", "msg", nil},
		{"channel", "s", "msg", make(chan int)},
		{"func", "s", "msg", func() {}},
		{"NaN", "s", "msg", math.NaN()},
		{"+Inf in a map", "s", "msg", map[string]float64{"x": math.Inf(1)}},
		{"invalid RawMessage", "s", "msg", json.RawMessage(`{"a":`)},
		{"nil RawMessage", "s", "msg", json.RawMessage(nil)},
		{"RawMessage with invalid UTF-8 in a string", "s", "msg", json.RawMessage("{\"a\":\"\xff\"}")},
		{"RawMessage with a UTF-16 surrogate in UTF-8", "s", "msg", json.RawMessage("\"\xed\xa0\x80\"")},
		{"nested RawMessage with invalid UTF-8", "s", "msg", map[string]any{"a": json.RawMessage("\"\xc3\x28\"")}},
		{"marshaler giving invalid UTF-8", "s", "msg", badUTF8{}},
		{"panicking marshaler", "s", "msg", panicky{}},
		{"over-long type", "s", string(make([]byte, frame.MaxNameLen+1)), nil},
		{"forged session_closed", "s", frame.TypeSessionClosed, nil},
		{"forged client_evicted", "s", frame.TypeClientEvicted, nil},
		{"forged replay_complete", "s", frame.TypeReplayComplete, nil},
		{"forged state_resync_required", "s", frame.TypeStateResyncRequired, nil},
		{"forged slow_client_warning", "s", frame.TypeSlowClientWarning, nil},
		{"forged snapshot", "s", frame.TypeSnapshot, nil},
		{"forged stream_start", "s", "stream_start", nil},
		{"internal control type", "s", "_replaybus.session_created", nil},
	}
	b := newBus(t, eventbus.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.Publish(tt.session, tt.typ, tt.data)
			require.ErrorIs(t, err, eventbus.ErrInvalid)
			assert.Contains(t, err.Error(), "eventbus: ")
			if strings.Contains(tt.name, "UTF-8") || strings.Contains(tt.name, "surrogate") {
				assert.Contains(t, err.Error(), "not UTF-8 at byte ", "the error names the first byte that is not UTF-8")
			}
		})
	}
	// No refused event consumed an id; a nil option is ignored.
	ev, err := b.Publish("s", "msg", "ok", nil)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), ev.ID)
	assert.Equal(t, uint64(1), b.Stats().Published)
}

// badUTF8 marshals to valid JSON that is not UTF-8.
type badUTF8 struct{}

func (badUTF8) MarshalJSON() ([]byte, error) { return []byte("\"\xfe\""), nil }

type panicky struct{}

func (panicky) MarshalJSON() ([]byte, error) { panic("boom") }

func TestPublishReturnsStoredEvent(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	before := time.Now()
	ev, err := b.Publish("s", "tool_call", map[string]string{"k": "v"}, eventbus.WithOrigin("client-1"))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), ev.ID)
	assert.Equal(t, "s", ev.Session)
	assert.Equal(t, "tool_call", ev.Type)
	assert.JSONEq(t, `{"k":"v"}`, string(ev.Data))
	assert.Equal(t, "client-1", ev.Origin)
	assert.False(t, ev.Replay)
	assert.False(t, ev.Time.Before(before.Truncate(time.Second)))

	raw, err := b.Publish("s", "raw", json.RawMessage(`[1, 2]`))
	require.NoError(t, err)
	assert.Equal(t, `[1, 2]`, string(raw.Data), "RawMessage kept as is")
	none, err := b.Publish("s", "empty", nil)
	require.NoError(t, err)
	assert.Empty(t, none.Data)

	s := subscribe(t, b, "s", eventbus.SubscribeOptions{})
	got := readN(t, s, 3)
	assert.Equal(t, "client-1", got[0].Origin)
	assert.Equal(t, ev.Data, got[0].Data)
	assert.Equal(t, ev.Time.UnixNano(), got[0].Time.UnixNano())
	assert.True(t, got[0].Replay)
	assert.Equal(t, uint64(3), b.LastEventID())
}
