package turnstream_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/replaybus/replaybus/adapters/internal/turnstream"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/codec"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

type nopEncoder struct{}

func (nopEncoder) Skip(int)                                  {}
func (nopEncoder) Append(dst []byte, _ ...codec.Part) []byte { return dst }

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseCursor(t *testing.T) {
	t.Parallel()
	rows := []struct {
		in     string
		want   turnstream.Cursor
		ok     bool
		errHas string
	}{
		{"", turnstream.Cursor{}, false, ""},
		{"ep-7", turnstream.Cursor{Seq: 7, Epoch: "ep"}, true, ""},
		{"ep-7:2", turnstream.Cursor{Seq: 7, K: 2, Mid: true, Epoch: "ep"}, true, ""},
		{"7", turnstream.Cursor{Seq: 7}, true, ""},
		{"other-7", turnstream.Cursor{Seq: 7, Epoch: "other"}, false, ""}, // another epoch: a join
		{"ep-0", turnstream.Cursor{Epoch: "ep"}, false, ""},
		{"ep-x", turnstream.Cursor{}, false, `invalid Last-Event-ID "ep-x": want`},
		{"x", turnstream.Cursor{}, false, `invalid Last-Event-ID "x": want decimal digits only, got 'x' at byte 0`},
		{"ep-7:", turnstream.Cursor{}, false, `invalid Last-Event-ID "ep-7:": the frame index`},
		{"ep-7:01", turnstream.Cursor{}, false, "frame index"},
		{"ep-7:-1", turnstream.Cursor{}, false, "frame index"},
	}
	for _, r := range rows {
		c, ok, err := turnstream.ParseCursor(r.in, "ep")
		if err != nil {
			// Said once: it read `Last-Event-ID "x": invalid Last-Event-ID "x": want …`.
			assert.Equal(t, 1, strings.Count(err.Error(), "Last-Event-ID"), err.Error())
		}
		if r.errHas != "" {
			require.Error(t, err, r.in)
			assert.Contains(t, err.Error(), r.errHas, r.in)
			continue
		}
		require.NoError(t, err, r.in)
		assert.Equal(t, r.ok, ok, r.in)
		assert.Equal(t, r.want, c, r.in)
	}
}

// Locate finds the turn an id falls in: the active one, or an ended one
// from the replay buffer with its end.
func TestLocateFindsTheTurnOfAnID(t *testing.T) {
	t.Parallel()
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	require.NoError(t, bus.CreateSession("s", ""))
	ctx := context.Background()
	before, err := bus.Publish("s", "x", nil)
	require.NoError(t, err)
	t1, err := bus.StartTurn(ctx, "s", eventbus.TurnOptions{ID: "t1"})
	require.NoError(t, err)
	mid, err := t1.Publish("x", nil)
	require.NoError(t, err)
	end, err := t1.End(nil)
	require.NoError(t, err)
	t2, err := bus.StartTurn(ctx, "s", eventbus.TurnOptions{ID: "t2"})
	require.NoError(t, err)
	live, err := t2.Publish("x", nil)
	require.NoError(t, err)

	_, found, err := turnstream.Locate(ctx, bus, "s", before.ID)
	require.NoError(t, err)
	assert.False(t, found, "before any turn")
	got, found, err := turnstream.Locate(ctx, bus, "s", mid.ID)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "t1", got.Turn)
	assert.Equal(t, t1.Start().ID, got.StartID)
	assert.Equal(t, end.ID, got.EndID)
	got, found, err = turnstream.Locate(ctx, bus, "s", live.ID)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "t2", got.Turn)
	assert.Zero(t, got.EndID)
}

