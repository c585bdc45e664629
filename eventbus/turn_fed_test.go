package eventbus_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/backend"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// eventually waits (bounded) until cond holds.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	require.Eventually(t, cond, waitFor, time.Millisecond, what)
}

// nodeLog waits until b's replay of session holds n turn records and
// returns them as turnLog renders them.
func nodeLog(t *testing.T, b *eventbus.Bus, session string, n int) []string {
	t.Helper()
	// The node learns the session from its feed, maybe after the caller's
	// write returned (a subscribe before it is session_not_found).
	eventually(t, func() bool { return b.SessionExists(session) }, "the node learns the session")
	var got []string
	eventually(t, func() bool {
		got = turnLog(logOf(t, b, session, scope.Session))
		return len(got) >= n
	}, "the feed brings the records")
	return got
}

// A cancel sent to any node reaches the producer on the node that runs
// the turn; every node stores the same records, one end.
func TestTurnCancelledFromAnotherNode(t *testing.T) {
	t.Parallel()
	c := newCluster()
	a, _ := c.join(t, "a", eventbus.Options{})
	b, _ := c.join(t, "b", eventbus.Options{})
	require.NoError(t, a.CreateSession("s", ""))
	eventually(t, func() bool { return b.SessionExists("s") }, "b learns the session")

	tr, err := a.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t1"})
	require.NoError(t, err)
	eventually(t, func() bool { _, ok := b.Turn("s", ""); return ok }, "b knows the turn is active")
	got, _ := b.Turn("s", "")
	assert.Equal(t, frame.TurnData{Turn: "t1", Session: "s", StartID: tr.Start().ID}, got)
	_, err = b.StartTurn(context.Background(), "s", eventbus.TurnOptions{})
	require.ErrorIs(t, err, eventbus.ErrTurnActive)

	res, err := b.Cancel(context.Background(), "s", frame.TurnData{Turn: "t1", By: "alice"})
	require.NoError(t, err)
	assert.Equal(t, []string{"t1"}, res.Cancelled)
	select {
	case <-tr.Context().Done():
	case <-time.After(waitFor):
		t.Fatal("the producer's context is not cancelled")
	}
	want := []string{"start:t1", "cancel:t1", "end:t1:cancelled"}
	assert.Equal(t, want, nodeLog(t, a, "s", 3))
	assert.Equal(t, want, nodeLog(t, b, "s", 3))
	end, err := tr.End(nil)
	require.NoError(t, err)
	assert.Equal(t, frame.ReasonCancelled, decode[frame.TurnData](t, end).Reason)
	eventually(t, func() bool { _, ok := b.Turn("s", ""); return !ok }, "b knows the turn ended")
	_, err = b.Cancel(context.Background(), "s", frame.TurnData{Turn: "t1"})
	require.ErrorIs(t, err, eventbus.ErrTurnEnded)
}

// A cancel held on one node applies when the turn starts on another.
func TestHeldCancelAcrossNodes(t *testing.T) {
	t.Parallel()
	c := newCluster()
	a, _ := c.join(t, "a", eventbus.Options{})
	b, _ := c.join(t, "b", eventbus.Options{})
	require.NoError(t, a.CreateSession("s", ""))
	eventually(t, func() bool { return b.SessionExists("s") }, "b learns the session")
	res, err := b.Cancel(context.Background(), "s", frame.TurnData{Turn: "early"})
	require.NoError(t, err)
	assert.Equal(t, []string{"early"}, res.Held)
	eventually(t, func() bool { return len(turnLog(logOf(t, a, "s", scope.Session))) == 1 }, "a has the cancel")
	tr, err := a.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "early"})
	require.NoError(t, err)
	<-tr.Context().Done()
	want := []string{"cancel:early", "start:early", "end:early:cancelled"}
	assert.Equal(t, want, nodeLog(t, b, "s", 3))
	assert.Equal(t, want, nodeLog(t, a, "s", 3))
}

