package eventbus_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// BenchmarkCancelToDone is issue 29's in-process target: the time from a
// Bus.Cancel call to the producer's ctx.Done(), over 1,000 cancels per op
// (p50, p99, max in µs; target p99 ≤ 20 ms). Each producer is a goroutine
// parked on its turn's context, as a real one waits on a model stream;
// the time counts until that goroutine runs. The pause before each cancel
// (0–200 µs, drawn from a fixed seed) lets it park. Sub-benchmarks: a
// cancel by turn id, of the session's active turn, and a cascade from
// the root of a three-level tree (measured to the last of its three
// producers).
//
//	go test -run '^$' -bench CancelToDone -benchtime 3x ./eventbus/
func BenchmarkCancelToDone(b *testing.B) {
	const cancels = 1000
	for _, kind := range []string{"id", "active", "cascade"} {
		b.Run(kind, func(b *testing.B) {
			bus := benchNewBus(b, eventbus.Options{})
			defer bus.Close()
			for _, s := range [][2]string{{"root", ""}, {"child", "root"}, {"grandchild", "child"}} {
				if err := bus.CreateSession(s[0], s[1]); err != nil {
					b.Fatal(err)
				}
			}
			sessions := []string{"root"}
			if kind == "cascade" {
				sessions = []string{"root", "child", "grandchild"}
			}
			rng := rand.New(rand.NewPCG(29, 1))
			lat := make([]time.Duration, 0, cancels*b.N)
			b.ResetTimer()
			for range b.N {
				for range cancels {
					done := make(chan time.Time, len(sessions))
					var turns []*eventbus.Turn
					for _, s := range sessions {
						tr, err := bus.StartTurn(context.Background(), s, eventbus.TurnOptions{})
						if err != nil {
							b.Fatal(err)
						}
						turns = append(turns, tr)
						go func() {
							<-tr.Context().Done()
							done <- time.Now()
						}()
					}
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
					req := frame.TurnData{Turn: turns[0].ID()}
					switch kind {
					case "active":
						req.Turn = ""
					case "cascade":
						req = frame.TurnData{Cascade: true}
					}
					t0 := time.Now()
					res, err := bus.Cancel(context.Background(), "root", req)
					if err != nil || len(res.Cancelled) != len(sessions) {
						b.Fatalf("Cancel: %+v, %v", res, err)
					}
					var last time.Time
					for range sessions {
						if at := <-done; at.After(last) {
							last = at
						}
					}
					lat = append(lat, last.Sub(t0))
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			us := func(p float64) float64 {
				return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Microsecond)
			}
			b.ReportMetric(us(0.5), "p50-µs")
			b.ReportMetric(us(0.99), "p99-µs")
			b.ReportMetric(us(1), "max-µs")
		})
	}
}

// BenchmarkTurnStartEnd is one turn started and ended on a session that
// has ended many before (ns per turn): what remembering every ended turn
// whose turn_end the replay buffer holds costs — an index by id, and
// forgetting the turns whose end left the buffer — at the default buffer
// of 100 and at 10,000, where up to 5,000 ended turns are remembered.
//
//	go test -run '^$' -bench TurnStartEnd -benchmem ./eventbus/
func BenchmarkTurnStartEnd(b *testing.B) {
	for _, ring := range []int{100, 10_000} {
		b.Run(fmt.Sprint("ring=", ring), func(b *testing.B) {
			bus := benchNewBus(b, eventbus.Options{ReplayBufferSize: ring})
			defer bus.Close()
			if err := bus.CreateSession("s", ""); err != nil {
				b.Fatal(err)
			}
			ids := make([]string, b.N+ring)
			for i := range ids {
				ids[i] = fmt.Sprint("turn-", i)
			}
			for _, id := range ids[:ring] { // the buffer full of ended turns
				tr, err := bus.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: id})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := tr.End(nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				tr, err := bus.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: ids[ring+i]})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := tr.End(nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
