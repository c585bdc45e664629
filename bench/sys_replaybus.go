package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// replaybus: the in-memory bus. Each subscriber has its own context (a
// child of the instance's, as an HTTP request's context is) and is read by
// one goroutine calling Subscription.NextBefore the way adapters/sse's
// handler does: with a deadline one heartbeat interval after the last frame
// (the handler writes a heartbeat comment when it passes).
type rbInstance struct {
	bus      *eventbus.Bus
	lossless bool
	next     bool // read with Next, frame by frame (replaybus-next)
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	subs     []*eventbus.Subscription
	cancels  []context.CancelFunc
	mu       sync.Mutex
}

const eventType = "agent_message_chunk"

// rbHeartbeat is the shipped handler's default heartbeat interval
// (sse.DefaultHeartbeat): the deadline the reader waits under.
const rbHeartbeat = 15 * time.Second

func openReplaybus(o Opts) (Instance, error) {
	bus, err := eventbus.New(eventbus.Options{
		ReplayBufferSize:  o.Ring,
		MaxSubscribers:    1_000_000,
		ReplayBudgetBytes: 1 << 30,
		// drop_subscriber, as the figures in docs/benchmarks.md were taken
		// (the in-process default is drop_oldest since AgentPool parity).
		OverflowPolicy: eventbus.DropSubscriber,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &rbInstance{bus: bus, lossless: o.Lossless, ctx: ctx, cancel: cancel}, nil
}

// openReplaybusNext is replaybus read the way a porter's loop reads: one
// Subscription.Next(ctx) per frame, with the request's context (the
// subscription's own), no deadline and no batch buffer of the reader's.
func openReplaybusNext(o Opts) (Instance, error) {
	inst, err := openReplaybus(o)
	if err != nil {
		return nil, err
	}
	inst.(*rbInstance).next = true
	return inst, nil
}

func (r *rbInstance) Publish(session string, data []byte) (uint64, error) {
	ev, err := r.bus.PublishJSON(session, eventType, data)
	return ev.ID, err
}

// Publisher returns Publish bound to session: the bus resolves the session
// on every call itself, which is part of what is measured.
func (r *rbInstance) Publisher(session string) (func([]byte) (uint64, error), error) {
	return func(data []byte) (uint64, error) { return r.Publish(session, data) }, nil
}

func (r *rbInstance) Subscribe(session string, so SubOpts, k *Sink) error {
	o := eventbus.SubscribeOptions{NoReplay: !so.Replay}
	if so.Replay {
		o.Cursor = eventbus.At(so.Cursor)
	}
	if r.lossless {
		o.MaxQueued, o.MaxQueuedBytes = 1_000_000, 1<<30
	}
	// The subscription's own context, as a request's.
	subCtx, subCancel := context.WithCancel(r.ctx)
	sub, err := r.bus.Subscribe(subCtx, session, o)
	if err != nil {
		subCancel()
		return err
	}
	r.mu.Lock()
	r.subs = append(r.subs, sub)
	r.mu.Unlock()
	if so.Stall {
		// Held until the instance closes, as a stuck request is.
		r.mu.Lock()
		r.cancels = append(r.cancels, subCancel)
		r.mu.Unlock()
		return nil
	}
	r.wg.Add(1)
	if r.next {
		go func() {
			defer r.wg.Done()
			defer subCancel()
			for {
				ev, err := sub.Next(subCtx)
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						k.End(err.Error())
					}
					return
				}
				rbDeliver(k, &ev)
			}
		}()
		return nil
	}
	go func() {
		defer r.wg.Done()
		defer subCancel()
		// As the handler (adapters/sse's stream loop): NextBefore with a
		// deadline one heartbeat after the last write, then what else is
		// ready with NextBatch into a pooled buffer (a batch of at most
		// 64 frames, written with one flush), then the time of that
		// write; a full batch is followed at once by the next NextBatch.
		// An idle reader holds no batch buffer.
		last := time.Now()
		for {
			ev, err := sub.NextBefore(last.Add(rbHeartbeat))
			if err != nil {
				if errors.Is(err, eventbus.ErrTimeout) {
					last = time.Now() // the heartbeat comment's write
					continue
				}
				if !errors.Is(err, context.Canceled) {
					k.End(err.Error())
				}
				return
			}
			bp := rbBatches.Get().(*[rbBatch]eventbus.Event)
			bp[0] = ev
			used := 1 // bp[:used] may hold frames
			for n := 1; ; n = 0 {
				m, _ := sub.NextBatch(rbReady, bp[n:]) // ErrTimeout or the end: nothing more ready
				n += m
				used = max(used, n)
				for i := range bp[:n] {
					rbDeliver(k, &bp[i])
				}
				last = time.Now()
				if n < rbBatch {
					break
				}
			}
			clear(bp[:used]) // the pool must not pin the frames' data
			rbBatches.Put(bp)
		}
	}()
	return nil
}

// rbBatch is the shipped handler's batch bound (adapters/sse: maxBatchFrames).
const rbBatch = 64

// rbBatches holds the readers' batch buffers between batches, as the SSE
// handler's pool does.
var rbBatches = sync.Pool{New: func() any { return new([rbBatch]eventbus.Event) }}

// rbReady is a deadline already past: NextBatch returns what is ready.
var rbReady = time.Unix(1, 0)

// rbDeliver records one frame at the sink.
func rbDeliver(k *Sink, ev *eventbus.Event) {
	if ev.ID == 0 {
		if ev.Type == frame.TypeStateResyncRequired {
			k.Gap()
		}
		return
	}
	k.EventIn(ev.Session, ev.ID)
}

func (r *rbInstance) Sync(map[string][]*Sink) error { return nil }

func (r *rbInstance) LastID(string) uint64 { return r.bus.LastEventID() }

func (r *rbInstance) Close() {
	r.cancel()
	for _, c := range r.cancels {
		c()
	}
	r.wg.Wait()
	_ = r.bus.Close()
}