// Two nodes starting a turn on one session at once: one turn starts, the
// other start is refused, and no node stores the refused turn_start.
func TestRacingStartsOnTwoNodes(t *testing.T) {
	t.Parallel()
	c := newCluster()
	a, _ := c.join(t, "a", eventbus.Options{})
	b, _ := c.join(t, "b", eventbus.Options{})
	require.NoError(t, a.CreateSession("s", ""))
	eventually(t, func() bool { return b.SessionExists("s") }, "b learns the session")
	var wg sync.WaitGroup
	turns := make([]*eventbus.Turn, 2)
	errs := make([]error, 2)
	for i, bus := range []*eventbus.Bus{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			turns[i], errs[i] = bus.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: string(rune('x' + i))})
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		if err == nil {
			won++
			_, err := turns[i].End(nil)
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, eventbus.ErrTurnActive)
		}
	}
	require.Equal(t, 1, won, "exactly one start wins")
	la, lb := nodeLog(t, a, "s", 2), nodeLog(t, b, "s", 2)
	assert.Equal(t, la, lb)
	assert.Len(t, la, 2, "one start, one end: %v", la)
}

// A node killed while it runs a turn: the others end the turn for it,
// once, however many of them announce it.
func TestProducerLostOnce(t *testing.T) {
	t.Parallel()
	c := newCluster()
	a, na := c.join(t, "a", eventbus.Options{})
	b, _ := c.join(t, "b", eventbus.Options{})
	d, _ := c.join(t, "d", eventbus.Options{})
	require.NoError(t, a.CreateSession("s", ""))
	tr, err := a.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t"})
	require.NoError(t, err)
	for _, x := range []*eventbus.Bus{b, d} {
		eventually(t, func() bool { _, ok := x.Turn("s", ""); return ok }, "the turn is known")
	}
	c.kill(na)
	for _, x := range []*eventbus.Bus{b, d} {
		assert.Equal(t, []string{"start:t", "end:t:producer_lost"}, nodeLog(t, x, "s", 2))
		_, ok := x.Turn("s", "")
		assert.False(t, ok)
		got, ok := x.Turn("s", "t")
		require.True(t, ok)
		assert.Equal(t, "lease expired", got.Message)
	}
	time.Sleep(20 * time.Millisecond) // the other announcements land (ignored)
	assert.Equal(t, []string{"start:t", "end:t:producer_lost"}, turnLog(logOf(t, b, "s", scope.Session)))
	assert.Equal(t, uint64(1), b.Stats().TurnsLost)
	_ = tr
}

// A second turn_end a backend brings (two nodes racing, a redelivery) is
// not stored: its id is consumed, nothing is delivered.
func TestSecondEndFromTheFeedIsNotStored(t *testing.T) {
	t.Parallel()
	b, fb := newFedBus(t)
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{NoReplay: true})
	ingest := func(id uint64, typ string, d any) {
		fb.feed.Ingest([]string{"s"}, backend.Record{ID: id, Type: typ, Data: mustJSONTest(t, d), Time: time.Unix(0, int64(id))})
	}
	ingest(1, frame.TypeTurnStart, frame.TurnData{Turn: "t", Session: "s"})
	ingest(2, frame.TypeTurnEnd, frame.TurnData{Turn: "t", Reason: frame.ReasonComplete})
	ingest(3, frame.TypeTurnEnd, frame.TurnData{Turn: "t", Reason: frame.ReasonProducerLost})
	ingest(4, frame.TypeTurnEnd, frame.TurnData{Turn: "never", Reason: frame.ReasonComplete})
	ingest(5, frame.TypeTurnStart, frame.TurnData{Turn: "u", Session: "s"})
	ingest(6, frame.TypeTurnStart, frame.TurnData{Turn: "v", Session: "s"}) // u is active
	ingest(7, frame.TypeTurnStart, frame.TurnData{Turn: "\n"})
	ingest(8, "msg", nil)
	assert.Equal(t, []string{"1:turn_start", "2:turn_end", "5:turn_start", "8"}, describe(drain(s)))
	got, _ := b.Turn("s", "")
	assert.Equal(t, "u", got.Turn)
	assert.Equal(t, uint64(8), b.LastEventID())
}

