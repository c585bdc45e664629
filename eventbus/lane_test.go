package eventbus_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// laneMark is the payload of a targeted frame in TestQueueLaneConcurrent:
// its sender's sequence number and, for the publisher's own, the id of the
// last event it published before sending it.
type laneMark struct {
	Seq   int    `json:"seq"`
	After uint64 `json:"after"`
}

// TestQueueLaneConcurrent: one publisher publishes to a session while it
// also sends targeted frames after some of its events, a second goroutine
// sends targeted frames of its own, a reader reads (slowly in the rows that
// reach the limits), and the subscription is ended by Unsubscribe when
// the senders are done, or by Close from a fourth goroutine in the middle.
// Deliveries away from the limits take the lock-free lane and the others
// the locked queue, so each row switches between the two many times. For
// every row, in every round:
//
//   - the ids read are strictly increasing, and with the events_dropped
//     runs read they account for every published id once, without a hole
//     (up to the eviction or the Close);
//   - a targeted frame the publisher sent after event n comes after n (or
//     the run that dropped it), and each sender's frames keep their order;
//     every frame SendTo accepted is read unless the end discarded it;
//   - every figure of a slow_client_warning is within the limits;
//     client_evicted is the last frame, at the frame limit;
//   - the reader ends with the reason of the end, and no goroutine is left
//     (TestMain).
func TestQueueLaneConcurrent(t *testing.T) {
	const events = 1500
	for _, tc := range []struct {
		name      string
		policy    eventbus.OverflowPolicy
		maxQueued int
		maxBytes  int64
		slow      bool // the reader pauses now and then: the queue reaches its limits
		close     bool // Close from another goroutine in the middle
		reason    error
	}{
		{name: "lossless", policy: eventbus.DropSubscriber, maxQueued: 1_000_000, maxBytes: 1 << 30, reason: eventbus.ErrUnsubscribed},
		{name: "drop_oldest", policy: eventbus.DropOldest, maxQueued: 16, maxBytes: 1 << 20, slow: true, reason: eventbus.ErrUnsubscribed},
		{name: "drop_oldest bytes", policy: eventbus.DropOldest, maxQueued: 1000, maxBytes: 16 * 20, slow: true, reason: eventbus.ErrUnsubscribed},
		{name: "drop_newest", policy: eventbus.DropNewest, maxQueued: 16, maxBytes: 1 << 20, slow: true, reason: eventbus.ErrUnsubscribed},
		{name: "drop_subscriber", policy: eventbus.DropSubscriber, maxQueued: 64, maxBytes: 1 << 20, slow: true, reason: eventbus.ErrEvicted},
		{name: "close", policy: eventbus.DropOldest, maxQueued: 64, maxBytes: 1 << 20, slow: true, close: true, reason: eventbus.ErrUnsubscribed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rounds := 8
			if testing.Short() {
				rounds = 2
			}
			for round := range rounds {
				laneRound(t, fmt.Sprintf("%s round %d", tc.name, round), events, tc.policy, tc.maxQueued, tc.maxBytes, tc.slow, tc.close, tc.reason)
			}
		})
	}
}

