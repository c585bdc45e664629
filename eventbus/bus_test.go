package eventbus_test

import (
	"context"
	"encoding/json"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/backend"
	"github.com/replaybus/replaybus/eventbus/frame"
)

func TestHistoryPrecedesLive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts eventbus.SubscribeOptions
		want []string
	}{
		{"default replays the ring", eventbus.SubscribeOptions{},
			[]string{"1r", "2r", "3r", "4r", "5r", "6", "7", "8"}},
		{"cursor 0 replays all and completes", eventbus.SubscribeOptions{Cursor: eventbus.At(0)},
			[]string{"1r", "2r", "3r", "4r", "5r", "replay_complete", "6", "7", "8"}},
		{"cursor 3", eventbus.SubscribeOptions{Cursor: eventbus.At(3)},
			[]string{"4r", "5r", "replay_complete", "6", "7", "8"}},
		{"NoReplay", eventbus.SubscribeOptions{NoReplay: true},
			[]string{"6", "7", "8"}},
		{"NoReplay wins over a cursor (AgentPool's replay=False)", eventbus.SubscribeOptions{NoReplay: true, Cursor: eventbus.At(4)},
			[]string{"6", "7", "8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBus(t, eventbus.Options{})
			publish(t, b, "s", 5)
			s := subscribe(t, b, "s", tt.opts)
			publish(t, b, "s", 3)
			got := readN(t, s, len(tt.want))
			assert.Equal(t, tt.want, describe(got))
			assert.Empty(t, drain(s))
			for _, e := range got {
				if e.ID != 0 {
					assert.Equal(t, "s", e.Session)
					assert.Equal(t, e.ID <= 5, e.Replay, "Replay flag of %d", e.ID)
				}
			}
			assert.Zero(t, b.Stats().Guarded)
		})
	}
}

// A subscriber joins while another goroutine publishes: with cursor 50 it
// gets exactly 51…1000, whatever the interleaving.
func TestSubscribeRacingPublish(t *testing.T) {
	t.Parallel()
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	for round := 0; round < rounds; round++ {
		b, err := eventbus.New(eventbus.Options{ReplayBufferSize: 1000, MaxQueueSize: 2000})
		require.NoError(t, err)
		publish(t, b, "s", 50)
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := 51; i <= 1000; i++ {
				if _, err := b.Publish("s", "msg", nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		close(start)
		s, err := b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: eventbus.At(50)})
		require.NoError(t, err)
		var got []uint64
		completes := 0
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		for len(got) == 0 || got[len(got)-1] < 1000 {
			ev, err := s.Next(ctx)
			require.NoError(t, err, "round %d", round)
			switch {
			case ev.ID != 0:
				got = append(got, ev.ID)
			case ev.Type == frame.TypeReplayComplete:
				completes++
			default:
				require.Failf(t, "unexpected frame", "round %d: %s %s", round, ev.Type, ev.Data)
			}
		}
		wg.Wait()
		// The whole tail may have been replayed: replay_complete then
		// follows event 1000.
		for _, ev := range drain(s) {
			require.Equal(t, frame.TypeReplayComplete, ev.Type, "round %d", round)
			completes++
		}
		require.Equal(t, seq(51, 1000), got, "round %d", round)
		require.Equal(t, 1, completes, "round %d", round)
		require.Zero(t, b.Stats().Guarded)
		cancel()
		s.Close()
		require.NoError(t, b.Close())
	}
}

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
		{"panicking marshaler", "s", "msg", panicky{}},
		{"over-long type", "s", string(make([]byte, eventbus.MaxNameLen+1)), nil},
		{"forged session_closed", "s", frame.TypeSessionClosed, nil},
		{"forged client_evicted", "s", frame.TypeClientEvicted, nil},
		{"forged replay_complete", "s", frame.TypeReplayComplete, nil},
		{"forged state_resync_required", "s", frame.TypeStateResyncRequired, nil},
		{"forged slow_client_warning", "s", frame.TypeSlowClientWarning, nil},
		{"internal control type", "s", backend.TypeSessionCreated, nil},
	}
	b := newBus(t, eventbus.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.Publish(tt.session, tt.typ, tt.data)
			require.ErrorIs(t, err, eventbus.ErrInvalid)
			assert.Contains(t, err.Error(), "eventbus: ")
		})
	}
	// No refused event consumed an id; a nil option is ignored.
	ev, err := b.Publish("s", "msg", "ok", nil)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), ev.ID)
	assert.Equal(t, uint64(1), b.Stats().Published)
}

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

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := eventbus.New(eventbus.Options{MaxQueueSize: -5})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MaxQueueSize")
	_, err = eventbus.New(eventbus.Options{Epoch: "bad epoch"})
	require.ErrorIs(t, err, eventbus.ErrInvalid)

	b := newBus(t, eventbus.Options{Epoch: "e1"})
	assert.Equal(t, "e1", b.Epoch())
	b1, b2 := newBus(t, eventbus.Options{}), newBus(t, eventbus.Options{})
	assert.Len(t, b1.Epoch(), 16)
	assert.NotEqual(t, b1.Epoch(), b2.Epoch())
	assert.Equal(t, eventbus.Options{}.WithDefaults().ReplayBufferSize, b1.Options().ReplayBufferSize)
}

func TestSubscribeValidation(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		session string
		opts    eventbus.SubscribeOptions
		want    error
	}{
		{"empty session", context.Background(), "", eventbus.SubscribeOptions{}, eventbus.ErrInvalid},
		{"bad scope", context.Background(), "s", eventbus.SubscribeOptions{Scope: 9}, eventbus.ErrInvalid},
		{"MaxQueued < 0", context.Background(), "s", eventbus.SubscribeOptions{MaxQueued: -1}, eventbus.ErrInvalid},
		{"MaxQueuedBytes < 0", context.Background(), "s", eventbus.SubscribeOptions{MaxQueuedBytes: -1}, eventbus.ErrInvalid},
		{"block policy", context.Background(), "s", eventbus.SubscribeOptions{Policy: "block"}, eventbus.ErrInvalid},
		{"bad epoch", context.Background(), "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{ID: 1, Epoch: "a-b"}}, eventbus.ErrInvalid},
		{"RequireSession", context.Background(), "nope", eventbus.SubscribeOptions{RequireSession: true}, eventbus.ErrSessionNotFound},
		{"cancelled context", cancelled, "s", eventbus.SubscribeOptions{}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := b.Subscribe(tt.ctx, tt.session, tt.opts)
			require.ErrorIs(t, err, tt.want)
			assert.Nil(t, s)
		})
	}
	assert.Zero(t, b.Stats().Subscribers)
	assert.False(t, b.SessionExists("nope"))
}
