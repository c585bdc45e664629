package eventbus_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/replaybus/replaybus/eventbus"
)

// BenchmarkReplayStorm is issue 12.8's replay storm: 20 clients resume from
// 0 of a 50,000-event ring of one session while a publisher publishes to
// ANOTHER session every 100 µs. It reports that publisher's Publish latency
// (p50, p99, max, in µs) during the storm; a resume must not stall the
// publishers of other sessions. The storm's own consumers compete for the
// same CPUs, so part of any latency is scheduling, not waiting for a lock:
// compare figures side by side in one run (the "quiet" sub-benchmark
// publishes the same way with no storm).
//
//	go test -run '^$' -bench ReplayStorm -benchtime 3x ./eventbus/
func BenchmarkReplayStorm(b *testing.B) {
	const (
		ring    = 50_000
		clients = 20
	)
	for _, storm := range []bool{false, true} {
		name := "quiet"
		if storm {
			name = "storm"
		}
		b.Run(name, func(b *testing.B) {
			bus := benchNewBus(b, eventbus.Options{ReplayBufferSize: ring, ReplayBudgetBytes: 1 << 30})
			defer bus.Close()
			for range ring {
				if _, err := bus.Publish("big", benchType, benchPayload); err != nil {
					b.Fatal(err)
				}
			}
			var lat []time.Duration
			b.ResetTimer()
			for range b.N {
				var wg sync.WaitGroup
				done := make(chan struct{})
				if storm {
					for range clients {
						wg.Add(1)
						go func() {
							defer wg.Done()
							ctx, cancel := context.WithCancel(context.Background())
							defer cancel()
							sub, err := bus.Subscribe(ctx, "big", eventbus.SubscribeOptions{Cursor: eventbus.At(0)})
							if err != nil {
								b.Error(err)
								return
							}
							defer sub.Close()
							for n := 0; n < ring; {
								ev, err := sub.Next(ctx)
								if err != nil {
									b.Error(err)
									return
								}
								if ev.Replay {
									n++
								}
							}
						}()
					}
				}
				go func() { wg.Wait(); close(done) }()
				deadline := time.Now().Add(200 * time.Millisecond) // the quiet run's length
				over := func() bool {
					if !storm {
						return time.Now().After(deadline)
					}
					select {
					case <-done:
						return true
					default:
						return false
					}
				}
				for !over() {
					t0 := time.Now()
					if _, err := bus.Publish("other", benchType, benchPayload); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
					// The probe is a session publishing at a steady pace
					// (one event per 100 µs) beside the storm: the pause is
					// the workload whose latency is measured, not a wait.
					time.Sleep(100 * time.Microsecond)
				}
				<-done
			}
			b.StopTimer()
			slices.Sort(lat)
			us := func(p float64) float64 {
				return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Microsecond)
			}
			b.ReportMetric(us(0.5), "p50-µs")
			b.ReportMetric(us(0.99), "p99-µs")
			b.ReportMetric(us(1), "max-µs")
			b.ReportMetric(float64(len(lat))/float64(b.N), "publishes/op")
		})
	}
}
