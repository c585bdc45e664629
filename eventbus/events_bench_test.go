package eventbus_test

import (
	"context"
	"testing"

	"github.com/replaybus/replaybus/eventbus"
)

// BenchmarkEventsChannel is the channel path: one subscriber read through
// Subscription.Events while one publisher publishes; ns/op is per event
// delivered through the channel.
func BenchmarkEventsChannel(b *testing.B) {
	bus, err := eventbus.New(eventbus.Options{MaxQueueSize: 1_000_000})
	if err != nil {
		b.Fatal(err)
	}
	defer bus.Close()
	s, err := bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{NoReplay: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ch := s.Events()
	done := make(chan int)
	go func() {
		n := 0
		for range ch {
			n++
			if n == b.N {
				break
			}
		}
		done <- n
	}()
	data := []byte(`{"text":"x"}`)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := bus.PublishJSON("s", "t", data); err != nil {
			b.Fatal(err)
		}
	}
	if n := <-done; n != b.N {
		b.Fatalf("read %d of %d", n, b.N)
	}
}