// Presence over nodes: a client's reconnect to another node within the
// grace is no leave and join; a killed node's clients leave.
func TestPresenceAcrossNodes(t *testing.T) {
	t.Parallel()
	c := newCluster()
	a, na := c.join(t, "a", eventbus.Options{})
	b, _ := c.join(t, "b", eventbus.Options{})
	require.NoError(t, a.CreateSession("s", ""))
	eventually(t, func() bool { return b.SessionExists("s") }, "b learns the session")
	watcher := subscribe(t, b, "s", eventbus.SubscribeOptions{Client: "w", Presence: true})
	var seen []frame.PresenceData
	read := func(n int) []frame.PresenceData {
		t.Helper()
		eventually(t, func() bool { seen = append(seen, presences(t, drain(watcher))...); return len(seen) >= n }, "presence frames")
		out := seen
		seen = nil
		return out
	}
	assert.Equal(t, []frame.PresenceData{{Session: "s", Clients: 1, Status: "idle"}}, read(1))

	onA := subscribe(t, a, "s", eventbus.SubscribeOptions{Client: "c"})
	assert.Equal(t, []frame.PresenceData{{Session: "s", Clients: 2, Status: "idle", Joined: []string{"c"}}}, read(1))
	require.NoError(t, a.SetStatus("s", "thinking"))
	assert.Equal(t, []frame.PresenceData{{Session: "s", Clients: 2, Status: "thinking"}}, read(1))
	p, err := b.Presence("s")
	require.NoError(t, err)
	assert.Equal(t, frame.PresenceData{Session: "s", Clients: 2, Status: "thinking"}, p)

	// c moves to b: within a's grace, nothing changes for b's watcher.
	onA.Close()
	subscribe(t, b, "s", eventbus.SubscribeOptions{Client: "c"})
	time.Sleep(20 * time.Millisecond)
	assert.Empty(t, presences(t, drain(watcher)))

	// a dies: its part goes (c stays, attached to b); its clients leave.
	subscribe(t, a, "s", eventbus.SubscribeOptions{Client: "only-on-a"})
	assert.Equal(t, []string{"only-on-a"}, read(1)[0].Joined)
	c.kill(na)
	got := read(1)
	assert.Equal(t, []string{"only-on-a"}, got[len(got)-1].Left)
	assert.Equal(t, 2, got[len(got)-1].Clients, "w and c")
}

// mustJSONTest encodes v.
func mustJSONTest(t *testing.T, v any) json.RawMessage {
	t.Helper()
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// A node that closes says goodbye: its turns end (producer_lost) at once
// on every node, without waiting for a lease.
func TestClosingNodeEndsItsTurns(t *testing.T) {
	t.Parallel()
	c := newCluster()
	a, _ := c.join(t, "a", eventbus.Options{})
	b, _ := c.join(t, "b", eventbus.Options{})
	require.NoError(t, a.CreateSession("s", ""))
	tr, err := a.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t"})
	require.NoError(t, err)
	require.NoError(t, a.Close())
	assert.True(t, isDone(tr.Context()))
	assert.Equal(t, []string{"start:t", "end:t:producer_lost"}, nodeLog(t, b, "s", 2))
	got, ok := b.Turn("s", "t")
	require.True(t, ok)
	assert.Equal(t, "bus closed", got.Message)
}

// Closing a session on one node ends the turn another node runs in it,
// before session_closed, and cancels that producer's context.
func TestSessionClosedOnAnotherNode(t *testing.T) {
	t.Parallel()
	c := newCluster()
	a, _ := c.join(t, "a", eventbus.Options{})
	b, _ := c.join(t, "b", eventbus.Options{})
	require.NoError(t, a.CreateSession("p", ""))
	require.NoError(t, a.CreateSession("s", "p"))
	eventually(t, func() bool { return b.SessionExists("s") }, "b learns the session")
	tr, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t"})
	require.NoError(t, err)
	eventually(t, func() bool { _, ok := a.Turn("s", ""); return ok }, "a knows the turn")
	require.NoError(t, a.CloseSession("s"))
	select {
	case <-tr.Context().Done():
	case <-time.After(waitFor):
		t.Fatal("the producer's context is not cancelled")
	}
	var got []string
	eventually(t, func() bool {
		got = turnLog(logOf(t, a, "p", scope.Descendants))
		return len(got) == 3
	}, "the close arrives")
	assert.Equal(t, []string{"start:t", "end:t:cancelled", frame.TypeSessionClosed}, got)
	end, err := tr.End(nil)
	require.NoError(t, err)
	assert.Equal(t, frame.ReasonCancelled, decode[frame.TurnData](t, end).Reason)
}

// Over a backend a producer's End can reach the log after a cancel from
// another node: that end (complete, error) is not stored, on any node;
// the cancelled end the owner writes for the cancel is.
func TestEndAfterCancelIsRefused(t *testing.T) {
	t.Parallel()
	b, fb := newFedBus(t)
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{NoReplay: true})
	ingest := func(id uint64, typ string, d any) {
		fb.feed.Ingest([]string{"s"}, backend.Record{ID: id, Type: typ, Data: mustJSONTest(t, d), Time: time.Unix(0, int64(id))})
	}
	ingest(1, frame.TypeTurnStart, frame.TurnData{Turn: "t", Session: "s"})
	ingest(2, frame.TypeTurnCancel, frame.TurnData{Turn: "t"})
	ingest(3, frame.TypeTurnEnd, frame.TurnData{Turn: "t", Reason: frame.ReasonComplete})
	ingest(4, frame.TypeTurnEnd, frame.TurnData{Turn: "t", Reason: frame.ReasonError, Message: "late"})
	ingest(5, frame.TypeTurnEnd, frame.TurnData{Turn: "t", Reason: frame.ReasonCancelled})
	assert.Equal(t, []string{"1:turn_start", "2:turn_cancel", "5:turn_end"}, describe(drain(s)))
	got, ok := b.Turn("s", "t")
	require.True(t, ok)
	assert.Equal(t, frame.ReasonCancelled, got.Reason)
}

