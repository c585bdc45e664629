package nats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// cutOff cuts n (connected through p) off from NATS and returns once n has
// noticed: its subscriptions then ended with ErrBackend.
func cutOff(t *testing.T, n *node, p *proxy) {
	t.Helper()
	canary, err := n.bus.Subscribe(context.Background(), "_canary", eventbus.SubscribeOptions{NoReplay: true})
	require.NoError(t, err)
	defer canary.Close()
	p.Cut()
	select {
	case <-canary.Done():
		require.ErrorIs(t, canary.Err(), eventbus.ErrBackend)
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not notice it was cut off")
	}
}

// TestLaggingNodeHidesNoGapFromLiveSubscriber is issue 12's input 1: two
// nodes over one JetStream server, ReplayBufferSize 5; node B reads ids up
// to 4, then loses its NATS connection; while it is cut off a client
// subscribes on B with cursor 4; node A publishes 5…24; B reconnects. With
// the stream keeping only the ring (retention 1) JetStream deleted 5…19
// before B read them: the client must get state_resync_required{feed_gap}
// before 20…24, not a silent gap. With the default retention (20 rings)
// nothing was deleted: the client gets 5…24 and no frame.
func TestLaggingNodeHidesNoGapFromLiveSubscriber(t *testing.T) {
	t.Parallel() // a cluster that mostly waits on elections and timeouts: make test runs these side by side
	for _, tc := range []struct {
		name      string
		retention int
	}{{"retention 1", 1}, {"default retention", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := eventbus.Options{ReplayBufferSize: 5}
			opts := withRetention(tc.retention, uniqueStream())
			p := newProxy(t, shared.ClientURL()[len("nats://"):])
			a := newNode(t, shared.ClientURL(), cfg, opts...)
			b := newNode(t, p.URL(), cfg, opts...)
			var ids []uint64
			for i := 1; i <= 4; i++ {
				ev, err := a.bus.Publish("s", "msg", i)
				require.NoError(t, err)
				ids = append(ids, ev.ID)
			}
			syncNode(t, b.bus)
			cursor := ids[3]

			cutOff(t, b, p)
			sub, err := b.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{ID: cursor, Epoch: b.bus.Epoch()}})
			require.NoError(t, err)
			defer sub.Close()
			ev := next(t, sub)
			require.Equal(t, frame.TypeReplayComplete, ev.Type, "nothing to replay after %d", cursor)

			var later []uint64
			for i := 5; i <= 24; i++ {
				ev, err := a.bus.Publish("s", "msg", i)
				require.NoError(t, err)
				later = append(later, ev.ID)
			}
			p.Restore()

			if tc.retention == 1 {
				ev = next(t, sub)
				require.Equal(t, frame.TypeStateResyncRequired, ev.Type, "a silent gap: got %s %d", ev.Type, ev.ID)
				var d frame.ResyncData
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				assert.Equal(t, frame.ResyncData{Reason: frame.ReasonFeedGap, LastDeliveredID: cursor, CompleteFromID: later[15]}, d)
				got, frames := readIDs(t, sub, 5)
				assert.Equal(t, later[15:], got)
				assert.Empty(t, frames)
			} else {
				got, frames := readIDs(t, sub, 20)
				assert.Equal(t, later, got)
				assert.Empty(t, frames, "nothing was lost: no frame")
			}
			// A resume from the old cursor is told the same way.
			syncNode(t, b.bus)
			again, err := b.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{ID: cursor, Epoch: b.bus.Epoch()}})
			require.NoError(t, err)
			defer again.Close()
			first := next(t, again)
			assert.Equal(t, frame.TypeStateResyncRequired, first.Type, "ring of 5 holds 20…24 only")
		})
	}
}

// sequence is what one subscriber received: ids and gap frames in order.
type sequence struct {
	ids    []uint64
	frames []eventbus.Event // the synthetic frames
	at     []int            // at[i]: len(ids) when frames[i] arrived
}

