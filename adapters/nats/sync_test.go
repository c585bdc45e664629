package nats_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/producer"
	"github.com/replaybus/replaybus/internal/testkit"
)

// Backend.Sync returns once the node has read every message the stream
// still holds, whatever removed the stream's last message before the node
// read it: a delete, a purge, MaxAge. A Sync that waited for the stream's
// last sequence instead would wait for a message no node can read again.

// streamOf returns the JetStream handle of n's stream.
func streamOf(t *testing.T, n *node) jetstream.Stream {
	t.Helper()
	js, err := jetstream.New(n.nc)
	require.NoError(t, err)
	st, err := js.Stream(context.Background(), n.be.Stream())
	require.NoError(t, err)
	return st
}

// syncWithin calls n's Sync bounded by 10 s: a Sync that never ends fails
// the test with the deadline.
func syncWithin(t *testing.T, n *node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, n.be.Sync(ctx), "Sync must return once the node read what the stream still holds")
}

func TestSyncReturnsWhenStreamLastMessageIsGone(t *testing.T) {
	cases := []struct {
		name string
		// remove removes the stream's last message(s) after a published
		// events 1, 2, 3 to "s" and returns the ids the stream still holds.
		remove func(t *testing.T, st jetstream.Stream, ids []uint64) []uint64
		opts   []rbnats.Option
	}{
		{name: "last message deleted", remove: func(t *testing.T, st jetstream.Stream, ids []uint64) []uint64 {
			require.NoError(t, st.DeleteMsg(context.Background(), ids[2]))
			return ids[:2]
		}},
		{name: "last message erased", remove: func(t *testing.T, st jetstream.Stream, ids []uint64) []uint64 {
			require.NoError(t, st.SecureDeleteMsg(context.Background(), ids[2]))
			return ids[:2]
		}},
		{name: "stream purged", remove: func(t *testing.T, st jetstream.Stream, _ []uint64) []uint64 {
			require.NoError(t, st.Purge(context.Background()))
			return nil
		}},
		{name: "last subject purged", remove: func(t *testing.T, st jetstream.Stream, ids []uint64) []uint64 {
			m, err := st.GetMsg(context.Background(), ids[2])
			require.NoError(t, err)
			require.NoError(t, st.Purge(context.Background(), jetstream.WithPurgeSubject(m.Subject)))
			return nil // all three were on that subject
		}},
		{name: "aged out by MaxAge", opts: []rbnats.Option{rbnats.WithMaxAge(time.Second)},
			remove: func(t *testing.T, st jetstream.Stream, _ []uint64) []uint64 {
				require.Eventually(t, func() bool {
					info, err := st.Info(context.Background())
					return err == nil && info.State.Msgs == 0
				}, 15*time.Second, 50*time.Millisecond, "the events never aged out")
				return nil
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := uniqueStream(tc.opts...)
			a := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
			var ids []uint64
			for i := range 3 {
				ev, err := a.bus.Publish("s", "msg", i)
				require.NoError(t, err)
				ids = append(ids, ev.ID)
			}
			syncWithin(t, a) // a read them all before they went
			kept := tc.remove(t, streamOf(t, a), ids)

			// A node that starts now never sees the stream's last message.
			late := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
			syncWithin(t, late)
			assert.Equal(t, kept, nilIfEmpty(replayIDs(t, late, "s")), "the node read every event the stream still holds")
			syncWithin(t, a) // and a node that had read it is in sync too
		})
	}
}

// replayIDs is testkit.ReplayIDs for a session the node may not know.
func replayIDs(t *testing.T, n *node, session string) []uint64 {
	t.Helper()
	sub, err := n.bus.Subscribe(context.Background(), session, eventbus.SubscribeOptions{RequireSession: true})
	if err != nil {
		require.ErrorIs(t, err, eventbus.ErrSessionNotFound)
		return nil
	}
	sub.Close()
	return testkit.ReplayIDs(t, n.bus, session)
}

func nilIfEmpty(ids []uint64) []uint64 {
	if len(ids) == 0 {
		return nil
	}
	return ids
}

