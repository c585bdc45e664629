package eventbus_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
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
