package eventbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/config"
	"github.com/replaybus/replaybus/eventbus"
)

// TestReviewLiveLimitsExact checks the live limits against a model that
// counts, plainly, what was queued for the subscriber and not yet read:
// every slow_client_warning (when it comes, after which event, its figures
// and threshold, its hysteresis re-arm at ≤ 37.5 % on both axes), every
// client_evicted (when, and its figures), every refusal of a targeted frame
// (ErrQueueFull) and every drop_newest drop must be the one the exact
// figures give. The publisher side keeps a cached copy of the consumer's
// counter and reads the real one only near a threshold; this is what
// catches a decision taken on the stale copy. Publisher and consumer
// alternate on one goroutine (the exactness is not a matter of timing).
func TestReviewLiveLimitsExact(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		maxQ := rapid.IntRange(1, 12).Draw(rt, "maxQueued")
		maxB := int64(rapid.IntRange(1, 300).Draw(rt, "maxBytes"))
		policy := rapid.SampledFrom([]eventbus.OverflowPolicy{eventbus.DropNewest, eventbus.DropSubscriber}).Draw(rt, "policy")
		bus, err := eventbus.New(config.Config{ReplayBufferSize: 10_000})
		if err != nil {
			rt.Fatal(err)
		}
		defer bus.Close()
		sub, err := bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{
			NoReplay: true, MaxQueued: maxQ, MaxQueuedBytes: maxB, Policy: policy})
		if err != nil {
			rt.Fatal(err)
		}

		type want struct {
			id      uint64 // an event
			target  string // a targeted frame's type
			warn    *eventbus.SlowClientWarningData
			evicted *eventbus.ClientEvictedData
		}
		var (
			expect       []want
			frames       int64 // live frames queued and not read (the model)
			bytes        int64
			warned       bool
			ended        bool
			cost         = map[uint64]int64{}
			targetCost   = map[string]int64{}
			ntarget      int
			droppedModel []uint64
			droppedSeen  []uint64
		)
		figures := func(f, b int64) eventbus.QueueFigures {
			return eventbus.QueueFigures{QueueSize: int(f), MaxQueued: maxQ, QueuedBytes: b, MaxQueuedBytes: maxB}
		}
		payload := func(n int) any {
			if n == 0 {
				return nil
			}
			return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`)
		}
		read := func(k int) {
			for range k {
				ev, ok := sub.TryNext()
				if !ok {
					return
				}
				if ev.Type == eventbus.TypeStateResyncRequired {
					var d eventbus.ResyncData
					if err := json.Unmarshal(ev.Data, &d); err != nil || d.Reason != eventbus.ReasonEventsDropped {
						rt.Fatalf("unexpected resync %s", ev.Data)
					}
					for id := d.FirstDroppedID; id <= d.LastDroppedID; id++ {
						droppedSeen = append(droppedSeen, id)
					}
					continue
				}
				if len(expect) == 0 {
					rt.Fatalf("unexpected frame %s %d %s", ev.Type, ev.ID, ev.Data)
				}
				w := expect[0]
				expect = expect[1:]
				switch {
				case w.id != 0:
					if ev.ID != w.id {
						rt.Fatalf("got %s %d, want event %d", ev.Type, ev.ID, w.id)
					}
					frames, bytes = frames-1, bytes-cost[w.id]
				case w.target != "":
					if ev.Type != w.target {
						rt.Fatalf("got %s %d, want targeted %s", ev.Type, ev.ID, w.target)
					}
					frames, bytes = frames-1, bytes-targetCost[w.target]
				case w.warn != nil:
					var got eventbus.SlowClientWarningData
					if ev.Type != eventbus.TypeSlowClientWarning || json.Unmarshal(ev.Data, &got) != nil || got != *w.warn {
						rt.Fatalf("got %s %s, want slow_client_warning %+v", ev.Type, ev.Data, *w.warn)
					}
				case w.evicted != nil:
					var got eventbus.ClientEvictedData
					if ev.Type != eventbus.TypeClientEvicted || json.Unmarshal(ev.Data, &got) != nil || got != *w.evicted {
						rt.Fatalf("got %s %s, want client_evicted %+v", ev.Type, ev.Data, *w.evicted)
					}
				}
			}
		}
		steps := rapid.IntRange(1, 80).Draw(rt, "steps")
		for range steps {
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
				cost[ev.ID] = c
				if warned && frames*8 <= int64(maxQ)*3 && bytes*8 <= maxB*3 {
					warned = false
				}
				over := frames >= int64(maxQ)
				overB := frames > 0 && bytes+c > maxB
				if over || overB {
					if policy == eventbus.DropNewest {
						droppedModel = append(droppedModel, ev.ID)
						continue
					}
					reason := eventbus.ReasonQueueOverflow
					if !over {
						reason = eventbus.ReasonQueueBytesOverflow
					}
					expect = append(expect, want{evicted: &eventbus.ClientEvictedData{QueueFigures: figures(frames, bytes),
						Reason: reason, DroppedAfter: ev.ID}})
					ended = true
					continue
				}
				frames, bytes = frames+1, bytes+c
				expect = append(expect, want{id: ev.ID})
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
						expect = append(expect, want{warn: &eventbus.SlowClientWarningData{QueueFigures: figures(frames, bytes),
							LastEventID: ev.ID, Threshold: th}})
					}
				}
			case 3: // a targeted frame
				n := rapid.SampledFrom([]int{0, 2, 10, 40}).Draw(rt, "target size")
				c := int64(n)
				ntarget++
				typ := fmt.Sprintf("target%d", ntarget)
				err := bus.SendTo(typ, payload(n), sub)
				full := frames >= int64(maxQ) || (frames > 0 && bytes+c > maxB)
				switch {
				case ended:
					if err == nil {
						rt.Fatal("a targeted frame reached an ended subscription")
					}
				case full:
					if !errors.Is(err, eventbus.ErrQueueFull) {
						rt.Fatalf("targeted with %d frames / %d bytes queued (+%d): %v, want ErrQueueFull", frames, bytes, c, err)
					}
				default:
					if err != nil {
						rt.Fatalf("targeted with %d frames / %d bytes queued (+%d): %v", frames, bytes, c, err)
					}
					targetCost[typ] = c
					frames, bytes = frames+1, bytes+c
					expect = append(expect, want{target: typ})
				}
			default: // the consumer reads a few
				read(rapid.IntRange(1, 6).Draw(rt, "read"))
			}
		}
		read(1 << 20)
		if len(expect) != 0 {
			rt.Fatalf("frames never came: %+v", expect)
		}
		if len(droppedSeen) != len(droppedModel) {
			rt.Fatalf("dropped %v, want %v", droppedSeen, droppedModel)
		}
		for i := range droppedSeen {
			if droppedSeen[i] != droppedModel[i] {
				rt.Fatalf("dropped %v, want %v", droppedSeen, droppedModel)
			}
		}
		if ended && !errors.Is(sub.Err(), eventbus.ErrEvicted) {
			rt.Fatalf("ended with %v, want ErrEvicted", sub.Err())
		}
	})
}
