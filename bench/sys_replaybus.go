package main

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/replaybus/replaybus/config"
	"github.com/replaybus/replaybus/eventbus"
)

// replaybus: the in-memory bus. Each subscriber is read by one goroutine
// calling Subscription.Next in a loop, as an SSE handler does.
type rbInstance struct {
	bus      *eventbus.Bus
	lossless bool
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	subs     []*eventbus.Subscription
	mu       sync.Mutex
}

const eventType = "agent_message_chunk"

func openReplaybus(o Opts) (Instance, error) {
	bus, err := eventbus.New(config.Config{
		ReplayBufferSize:  o.Ring,
		MaxSubscribers:    1_000_000,
		ReplayBudgetBytes: 1 << 30,
		// drop_subscriber, as the figures in docs/benchmarks.md were taken
		// (the in-process default is drop_oldest since AgentPool parity).
		OverflowPolicy: config.DropSubscriber,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &rbInstance{bus: bus, lossless: o.Lossless, ctx: ctx, cancel: cancel}, nil
}

func (r *rbInstance) Publish(session string, data []byte) (uint64, error) {
	ev, err := r.bus.Publish(session, eventType, json.RawMessage(data))
	return ev.ID, err
}

func (r *rbInstance) Subscribe(session string, so SubOpts, k *Sink) error {
	o := eventbus.SubscribeOptions{NoReplay: !so.Replay}
	if so.Replay {
		o.Cursor = eventbus.At(so.Cursor)
	}
	if r.lossless {
		o.MaxQueued, o.MaxQueuedBytes = 1_000_000, 1<<30
	}
	sub, err := r.bus.Subscribe(r.ctx, session, o)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.subs = append(r.subs, sub)
	r.mu.Unlock()
	if so.Stall {
		return nil
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			ev, err := sub.Next(r.ctx)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					k.End(err.Error())
				}
				return
			}
			if ev.ID == 0 {
				if ev.Type == eventbus.TypeStateResyncRequired {
					k.Gap()
				}
				continue
			}
			k.Event(ev.ID)
		}
	}()
	return nil
}

func (r *rbInstance) Sync(map[string][]*Sink) error { return nil }

func (r *rbInstance) LastID(string) uint64 { return r.bus.LastEventID() }

func (r *rbInstance) Close() {
	r.cancel()
	r.wg.Wait()
	_ = r.bus.Close()
}