func laneRound(t *testing.T, name string, events int, policy eventbus.OverflowPolicy, maxQueued int, maxBytes int64, slow, closeMid bool, reason error) {
	b := newBus(t, eventbus.Options{ReplayBufferSize: events})
	sub := subscribe(t, b, "s", eventbus.SubscribeOptions{NoReplay: true, MaxQueued: maxQueued, MaxQueuedBytes: maxBytes, Policy: policy})
	data := payload(20)

	// The reader.
	type read struct {
		frames []eventbus.Event
		err    error
	}
	got := make(chan read, 1)
	go func() {
		var r read
		buf := make([]eventbus.Event, 8)
		for {
			n, err := sub.NextBatch(time.Now().Add(waitFor), buf)
			if err != nil {
				r.err = err
				got <- r
				return
			}
			r.frames = append(r.frames, buf[:n]...)
			if slow && len(r.frames)%40 < n {
				time.Sleep(200 * time.Microsecond)
			}
		}
	}()

	// The second sender, and the closer.
	var wg sync.WaitGroup
	otherSent := make([]bool, 200)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range otherSent {
			err := b.SendTo("other", laneMark{Seq: i}, sub)
			otherSent[i] = err == nil
			if err != nil && !errors.Is(err, eventbus.ErrQueueFull) && !errors.Is(err, reason) {
				t.Errorf("%s: SendTo: %v", name, err)
			}
		}
	}()
	halfway := make(chan struct{})
	if closeMid {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-halfway
			sub.Close()
		}()
	}

	// The publisher.
	type sentMark struct {
		seq   int
		after uint64
	}
	var marks []sentMark
	var last uint64
	for i := range events {
		ev, err := b.PublishJSON("s", "msg", data)
		require.NoError(t, err, name)
		last = ev.ID
		if i%7 == 0 {
			m := laneMark{Seq: len(marks), After: ev.ID}
			if err := b.SendTo("mark", m, sub); err == nil {
				marks = append(marks, sentMark{m.Seq, m.After})
			} else if !errors.Is(err, eventbus.ErrQueueFull) && !errors.Is(err, reason) {
				t.Errorf("%s: SendTo: %v", name, err)
			}
		}
		if i == events/2 {
			close(halfway)
		}
	}
	wg.Wait()
	sub.Unsubscribe() // the reader drains what is queued, then the reason
	var r read
	select {
	case r = <-got:
	case <-time.After(10 * waitFor):
		require.FailNow(t, "the reader did not end", name)
	}
	require.ErrorIs(t, r.err, reason, name)

	// Walk the frames.
	var accounted uint64 // every id up to it was read or announced dropped
	var received uint64  // the last id read
	lastMark, lastOther := -1, -1
	marksRead, othersRead := 0, 0
	evicted := false
	for i, e := range r.frames {
		require.False(t, evicted, "%s: frame %d after client_evicted", name, i)
		switch e.Type {
		case "msg":
			require.Equal(t, accounted+1, e.ID, "%s: frame %d: an id missing or out of order", name, i)
			accounted, received = e.ID, e.ID
		case frame.TypeStateResyncRequired:
			var d frame.ResyncData
			require.NoError(t, json.Unmarshal(e.Data, &d), name)
			require.Equal(t, frame.ReasonEventsDropped, d.Reason, name)
			require.Equal(t, accounted+1, d.FirstDroppedID, "%s: frame %d: a run must start right after what was accounted", name, i)
			require.EqualValues(t, d.LastDroppedID-d.FirstDroppedID+1, d.DroppedCount, "%s: one session: a run is contiguous", name)
			require.Equal(t, received, d.LastDeliveredID, name)
			accounted = d.LastDroppedID
		case "mark", "other":
			var m laneMark
			require.NoError(t, json.Unmarshal(e.Data, &m), name)
			require.Zero(t, e.ID, name)
			if e.Type == "mark" {
				require.Greater(t, m.Seq, lastMark, "%s: the publisher's targeted frames in order", name)
				require.GreaterOrEqual(t, accounted, m.After, "%s: targeted frame %d before the event it was sent after", name, m.Seq)
				lastMark = m.Seq
				marksRead++
			} else {
				require.Greater(t, m.Seq, lastOther, "%s: the second sender's frames in order", name)
				lastOther = m.Seq
				othersRead++
			}
		case frame.TypeSlowClientWarning:
			var w frame.SlowClientWarningData
			require.NoError(t, json.Unmarshal(e.Data, &w), name)
			// The figures are the queue's when the frame was made; the
			// reader may have taken some since the decision (lock-free).
			require.Contains(t, []string{"frames", "bytes", "frames_and_bytes"}, w.Threshold, name)
			require.LessOrEqual(t, w.QueueSize, maxQueued, name)
			require.LessOrEqual(t, w.QueuedBytes, maxBytes, name)
		case frame.TypeClientEvicted:
			var c frame.ClientEvictedData
			require.NoError(t, json.Unmarshal(e.Data, &c), name)
			require.Equal(t, frame.ReasonQueueOverflow, c.Reason, name)
			require.Equal(t, maxQueued, c.QueueSize, name)
			require.Equal(t, accounted+1, c.DroppedAfter, "%s: client_evicted names the first id not read", name)
			evicted = true
		default:
			require.FailNow(t, "unexpected frame", "%s: %s", name, e.Type)
		}
	}
	switch {
	case reason == eventbus.ErrEvicted:
		require.True(t, evicted, "%s: client_evicted last", name)
	case closeMid:
		require.LessOrEqual(t, accounted, last, name) // a prefix: no hole (checked above)
	default:
		require.Equal(t, last, accounted, "%s: every published id read or announced dropped", name)
		sent := 0
		for _, ok := range otherSent {
			if ok {
				sent++
			}
		}
		assert.Equal(t, len(marks), marksRead, "%s: every accepted targeted frame read", name)
		assert.Equal(t, sent, othersRead, "%s: every accepted targeted frame read", name)
	}
}
