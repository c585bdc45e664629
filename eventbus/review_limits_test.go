package eventbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// limItem is one entry of the model's queue: an event, a targeted frame, a
// synthetic frame (slow_client_warning, client_evicted) or an
// events_dropped run.
type limItem struct {
	kind        byte // 'e' event, 't' targeted, 'f' frame, 'd' dropped run
	id          uint64
	typ         string
	cost        int64
	data        any // the frame's payload ('f')
	first, last uint64
	count       int
}

// TestReviewLiveLimitsExact checks the live limits of one subscriber against
// a model that counts, plainly, what is queued and not yet read — the
// shared queue and the batch the consumer took out of it, as the bus keeps
// them — under drop_oldest, drop_newest and drop_subscriber: every frame
// the consumer reads must be the model's, in order and in full — each
// slow_client_warning (when, after which event, its figures and threshold,
// its re-arm at ≤ 37.5 % on both axes), each client_evicted and its
// figures, each events_dropped run (which ids, merged where they touch,
// lastDeliveredId), each targeted frame, and each ErrQueueFull refusal.
// The publisher keeps a cached copy of the consumer's packed counter and
// reads the real one only near a threshold; a decision taken on the stale
// copy shows here. Publisher and consumer alternate on one goroutine: the
// exactness is not a matter of timing.
func TestReviewLiveLimitsExact(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		maxQ := rapid.IntRange(1, 12).Draw(rt, "maxQueued")
		maxB := int64(rapid.IntRange(1, 300).Draw(rt, "maxBytes"))
		policy := rapid.SampledFrom([]eventbus.OverflowPolicy{eventbus.DropOldest, eventbus.DropNewest,
			eventbus.DropSubscriber}).Draw(rt, "policy")
		bus, err := eventbus.New(eventbus.Options{ReplayBufferSize: 10_000})
		if err != nil {
			rt.Fatal(err)
		}
		defer bus.Close()
		sub, err := bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{
			NoReplay: true, MaxQueued: maxQ, MaxQueuedBytes: maxB, Policy: policy})
		if err != nil {
			rt.Fatal(err)
		}

		var (
			q, local     []*limItem
			frames       int64 // live frames queued and not read
			bytes        int64
			warned       bool
			ended        bool
			lastDelivery uint64
			ntarget      int
		)
		figures := func() frame.QueueFigures {
			return frame.QueueFigures{QueueSize: int(frames), MaxQueued: maxQ, QueuedBytes: bytes, MaxQueuedBytes: maxB}
		}
		payload := func(n int) any {
			if n == 0 {
				return nil
			}
			return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`)
		}
		dropNewest := func(id uint64) {
			if n := len(q); n > 0 && q[n-1].kind == 'd' {
				q[n-1].last, q[n-1].count = id, q[n-1].count+1
				return
			}
			q = append(q, &limItem{kind: 'd', first: id, last: id, count: 1})
		}
		// dropOldest makes room for one more event of cost c by dropping
		// the oldest queued (not yet taken) events; false when none is left.
		dropOldest := func(c int64) bool {
			for {
				if frames < int64(maxQ) && (frames == 0 || bytes+c <= maxB) {
					return true
				}
				i := 0
				for i < len(q) && q[i].kind != 'e' {
					i++
				}
				if i == len(q) {
					return false
				}
				v := q[i]
				frames, bytes = frames-1, bytes-v.cost
				j := i - 1
				for j >= 0 && q[j].kind == 'f' {
					j--
				}
				if j >= 0 && q[j].kind == 'd' {
					q[j].last, q[j].count = v.id, q[j].count+1
					q = append(q[:i], q[i+1:]...)
					continue
				}
				q[i] = &limItem{kind: 'd', first: v.id, last: v.id, count: 1}
			}
		}
		next := func() *limItem {
			for {
				if len(local) > 0 {
					it := local[0]
					local = local[1:]
					if it.kind == 'd' && len(local) == 0 {
						for len(q) > 0 && q[0].kind == 'd' {
							it.last, it.count = q[0].last, it.count+q[0].count
							q = q[1:]
						}
					}
					return it
				}
				if len(q) == 0 {
					return nil
				}
				local, q = q, nil
			}
		}
		read := func(k int) {
			for range k {
				ev, ok := sub.TryNext()
				w := next()
				if !ok || w == nil {
					if ok || w != nil {
						rt.Fatalf("bus has a frame: %v (%s %d), model has %+v", ok, ev.Type, ev.ID, w)
					}
					return
				}
				switch w.kind {
				case 'e':
					if ev.ID != w.id {
						rt.Fatalf("got %s %d %s, want event %d", ev.Type, ev.ID, ev.Data, w.id)
					}
					frames, bytes = frames-1, bytes-w.cost
					lastDelivery = w.id
				case 't':
					if ev.Type != w.typ {
						rt.Fatalf("got %s %d, want targeted %s", ev.Type, ev.ID, w.typ)
					}
					frames, bytes = frames-1, bytes-w.cost
				case 'd':
					var got frame.ResyncData
					want := frame.ResyncData{Reason: frame.ReasonEventsDropped, LastDeliveredID: lastDelivery,
						FirstDroppedID: w.first, LastDroppedID: w.last, DroppedCount: w.count}
					if ev.Type != frame.TypeStateResyncRequired || json.Unmarshal(ev.Data, &got) != nil || got != want {
						rt.Fatalf("got %s %s, want events_dropped %+v", ev.Type, ev.Data, want)
					}
				case 'f':
					wantJSON, _ := json.Marshal(w.data)
					if ev.Type != w.typ || string(ev.Data) != string(wantJSON) {
						rt.Fatalf("got %s %s, want %s %s", ev.Type, ev.Data, w.typ, wantJSON)
					}
				}
			}
		}
		for range rapid.IntRange(1, 80).Draw(rt, "steps") {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1, 2: // publish
				n := rapid.SampledFrom([]int{0, 2, 3, 10, 40, 100}).Draw(rt, "size")
				c := int64(n)
				ev, err := bus.Publish("s", "t", payload(n))
				if err != nil {
					rt.Fatal(err)
				}
				if ended {
					continue
				}
				if warned && frames*8 <= int64(maxQ)*3 && bytes*8 <= maxB*3 {
					warned = false
				}
				over, overB := frames >= int64(maxQ), frames > 0 && bytes+c > maxB
				if over || overB {
					switch policy {
					case eventbus.DropNewest:
						dropNewest(ev.ID)
					case eventbus.DropOldest:
						if !dropOldest(c) {
							dropNewest(ev.ID)
						} else {
							q = append(q, &limItem{kind: 'e', id: ev.ID, cost: c})
							frames, bytes = frames+1, bytes+c
						}
					default:
						reason := frame.ReasonQueueOverflow
						if !over {
							reason = frame.ReasonQueueBytesOverflow
						}
						q = append(q, &limItem{kind: 'f', typ: frame.TypeClientEvicted,
							data: frame.ClientEvictedData{QueueFigures: figures(), Reason: reason, DroppedAfter: ev.ID}})
						ended = true
					}
					continue
				}
				q = append(q, &limItem{kind: 'e', id: ev.ID, cost: c})
				frames, bytes = frames+1, bytes+c
				if !warned {
					f, b := frames*4 >= int64(maxQ)*3, bytes*4 >= maxB*3
					if f || b {
						warned = true
						th := "frames"
						switch {
						case f && b:
							th = "frames_and_bytes"
						case b:
							th = "bytes"
						}
						q = append(q, &limItem{kind: 'f', typ: frame.TypeSlowClientWarning,
							data: frame.SlowClientWarningData{QueueFigures: figures(), LastEventID: ev.ID, Threshold: th}})
					}
				}
			case 3: // a targeted frame
				n := rapid.SampledFrom([]int{0, 2, 10, 40}).Draw(rt, "target size")
				c := int64(n)
				ntarget++
				typ := fmt.Sprintf("target%d", ntarget)
				err := bus.SendTo(typ, payload(n), sub)
				switch {
				case ended:
					if err == nil {
						rt.Fatal("a targeted frame reached an ended subscription")
					}
				case frames >= int64(maxQ) || (frames > 0 && bytes+c > maxB):
					if !errors.Is(err, eventbus.ErrQueueFull) {
						rt.Fatalf("targeted with %d frames / %d bytes live (+%d): %v, want ErrQueueFull", frames, bytes, c, err)
					}
				default:
					if err != nil {
						rt.Fatalf("targeted with %d frames / %d bytes live (+%d): %v", frames, bytes, c, err)
					}
					q = append(q, &limItem{kind: 't', typ: typ, cost: c})
					frames, bytes = frames+1, bytes+c
				}
			default: // the consumer reads a few
				read(rapid.IntRange(1, 6).Draw(rt, "read"))
			}
		}
		read(1 << 20)
		if ended && !errors.Is(sub.Err(), eventbus.ErrEvicted) {
			rt.Fatalf("ended with %v, want ErrEvicted", sub.Err())
		}
	})
}