// collect reads s until it has received last, or fails after 60 s.
func collect(t *testing.T, s *eventbus.Subscription, last uint64) (seq sequence, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			return seq, fmt.Errorf("after %d ids: %w", len(seq.ids), err)
		}
		if ev.ID == 0 {
			seq.frames = append(seq.frames, ev)
			seq.at = append(seq.at, len(seq.ids))
			continue
		}
		seq.ids = append(seq.ids, ev.ID)
		if ev.ID >= last {
			return seq, nil
		}
	}
}

// checkAnnounced fails unless seq holds published ids in order, and every
// published id it lacks is announced by a state_resync_required frame
// between the ids around it. It returns the number of ids lost.
func checkAnnounced(t *testing.T, who string, published []uint64, seq sequence) int {
	t.Helper()
	checkStrict(t, seq.ids)
	frameBefore := map[int]bool{} // a frame arrived before ids[i]
	for i, f := range seq.frames {
		require.Equal(t, frame.TypeStateResyncRequired, f.Type, "%s: unexpected frame %s", who, f.Data)
		frameBefore[seq.at[i]] = true
	}
	lost, j := 0, 0
	for i, id := range seq.ids {
		gap := false
		for j < len(published) && published[j] < id {
			gap, lost, j = true, lost+1, j+1
		}
		require.True(t, j < len(published) && published[j] == id, "%s: id %d never published", who, id)
		j++
		if gap {
			require.True(t, frameBefore[i], "%s: silent gap before id %d", who, id)
		}
	}
	return lost
}

// TestFlatOutNoSilentLoss is issue 14's input: one publisher flat out
// (pipelined) into one session with the default ring, 10 live subscribers
// on another node and 10 on the publishing node. Every subscriber receives
// every id or an announced gap, never a silent one; with the default
// retention none is lost. With retention 1 (the stream keeps only the
// ring), the other node is frozen for a while mid-run so that JetStream
// deletes events it has not read, and its subscribers must be told.
func TestFlatOutNoSilentLoss(t *testing.T) {
	const total = 6000
	for _, tc := range []struct {
		name      string
		retention int
		freeze    bool
	}{{"default retention", 0, false}, {"retention 1, other node frozen", 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := eventbus.Options{MaxQueueSize: 2 * total, MaxQueuedBytes: 1 << 30}
			opts := withRetention(tc.retention, uniqueStream())
			p := newProxy(t, shared.ClientURL()[len("nats://"):])
			a := newNode(t, shared.ClientURL(), cfg, opts...)
			b := newNodeOpts(t, p.URL(), cfg, []natsgo.Option{natsgo.PingInterval(time.Minute)}, opts...)
			const perNode = 10
			var subs []*eventbus.Subscription
			for _, n := range []*node{a, b} {
				for range perNode {
					s, err := n.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{NoReplay: true})
					require.NoError(t, err)
					t.Cleanup(s.Close)
					subs = append(subs, s)
				}
			}
			var published []uint64
			var pubMu sync.Mutex
			var acked atomic.Uint64
			pl, err := eventbus.NewPipeline(a.bus, eventbus.PipelineOptions{OnStored: func(ev eventbus.Event) {
				pubMu.Lock()
				published = append(published, ev.ID)
				pubMu.Unlock()
				acked.Store(ev.ID)
			}})
			require.NoError(t, err)
			// How far node B falls behind, for the log (sizing data).
			var maxLag atomic.Int64
			stopLag := make(chan struct{})
			lagDone := make(chan struct{})
			go func() {
				defer close(lagDone)
				tick := time.NewTicker(time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stopLag:
						return
					case <-tick.C:
						if lag := int64(acked.Load()) - int64(b.be.Ingested()); lag > maxLag.Load() {
							maxLag.Store(lag)
						}
					}
				}
			}()
			for i := range total {
				if tc.freeze && i == total/3 {
					p.Pause()
				}
				if tc.freeze && i == 2*total/3 {
					p.Resume()
				}
				require.NoError(t, pl.Publish("s", "agent_message_chunk", json.RawMessage(`{"i":1}`)))
			}
			require.NoError(t, pl.Flush(context.Background()))
			require.Len(t, published, total)
			checkStrict(t, published) // one caller's events in order
			last := published[len(published)-1]

			type result struct {
				seq sequence
				err error
			}
			results := make([]result, len(subs))
			var wg sync.WaitGroup
			for i, s := range subs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					seq, err := collect(t, s, last)
					results[i] = result{seq, err}
				}()
			}
			wg.Wait()
			close(stopLag)
			<-lagDone
			lostB := 0
			for i, r := range results {
				who := fmt.Sprintf("subscriber %d on node %c", i%perNode, "AB"[i/perNode])
				require.NoError(t, r.err, who)
				lost := checkAnnounced(t, who, published, r.seq)
				if i >= perNode {
					lostB += lost
				}
				if !tc.freeze {
					assert.Zero(t, lost, "%s lost events with the default retention", who)
					assert.Empty(t, r.seq.frames, who)
				}
			}
			if tc.freeze {
				assert.Positive(t, lostB, "node B was frozen for %d events with retention 1: JetStream must have deleted some", total/3)
			}
			t.Logf("node B lagged up to %d events; its subscribers lost %d events in all", maxLag.Load(), lostB)
		})
	}
}