// A start that reuses the id of a turn another node ended, sent before
// this node's feed brought that end: its turn_start reaches the log after
// the end, so no node stores it, and StartTurn says why — ErrTurnEnded,
// not ErrTurnActive (no turn is active).
func TestStartReusingAnIDEndedOnAnotherNodeIsTurnEnded(t *testing.T) {
	t.Parallel()
	c := newCluster()
	a, _ := c.join(t, "a", eventbus.Options{})
	b, nb := c.join(t, "b", eventbus.Options{})
	require.NoError(t, a.CreateSession("s", ""))
	eventually(t, func() bool { return b.SessionExists("s") }, "b learns the session")
	nb.gate.Lock() // b's feed stalls: b does not learn of x
	tr, err := a.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "x"})
	require.NoError(t, err)
	_, err = tr.End(nil)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		_, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "x"})
		errc <- err
	}()
	eventually(t, func() bool { return c.logLen() == 4 }, "b's turn_start is stored in the backend") // created, start, end, start
	nb.gate.Unlock()
	select {
	case err = <-errc:
	case <-time.After(waitFor):
		t.Fatal("StartTurn does not return")
	}
	require.ErrorIs(t, err, eventbus.ErrTurnEnded)
	assert.ErrorContains(t, err, `turn "x" of session "s"`)
	want := []string{"start:x", "end:x:complete"}
	assert.Equal(t, want, nodeLog(t, a, "s", 2))
	assert.Equal(t, want, nodeLog(t, b, "s", 2))
	_, active := b.Turn("s", "")
	assert.False(t, active)
}

// stuckShare is a cluster node whose SharePresence blocks until its
// context ends, as a NATS request whose reply was lost does (the node was
// cut off while it was in flight).
type stuckShare struct {
	*node
	entered chan struct{}
	once    sync.Once
	ended   chan error
}

func (s *stuckShare) SharePresence(ctx context.Context, _ string, _ []byte, _ time.Duration) error {
	s.once.Do(func() { close(s.entered) })
	<-ctx.Done()
	s.ended <- ctx.Err()
	return ctx.Err()
}

// Close does not wait out a presence share in flight: the share is
// moot once the bus closes (the backend's Close drops the node's parts,
// or they expire with its lease), so Close cancels it.
func TestCloseCancelsPresenceShareInFlight(t *testing.T) {
	t.Parallel()
	c := newCluster()
	n := &node{c: c, name: "a", wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	c.nodes = append(c.nodes, n)
	be := &stuckShare{node: n, entered: make(chan struct{}), ended: make(chan error, 8)}
	b, err := eventbus.NewWithBackend(context.Background(), eventbus.Options{}, be)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	require.NoError(t, b.CreateSession("s", ""))
	subscribe(t, b, "s", eventbus.SubscribeOptions{Client: "c"})
	select {
	case <-be.entered:
	case <-time.After(waitFor):
		t.Fatal("the client's part was never shared")
	}
	start := time.Now()
	require.NoError(t, b.Close())
	// Before: Close waited for the share's own timeout (10 s).
	assert.Less(t, time.Since(start), 2*time.Second, "Close waited for a presence share in flight")
	assert.ErrorIs(t, <-be.ended, context.Canceled, "the share's context is cancelled by Close")
}