// The stream's last message is a producer's record, which no node
// ingests as an event: Sync still ends, after the event before it.
func TestSyncReturnsWhenLastMessageIsProducerRecord(t *testing.T) {
	opts := uniqueStream()
	a := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	ev, err := stamped(a.bus, "s", producer.Stamp{ID: "w"}, `1`)
	require.NoError(t, err)
	m, err := streamOf(t, a).GetLastMsgForSubject(context.Background(), ">")
	require.NoError(t, err)
	require.True(t, strings.Contains(m.Subject, ".$P."), "the last message %q is the record", m.Subject)
	late := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	syncWithin(t, late)
	assert.Equal(t, []uint64{ev.ID}, replayIDs(t, late, "s"))
	last, err := late.be.LastID(context.Background())
	require.NoError(t, err)
	assert.Equal(t, ev.ID, last, "LastID names the last event, which the bus ingests, not the record after it")
}

// Sync does not return while a message it must read is in flight: node b
// is cut off while a publishes and the stream's last message is deleted;
// once b is back, Sync returns only after b read every event that is
// left.
func TestSyncWaitsForEventsInFlight(t *testing.T) {
	opts := uniqueStream()
	p := newProxy(t, shared.ClientURL()[len("nats://"):])
	cfg := eventbus.Options{ReplayBufferSize: 500}
	a := newNode(t, shared.ClientURL(), cfg, opts...)
	b := newNode(t, p.URL(), cfg, opts...)
	syncWithin(t, b)
	p.Cut()
	require.Eventually(t, func() bool { return !b.nc.IsConnected() }, 10*time.Second, 10*time.Millisecond)
	var ids []uint64
	for i := range 200 {
		ev, err := a.bus.Publish("s", "msg", i)
		require.NoError(t, err)
		ids = append(ids, ev.ID)
	}
	require.NoError(t, streamOf(t, a).DeleteMsg(context.Background(), ids[len(ids)-1]))
	p.Restore()
	require.Eventually(t, b.nc.IsConnected, 10*time.Second, 10*time.Millisecond)
	syncWithin(t, b)
	assert.Equal(t, ids[:len(ids)-1], replayIDs(t, b, "s"), "b read everything the stream holds before Sync returned")
}

// A node cut off from NATS cannot sync: Sync and LastID say so at once
// (ErrDisconnected) rather than waiting out their context, and a resume
// whose cursor is ahead of the node fails with ErrBackend naming it,
// rather than waiting 10 s and answering epoch_reset to a valid cursor.
func TestSyncOnCutOffNodeFails(t *testing.T) {
	opts := uniqueStream()
	p := newProxy(t, shared.ClientURL()[len("nats://"):])
	a := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	n := newNode(t, p.URL(), eventbus.Options{}, opts...)
	syncWithin(t, n)
	p.Cut()
	require.Eventually(t, func() bool { return !n.nc.IsConnected() }, 10*time.Second, 10*time.Millisecond)
	ahead, err := a.bus.Publish("s", "msg", 1)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = n.be.Sync(ctx)
	require.ErrorIs(t, err, rbnats.ErrDisconnected)
	require.NoError(t, ctx.Err(), "Sync failed before its context ran out")
	_, err = n.be.LastID(ctx)
	require.ErrorIs(t, err, rbnats.ErrDisconnected)
	require.NoError(t, ctx.Err(), "LastID failed before its context ran out")
	_, err = n.bus.Subscribe(ctx, "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{ID: ahead.ID, Epoch: n.bus.Epoch()}})
	require.ErrorIs(t, err, eventbus.ErrBackend)
	require.ErrorIs(t, err, rbnats.ErrDisconnected)
	require.NoError(t, ctx.Err(), "Subscribe failed before its context ran out")
	p.Restore()
	require.Eventually(t, n.nc.IsConnected, 10*time.Second, 10*time.Millisecond)
	syncWithin(t, n)
	sub, err := n.bus.Subscribe(ctx, "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{ID: ahead.ID - 1, Epoch: n.bus.Epoch()}})
	require.NoError(t, err, "back in touch, the node resumes the cursor")
	defer sub.Close()
	assert.Equal(t, ahead.ID, next(t, sub).ID)
}