// TestPipelineFailureNamesUnknownEvents: a pipeline whose acks stop
// coming (the node's connection frozen) reports, once the publish timeout
// has passed, exactly the events whose fate is unknown, in order; events
// acknowledged before were reported with ids equal to the stream sequence,
// rising in publish order; afterwards the pipeline works again.
func TestPipelineFailureNamesUnknownEvents(t *testing.T) {
	p := newProxy(t, shared.ClientURL()[len("nats://"):])
	n := newNodeOpts(t, p.URL(), eventbus.Options{}, []natsgo.Option{natsgo.PingInterval(time.Minute)},
		uniqueStream(rbnats.WithPublishTimeout(300*time.Millisecond), rbnats.WithHeartbeat(5*time.Second))...)
	var stored []eventbus.Event
	pl, err := eventbus.NewPipeline(n.bus, eventbus.PipelineOptions{Window: 8, OnStored: func(ev eventbus.Event) { stored = append(stored, ev) }})
	require.NoError(t, err)
	for i := range 5 {
		require.NoError(t, pl.Publish("s", "msg", i))
	}
	require.NoError(t, pl.Flush(context.Background()))
	require.Len(t, stored, 5)
	for i := 1; i < len(stored); i++ {
		require.Greater(t, stored[i].ID, stored[i-1].ID, "ids rise in publish order")
	}
	js, err := jetstream.New(n.nc)
	require.NoError(t, err)
	st, err := js.Stream(context.Background(), n.be.Stream())
	require.NoError(t, err)
	m, err := st.GetMsg(context.Background(), stored[4].ID)
	require.NoError(t, err)
	assert.Equal(t, stored[4].ID, m.Sequence, "the id is the stream sequence")

	// The node's consumer is up and has confirmed the stream (it does so
	// when it starts, and a publish waits for that): freezing the
	// connection now leaves only the acks outstanding.
	syncNode(t, n.bus)
	p.Pause()
	for i := 5; i < 8; i++ {
		require.NoError(t, pl.Publish("s", "msg", i), "sent without waiting")
	}
	err = pl.Flush(context.Background())
	var perr *eventbus.PipelineError
	require.ErrorAs(t, err, &perr)
	require.ErrorIs(t, err, rbnats.ErrNoAck)
	var unknown []string
	for _, ev := range perr.Unknown {
		assert.Zero(t, ev.ID)
		unknown = append(unknown, string(ev.Data))
	}
	assert.Equal(t, []string{"5", "6", "7"}, unknown)

	p.Resume()
	stored = nil
	require.NoError(t, pl.Publish("s", "msg", 8))
	require.NoError(t, pl.Flush(context.Background()))
	require.Len(t, stored, 1)
	assert.Greater(t, stored[0].ID, uint64(0))

	// Closing the node fails what still waits for an ack at once, with
	// ErrClosed (not after the publish timeout, with ErrNoAck alone).
	p.Pause()
	require.NoError(t, pl.Publish("s", "msg", 9))
	require.NoError(t, n.bus.Close())
	err = pl.Flush(context.Background())
	require.ErrorAs(t, err, &perr)
	assert.ErrorIs(t, err, eventbus.ErrClosed)
	assert.Len(t, perr.Unknown, 1)
	p.Resume()
}
