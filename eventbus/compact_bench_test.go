package eventbus_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
)

// The replay window's figures (docs/benchmarks.md, "Compaction"): a reply
// of 2,000 ACP text deltas of about 120 bytes each, compaction off (the
// default ring of 100, and a ring of 2,000 that holds the whole reply)
// and on (coalesce.ACP, the default ring of 100).

const replyDeltas = 2000

var compactCases = []struct {
	name string
	cfg  eventbus.Options
}{
	{"off/ring=100", eventbus.Options{}},
	{"off/ring=2000", eventbus.Options{ReplayBufferSize: replyDeltas}},
	{"acp/ring=100", eventbus.Options{ReplayCompact: coalesce.ACP}},
}

// replyPayloads returns the reply's deltas, encoded once.
func replyPayloads() [][]byte {
	out := make([][]byte, replyDeltas)
	for i := range out {
		out[i] = chunk("s", "tok"+strconv.Itoa(i)+" ")
	}
	return out
}

// publishAll publishes the reply's deltas to session "s".
func publishAll(b *testing.B, bus *eventbus.Bus, payloads [][]byte) {
	for _, p := range payloads {
		if _, err := bus.PublishJSON("s", chunkType, p); err != nil {
			b.Fatal(err)
		}
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkCompactHeld: what one session holds after a 2,000-delta reply:
// records in its buffer, deltas it can still replay, and the heap it
// holds (measured with the GC's heap figure before and after).
func BenchmarkCompactHeld(b *testing.B) {
	payloads := replyPayloads()
	for _, c := range compactCases {
		b.Run(c.name, func(b *testing.B) {
			var held, records, deltas float64
			for range b.N {
				bus, err := eventbus.New(c.cfg)
				if err != nil {
					b.Fatal(err)
				}
				before := heapInUse()
				publishAll(b, bus, payloads)
				after := heapInUse()
				held += float64(after) - float64(before)
				records += float64(bus.Sessions()[0].Buffered)
				sub, err := bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
				if err != nil {
					b.Fatal(err)
				}
				for ev, ok := sub.TryNext(); ok; ev, ok = sub.TryNext() {
					deltas += float64(max(ev.Count, 1))
				}
				sub.Close()
				runtime.KeepAlive(payloads)
				_ = bus.Close()
			}
			n := float64(b.N)
			b.ReportMetric(records/n, "records/session")
			b.ReportMetric(deltas/n, "deltas-replayable")
			b.ReportMetric(held/n, "heapB/session")
			b.ReportMetric(held/deltas, "heapB/delta-held")
			b.ReportMetric(held/records, "heapB/record")
		})
	}
}

// BenchmarkCompactLateJoiner: a subscriber that joins after the reply
// reads its whole replay (frames and time per join).
func BenchmarkCompactLateJoiner(b *testing.B) {
	payloads := replyPayloads()
	for _, c := range compactCases {
		b.Run(c.name, func(b *testing.B) {
			bus, err := eventbus.New(c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer bus.Close()
			publishAll(b, bus, payloads)
			frames := 0
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				frames += join(b, bus)
			}
			b.ReportMetric(float64(frames)/float64(b.N), "frames/join")
		})
	}
	// A joiner in the middle of a reply: one more delta is folded before
	// each join, so each join merges the record's ~2,000 parts anew (a
	// join after the reply ended reuses the merged payload, above).
	b.Run("acp/ring=100/mid-reply", func(b *testing.B) {
		bus, err := eventbus.New(eventbus.Options{ReplayCompact: coalesce.ACP})
		if err != nil {
			b.Fatal(err)
		}
		defer bus.Close()
		publishAll(b, bus, payloads)
		frames := 0
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			if _, err := bus.PublishJSON("s", chunkType, payloads[i%replyDeltas]); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			frames += join(b, bus)
		}
		b.ReportMetric(float64(frames)/float64(b.N), "frames/join")
	})
}

// BenchmarkCompactPublish: the cost of publishing one delta of a reply,
// compaction off and on (a subscriber-less session; replies of 2,000
// deltas back to back).
func BenchmarkCompactPublish(b *testing.B) {
	payloads := replyPayloads()
	for _, c := range compactCases {
		b.Run(c.name, func(b *testing.B) {
			bus, err := eventbus.New(c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer bus.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := bus.PublishJSON("s", chunkType, payloads[i%replyDeltas]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// join subscribes to session "s" from the start, takes the replay it finds
// queued and unsubscribes; it returns how many frames that was.
func join(b *testing.B, bus *eventbus.Bus) int {
	sub, err := bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	n := 0
	for _, ok := sub.TryNext(); ok; _, ok = sub.TryNext() {
		n++
	}
	return n
}