// Open gives a turn from its turn_start or refuses it: with the
// turn_start alone evicted it rebuilds it from the turn's state and
// the rest is whole; with an event of the turn after it evicted it is
// 410 ring_evicted naming the turn, never the turn from its middle.
// Resume refuses the same way, and a cursor whose next events are gone.
func TestOpenNeverGivesATurnFromItsMiddle(t *testing.T) {
	t.Parallel()
	const ring = 8
	rows := []struct {
		name    string
		publish int // events of the turn after its turn_start
		lost    bool
		lead    bool
	}{
		{"the turn whole in the buffer", ring - 1, false, false},
		{"only the turn_start evicted", ring, false, true},
		{"the turn's first event evicted", ring + 1, true, false},
		{"most of the turn evicted", 5 * ring, true, false},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: ring})
			require.NoError(t, err)
			defer bus.Close()
			require.NoError(t, bus.CreateSession("s", ""))
			ctx := context.Background()
			tn, err := bus.StartTurn(ctx, "s", eventbus.TurnOptions{ID: "t1"})
			require.NoError(t, err)
			for i := range r.publish {
				_, err := tn.Publish("x", map[string]int{"i": i})
				require.NoError(t, err)
			}
			td, ok := bus.Turn("s", "t1")
			require.True(t, ok)
			sub, lead, err := turnstream.Open(ctx, bus, "s", td)
			if r.lost {
				var se *resume.StatusError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, http.StatusGone, se.Status)
				assert.Equal(t, resume.CodeRingEvicted, se.Code)
				assert.Contains(t, se.Message, `"t1"`)
				_, err = turnstream.Resume(ctx, bus, "s", codec.Default, nopEncoder{}, td,
					turnstream.Cursor{Seq: bus.LastEventID() - 1})
				require.ErrorAs(t, err, &se, "a resume primes from the turn's start")
				_, err = turnstream.Resume(ctx, bus, "s", codec.Default, nopEncoder{}, td, turnstream.Cursor{Seq: td.StartID + 1})
				require.ErrorAs(t, err, &se, "a cursor whose next events are gone")
				assert.Equal(t, resume.CodeRingEvicted, se.Code)
				return
			}
			require.NoError(t, err)
			defer sub.Close()
			rd := turnstream.Reader{Sub: sub, Turn: "t1", Started: true, Lead: lead}
			assert.Equal(t, r.lead, len(lead) == 1)
			_, err = tn.End(nil)
			require.NoError(t, err)
			var ids []uint64
			var types []string
			for {
				evs, done, err := rd.Next(ctx)
				require.NoError(t, err)
				if done {
					break
				}
				for _, ev := range evs {
					ids = append(ids, ev.ID)
					types = append(types, ev.Type)
				}
			}
			require.Len(t, ids, r.publish+2, "turn_start, every event, turn_end")
			assert.Equal(t, td.StartID, ids[0])
			assert.Equal(t, frame.TypeTurnStart, types[0])
			if r.lead {
				ps := codec.Default.Decode(nil, lead[0])
				require.Len(t, ps, 1)
				assert.Equal(t, codec.Start, ps[0].Kind)
				assert.Equal(t, "t1", ps[0].Turn, "the rebuilt turn_start names the turn")
			}
			for i := 1; i < len(ids); i++ {
				assert.Equal(t, ids[i-1]+1, ids[i], "no hole")
			}
			assert.Equal(t, frame.TypeTurnEnd, types[len(types)-1])
		})
	}
}

// A cursor inside an ended turn whose turn_start has left the replay
// buffer is located in that turn (not "no turn", which a handler answers
// 204, leaving the client half a turn), and its resume is refused 410
// ring_evicted; a cursor between turns is still no turn.
func TestLocateFindsATurnWhoseStartWasEvicted(t *testing.T) {
	t.Parallel()
	bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 8})
	require.NoError(t, err)
	defer bus.Close()
	require.NoError(t, bus.CreateSession("s", ""))
	ctx := context.Background()
	t1, err := bus.StartTurn(ctx, "s", eventbus.TurnOptions{ID: "t1"})
	require.NoError(t, err)
	var evs []eventbus.Event
	for range 20 {
		ev, err := t1.Publish("x", nil)
		require.NoError(t, err)
		evs = append(evs, ev)
	}
	end, err := t1.End(nil)
	require.NoError(t, err)
	between, err := bus.Publish("s", "x", nil)
	require.NoError(t, err)
	t2, err := bus.StartTurn(ctx, "s", eventbus.TurnOptions{ID: "t2"})
	require.NoError(t, err)
	_, err = t2.Publish("x", nil)
	require.NoError(t, err)

	inside := evs[len(evs)-2].ID // held, its turn_start not
	got, found, err := turnstream.Locate(ctx, bus, "s", inside)
	require.NoError(t, err)
	require.True(t, found, "the cursor is inside t1")
	assert.Equal(t, "t1", got.Turn)
	assert.Equal(t, end.ID, got.EndID)
	_, err = turnstream.Resume(ctx, bus, "s", codec.Default, nopEncoder{}, got, turnstream.Cursor{Seq: inside})
	var se *resume.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, resume.CodeRingEvicted, se.Code)

	_, found, err = turnstream.Locate(ctx, bus, "s", between.ID)
	require.NoError(t, err)
	assert.False(t, found, "between turns")
}
