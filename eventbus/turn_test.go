package eventbus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// logOf returns what session's replay buffer holds, in order (with scope
// descendants, its descendants' too).
func logOf(t testing.TB, b *eventbus.Bus, session string, k scope.Kind) []eventbus.Event {
	t.Helper()
	s := subscribe(t, b, session, eventbus.SubscribeOptions{Scope: k, RequireSession: true})
	defer s.Close()
	return drain(s)
}

// turnLog renders the turn records and events of evs: "start:t1",
// "end:t1:complete", "cancel:t1" ("cancel:*" for the session's active
// turns, "+cascade"), and other types as they are.
func turnLog(evs []eventbus.Event) []string {
	out := []string{}
	for _, e := range evs {
		switch e.Type {
		case frame.TypeTurnStart:
			out = append(out, "start:"+decode[frame.TurnData](nil, e).Turn)
		case frame.TypeTurnEnd:
			d := decode[frame.TurnData](nil, e)
			out = append(out, "end:"+d.Turn+":"+d.Reason)
		case frame.TypeTurnCancel:
			d := decode[frame.TurnData](nil, e)
			s := "cancel:" + d.Turn
			if d.Turn == "" {
				s += "*"
			}
			if d.Cascade {
				s += "+cascade"
			}
			out = append(out, s)
		default:
			if e.ID != 0 {
				out = append(out, e.Type)
			}
		}
	}
	return out
}

// created returns a bus with the sessions given (child:parent or root).
func created(t testing.TB, o eventbus.Options, sessions ...string) *eventbus.Bus {
	t.Helper()
	b := newBus(t, o)
	for _, s := range sessions {
		id, parent, _ := strings.Cut(s, ":")
		require.NoError(t, b.CreateSession(id, parent))
	}
	return b
}

// isDone reports whether ctx is done, without waiting.
func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

func TestTurnWritesOneStartAndOneEnd(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "s")
	tr, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t1"})
	require.NoError(t, err)
	assert.Equal(t, "t1", tr.ID())
	assert.Equal(t, "s", tr.Start().Session)
	assert.Equal(t, frame.TypeTurnStart, tr.Start().Type)
	assert.JSONEq(t, `{"turn":"t1","session":"s"}`, string(tr.Start().Data))
	active, ok := b.Turn("s", "")
	require.True(t, ok)
	assert.Equal(t, frame.TurnData{Turn: "t1", Session: "s", StartID: tr.Start().ID}, active)

	_, err = tr.Publish("msg", map[string]int{"n": 1})
	require.NoError(t, err)
	end, err := tr.End(nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"turn":"t1","reason":"complete"}`, string(end.Data))
	again, err := tr.End(errors.New("late"))
	require.NoError(t, err)
	assert.Equal(t, end, again, "a second End returns the first end")
	assert.False(t, isDone(tr.Context()), "a complete end does not cancel the context")

	_, err = tr.Publish("msg", nil)
	require.ErrorIs(t, err, eventbus.ErrTurnEnded)
	assert.ErrorContains(t, err, `turn "t1" of session "s"`)
	_, ok = b.Turn("s", "")
	assert.False(t, ok)
	got, ok := b.Turn("s", "t1")
	require.True(t, ok)
	assert.Equal(t, frame.TurnData{Turn: "t1", Session: "s", Reason: frame.ReasonComplete, StartID: tr.Start().ID, EndID: end.ID}, got)
	assert.Equal(t, []string{"start:t1", "msg", "end:t1:complete"}, turnLog(logOf(t, b, "s", scope.Session)))
	st := b.Stats()
	assert.Equal(t, [2]uint64{1, 1}, [2]uint64{st.TurnsStarted, st.TurnsEnded})
}

func TestTurnEndWithAnErrorRecordsItsText(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "s")
	tr, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{})
	require.NoError(t, err)
	assert.Regexp(t, `^turn_[0-9a-f]{16}$`, tr.ID(), "a generated id")
	end, err := tr.End(errors.New("quota exceeded"))
	require.NoError(t, err)
	assert.JSONEq(t, fmt.Sprintf(`{"turn":%q,"reason":"error","message":"quota exceeded"}`, tr.ID()), string(end.Data))
	assert.False(t, isDone(tr.Context()))
	long, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{})
	require.NoError(t, err)
	end, err = long.End(errors.New(strings.Repeat("é", 1000)))
	require.NoError(t, err)
	assert.Len(t, decode[frame.TurnData](t, end).Message, 1024, "the message is cut at 1 KiB, on a character boundary")
	assert.Equal(t, uint64(2), b.Stats().TurnsFailed)
}

func TestCancelEndsTheTurnAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  frame.TurnData
		log  []string
	}{
		{"by id", frame.TurnData{Turn: "t1", By: "alice"}, []string{"start:t1", "cancel:t1", "end:t1:cancelled"}},
		{"the session's active turn", frame.TurnData{}, []string{"start:t1", "cancel:*", "end:t1:cancelled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := created(t, eventbus.Options{}, "s")
			tr, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t1"})
			require.NoError(t, err)
			res, err := b.Cancel(context.Background(), "s", tc.req)
			require.NoError(t, err)
			assert.Equal(t, eventbus.CancelResult{Cancelled: []string{"t1"}, Held: []string{}}, res)
			require.True(t, isDone(tr.Context()), "the context is cancelled before Cancel returns")
			assert.ErrorIs(t, context.Cause(tr.Context()), context.Canceled)
			assert.ErrorContains(t, context.Cause(tr.Context()), `turn "t1" cancelled`)
			assert.Equal(t, tc.log, turnLog(logOf(t, b, "s", scope.Session)))

			end, err := tr.End(nil)
			require.NoError(t, err, "End after a cancel returns the cancelled end")
			assert.Equal(t, frame.ReasonCancelled, decode[frame.TurnData](t, end).Reason)
			assert.Equal(t, tc.log, turnLog(logOf(t, b, "s", scope.Session)), "no second end")
			_, err = tr.Publish("msg", nil)
			assert.ErrorIs(t, err, eventbus.ErrTurnEnded)
			assert.Equal(t, uint64(1), b.Stats().TurnsCancelled)
		})
	}
}

func TestCancelWithNothingActiveIsRecorded(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "s")
	res, err := b.Cancel(context.Background(), "s", frame.TurnData{By: "bob"})
	require.NoError(t, err)
	assert.Equal(t, eventbus.CancelResult{Cancelled: []string{}, Held: []string{}}, res)
	evs := logOf(t, b, "s", scope.Session)
	require.Len(t, evs, 1)
	assert.JSONEq(t, `{"by":"bob"}`, string(evs[0].Data))
	assert.Equal(t, "bob", evs[0].Origin, "By is the record's origin")
}

func TestCascadeCancelsEveryDescendantTurn(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "root", "a:root", "b:a", "c:b", "other")
	turns := map[string]*eventbus.Turn{}
	for _, s := range []string{"root", "a", "b", "c", "other"} {
		tr, err := b.StartTurn(context.Background(), s, eventbus.TurnOptions{ID: "t-" + s})
		require.NoError(t, err)
		turns[s] = tr
	}
	res, err := b.Cancel(context.Background(), "root", frame.TurnData{Cascade: true})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"t-root", "t-a", "t-b", "t-c"}, res.Cancelled)
	for s, tr := range turns {
		assert.Equal(t, s != "other", isDone(tr.Context()), "%s", s)
		_, active := b.Turn(s, "")
		assert.Equal(t, s == "other", active, "%s", s)
	}
	assert.Equal(t, []string{"start:t-root", "cancel:*+cascade", "end:t-root:cancelled"}, turnLog(logOf(t, b, "root", scope.Session)))
	assert.Equal(t, []string{"start:t-b", "end:t-b:cancelled"}, turnLog(logOf(t, b, "b", scope.Session)),
		"each end is written to its own turn's session")

	// A cascade from a child leaves its ancestors' turns alone.
	root2 := created(t, eventbus.Options{}, "r", "k:r")
	tr, err := root2.StartTurn(context.Background(), "r", eventbus.TurnOptions{ID: "tr"})
	require.NoError(t, err)
	_, err = root2.Cancel(context.Background(), "k", frame.TurnData{Cascade: true})
	require.NoError(t, err)
	assert.False(t, isDone(tr.Context()))
}

func TestHeldCancelAppliesWhenItsTurnStarts(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "s")
	res, err := b.Cancel(context.Background(), "s", frame.TurnData{Turn: "client-7"})
	require.NoError(t, err)
	assert.Equal(t, eventbus.CancelResult{Cancelled: []string{}, Held: []string{"client-7"}}, res)
	tr, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "client-7"})
	require.NoError(t, err, "the turn starts, and ends at once")
	assert.True(t, isDone(tr.Context()))
	end, err := tr.End(nil)
	require.NoError(t, err)
	assert.Equal(t, frame.ReasonCancelled, decode[frame.TurnData](t, end).Reason)
	assert.Equal(t, []string{"cancel:client-7", "start:client-7", "end:client-7:cancelled"}, turnLog(logOf(t, b, "s", scope.Session)))

	// Another session's turn of the same id is not touched.
	other := created(t, eventbus.Options{}, "x", "y")
	_, err = other.Cancel(context.Background(), "x", frame.TurnData{Turn: "t"})
	require.NoError(t, err)
	ty, err := other.StartTurn(context.Background(), "y", eventbus.TurnOptions{ID: "t"})
	require.NoError(t, err)
	assert.False(t, isDone(ty.Context()))
}

// A held cancel is applied only within Options.CancelHold of its record;
// at most 16 are held per session, the oldest going first.
func TestHeldCancelsAreBoundedInTimeAndCount(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := created(t, eventbus.Options{CancelHold: 30 * time.Second}, "s")
		_, err := b.Cancel(context.Background(), "s", frame.TurnData{Turn: "late"})
		require.NoError(t, err)
		time.Sleep(31 * time.Second)
		tr, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "late"})
		require.NoError(t, err)
		assert.False(t, isDone(tr.Context()), "the hold ended before the turn started")
		_, err = tr.End(nil)
		require.NoError(t, err)
		assert.Equal(t, uint64(1), b.Stats().CancelsExpired)

		for i := range 17 {
			_, err := b.Cancel(context.Background(), "s", frame.TurnData{Turn: fmt.Sprint("h", i)})
			require.NoError(t, err)
		}
		st := b.Stats()
		assert.Equal(t, [2]uint64{18, 2}, [2]uint64{st.CancelsHeld, st.CancelsExpired}, "h0 was pushed out")
		t0, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "h0"})
		require.NoError(t, err)
		assert.False(t, isDone(t0.Context()))
		_, err = t0.End(nil)
		require.NoError(t, err)
		t1, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "h1"})
		require.NoError(t, err)
		assert.True(t, isDone(t1.Context()))
	})
}

func TestStartTurnRefusals(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "s", "gone")
	busy, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "busy"})
	require.NoError(t, err)
	done, err := b.StartTurn(context.Background(), "gone", eventbus.TurnOptions{ID: "old"})
	require.NoError(t, err)
	_, err = done.End(nil)
	require.NoError(t, err)
	_, err = b.StartTurn(context.Background(), "gone", eventbus.TurnOptions{ID: "old"})
	require.ErrorIs(t, err, eventbus.ErrTurnEnded)
	assert.ErrorContains(t, err, `turn "old" of session "gone"`)
	require.NoError(t, b.CloseSession("gone"))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	closedBus := created(t, eventbus.Options{}, "s")
	require.NoError(t, closedBus.Close())

	for _, tc := range []struct {
		name    string
		bus     *eventbus.Bus
		ctx     context.Context
		session string
		o       eventbus.TurnOptions
		err     error
		text    string
	}{
		{"active turn", b, context.Background(), "s", eventbus.TurnOptions{}, eventbus.ErrTurnActive, `session "s" has turn "busy"`},
		{"bad id", b, context.Background(), "new", eventbus.TurnOptions{ID: "a\nb"}, eventbus.ErrInvalid, `turn id "a\nb" contains control character`},
		{"long id", b, context.Background(), "new", eventbus.TurnOptions{ID: strings.Repeat("x", 300)}, eventbus.ErrInvalid, `longer than 256`},
		{"bad origin", b, context.Background(), "new", eventbus.TurnOptions{Origin: "\x00"}, eventbus.ErrInvalid, `origin "\x00"`},
		{"unknown session", b, context.Background(), "new", eventbus.TurnOptions{}, eventbus.ErrSessionNotFound, `"new"`},
		{"closed session", b, context.Background(), "gone", eventbus.TurnOptions{}, eventbus.ErrSessionClosed, `"gone"`},
		{"context done", b, cancelled, "s", eventbus.TurnOptions{}, context.Canceled, ""},
		{"closed bus", closedBus, context.Background(), "s", eventbus.TurnOptions{}, eventbus.ErrClosed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			last := tc.bus.LastEventID()
			_, err := tc.bus.StartTurn(tc.ctx, tc.session, tc.o)
			require.ErrorIs(t, err, tc.err)
			assert.ErrorContains(t, err, tc.text)
			assert.Equal(t, last, tc.bus.LastEventID(), "nothing written")
		})
	}
	assert.False(t, isDone(busy.Context()))
}

func TestCancelRefusals(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "s", "gone")
	tr, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "done"})
	require.NoError(t, err)
	_, err = tr.End(nil)
	require.NoError(t, err)
	require.NoError(t, b.CloseSession("gone"))
	for _, tc := range []struct {
		name    string
		session string
		req     frame.TurnData
		err     error
		text    string
	}{
		{"ended turn", "s", frame.TurnData{Turn: "done"}, eventbus.ErrTurnEnded, `turn "done" of session "s"`},
		{"malformed turn id", "s", frame.TurnData{Turn: "x\ty"}, eventbus.ErrInvalid, `turn id "x\ty"`},
		{"malformed by", "s", frame.TurnData{By: "\n"}, eventbus.ErrInvalid, `By "\n"`},
		{"closed session", "gone", frame.TurnData{}, eventbus.ErrSessionClosed, `"gone"`},
		{"unknown session", "nope", frame.TurnData{}, eventbus.ErrSessionNotFound, `"nope"`},
		{"bad session id", "", frame.TurnData{}, eventbus.ErrInvalid, "empty session id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			last := b.LastEventID()
			_, err := b.Cancel(context.Background(), tc.session, tc.req)
			require.ErrorIs(t, err, tc.err)
			assert.ErrorContains(t, err, tc.text)
			assert.Equal(t, last, b.LastEventID(), "nothing written")
		})
	}
}

func TestTurnEndsWithItsContext(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "s")
	ctx, cancel := context.WithCancel(context.Background())
	tr, err := b.StartTurn(ctx, "s", eventbus.TurnOptions{ID: "t"})
	require.NoError(t, err)
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{NoReplay: true})
	cancel()
	ev := next(t, s)
	assert.Equal(t, "end:t:cancelled", turnLog([]eventbus.Event{ev})[0])
	assert.Equal(t, "context canceled", decode[frame.TurnData](t, ev).Message)
	<-tr.Context().Done()
	end, err := tr.End(nil)
	require.NoError(t, err)
	assert.Equal(t, ev.ID, end.ID)
}

func TestTurnContextCarriesValuesAndDeadline(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "s")
	type key struct{}
	dl := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.WithValue(context.Background(), key{}, "v"), dl)
	defer cancel()
	tr, err := b.StartTurn(ctx, "s", eventbus.TurnOptions{})
	require.NoError(t, err)
	assert.Equal(t, "v", tr.Context().Value(key{}))
	got, ok := tr.Context().Deadline()
	assert.True(t, ok)
	assert.Equal(t, dl, got)
	_, err = tr.End(nil)
	require.NoError(t, err)
}

func TestCloseSessionEndsItsTurn(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "p", "c:p")
	tr, err := b.StartTurn(context.Background(), "c", eventbus.TurnOptions{ID: "t"})
	require.NoError(t, err)
	require.NoError(t, b.CloseSession("c"))
	assert.True(t, isDone(tr.Context()))
	assert.ErrorIs(t, context.Cause(tr.Context()), context.Canceled)
	evs := logOf(t, b, "p", scope.Descendants)
	assert.Equal(t, []string{"start:t", "end:t:cancelled", frame.TypeSessionClosed}, turnLog(evs))
	assert.Equal(t, "session closed", decode[frame.TurnData](t, evs[1]).Message)
	end, err := tr.End(nil)
	require.NoError(t, err, "End returns the end the close wrote")
	assert.Equal(t, evs[1].ID, end.ID)
}

func TestBusCloseEndsTurnsAsProducerLost(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "s")
	tr, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t"})
	require.NoError(t, err)
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{NoReplay: true})
	require.NoError(t, b.Close())
	evs, err := readToEnd(t, s)
	require.ErrorIs(t, err, eventbus.ErrClosed)
	assert.Equal(t, []string{"end:t:producer_lost"}, turnLog(evs), "subscribers read the end before theirs")
	assert.True(t, isDone(tr.Context()))
	end, err := tr.End(nil)
	require.NoError(t, err)
	assert.Equal(t, evs[0].ID, end.ID)
}

func TestPublishRefusesTurnRecords(t *testing.T) {
	t.Parallel()
	b := created(t, eventbus.Options{}, "s")
	for _, typ := range []string{frame.TypeTurnStart, frame.TypeTurnEnd, frame.TypeTurnCancel, frame.TypePresence} {
		_, err := b.Publish("s", typ, map[string]string{"turn": "x"})
		require.ErrorIs(t, err, eventbus.ErrInvalid, typ)
		assert.ErrorContains(t, err, fmt.Sprintf("event type %q is reserved", typ))
	}
	assert.Zero(t, b.LastEventID())
}
