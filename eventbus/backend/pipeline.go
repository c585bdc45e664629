package backend

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/internal/hook"
)

// AsyncBackend is a [Backend] that can keep several appends in flight
// (adapters/nats). [Pipeline] uses it; a Bus over a backend without it, and
// the in-memory bus, publish pipelined events one at a time.
type AsyncBackend interface {
	Backend
	// AppendAsync sends ev as Append stores it, without waiting until it is
	// stored, and returns the handle to wait for its id. Events sent by
	// one goroutine are stored in the order sent, each or not at all (a
	// backend never retries one behind a later one). An error returned
	// here means the event was not sent.
	AppendAsync(path []string, ev eventbus.Event) (PendingAppend, error)
}

// PendingAppend is one append of [AsyncBackend.AppendAsync] in flight.
type PendingAppend interface {
	// Wait returns the event's id once the backend has stored it, or the
	// backend's error (the event may or may not be stored: a timeout, a
	// lost connection), or ctx's error (still pending). The backend bounds
	// it by its own timeout. Wait may be called again after ctx's error.
	Wait(ctx context.Context) (uint64, error)
}

// Pipeline limits.
const (
	// DefaultPipelineWindow is the window of a [Pipeline] whose options
	// leave it zero: 256 appends in flight.
	DefaultPipelineWindow = 256
	// MaxPipelineWindow is the largest window a Pipeline accepts.
	MaxPipelineWindow = 4096
)

// PipelineOptions configure [NewPipeline].
type PipelineOptions struct {
	// Window is how many events may be sent and not yet acknowledged by
	// the backend, 1–4096; zero means 256.
	Window int
	// OnStored, if set, is called with each event once the backend stored
	// it (its ID set), in publish order, on the goroutine of the
	// [Pipeline.Publish] or [Pipeline.Flush] that learnt it. It must not
	// call the pipeline.
	OnStored func(eventbus.Event)
}

// Pipeline publishes events into a bus with a bounded window of backend
// appends in flight, for one producer that publishes many events (an agent
// streaming its output): [Pipeline.Publish] returns once the event is sent,
// without waiting for the backend to store it, and waits only when Window
// events are in flight. Over NATS JetStream this is several times the rate
// of [eventbus.Bus.Publish], which waits for every ack (2.8–5.7× on memory
// storage on a loaded 2-core machine: docs/benchmarks.md, NATS section).
//
// The guarantees of Publish stay: ids are the backend's sequence (the
// stream sequence over NATS), rise strictly in the order of the Publish
// calls, and reach every subscriber as any published event does. A failure
// is reported by the Publish or Flush that finds it, as a [*PipelineError]
// listing every event whose fate is unknown. On the in-memory bus, and
// over a backend without [AsyncBackend], each Publish is a [eventbus.Bus.Publish].
//
// A Pipeline is safe for concurrent use; calls are serialised, and events
// are ordered by the order in which Publish calls take the pipeline's lock.
// It holds no goroutine: drop it after a final Flush. Events still in flight
// when it is dropped are stored or not, unreported.
type Pipeline struct {
	b      *eventbus.Bus
	be     AsyncBackend // nil: publish synchronously
	window int
	onOK   func(eventbus.Event)

	mu     sync.Mutex
	next   eventbus.Event // the event being published, prepared in place
	flight []inflight     // ring of window slots; oldest at head
	head   int
	n      int // events in flight
}

type inflight struct {
	ev eventbus.Event
	p  PendingAppend
}

// PipelineError reports events a [Pipeline] sent whose storing failed or is
// unknown (a timeout: they may be stored; a refusal or a lost connection:
// they may not). Events acknowledged before and after them were reported
// through OnStored as usual. After it the pipeline is empty and usable.
type PipelineError struct {
	// Unknown are the events concerned, in publish order, with ID 0.
	Unknown []eventbus.Event
	// Err is the first backend error.
	Err error
}

// Error says how many events are unknown and the first backend error.
func (e *PipelineError) Error() string {
	return fmt.Sprintf("eventbus: pipeline: %d event(s) not confirmed, first error: %v", len(e.Unknown), e.Err)
}

// Unwrap returns Err, so errors.Is finds the backend's error (over NATS,
// for example, rbnats.ErrNoAck).
func (e *PipelineError) Unwrap() error { return e.Err }

// NewPipeline returns a [Pipeline] publishing into b. Errors:
// eventbus.ErrInvalid naming a Window out of range.
func NewPipeline(b *eventbus.Bus, opts PipelineOptions) (*Pipeline, error) {
	w := opts.Window
	if w == 0 {
		w = DefaultPipelineWindow
	}
	if w < 1 || w > MaxPipelineWindow {
		return nil, fmt.Errorf("%w: pipeline window %d out of range [1, %d]", eventbus.ErrInvalid, opts.Window, MaxPipelineWindow)
	}
	p := &Pipeline{b: b, window: w, onOK: opts.OnStored}
	if be, ok := hook.Backend(b).(AsyncBackend); ok {
		p.be = be
		p.flight = make([]inflight, w)
	}
	return p, nil
}

// Publish publishes one event as [eventbus.Bus.Publish] does (the same checks
// and options, the same errors for bad input, a closed session, an unknown
// one with [eventbus.Existing] or a closed bus; a refused event consumes no
// id), but over an [AsyncBackend] returns once the event is sent. When Window events are in flight it first waits for the oldest
// one's ack (at most the backend's publish timeout).
//
// When it finds that an earlier event failed, it waits for every event in
// flight and returns a [*PipelineError] naming the ones not confirmed; the
// event of this call is then not published (publish it again if wanted).
func (p *Pipeline) Publish(sessionID, typ string, data any, opts ...eventbus.PublishOption) error {
	if p.be == nil {
		ev, err := p.b.Publish(sessionID, typ, data, opts...)
		if err == nil && p.onOK != nil {
			p.onOK(ev)
		}
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	path, err := hook.Prepare(p.b, sessionID, typ, data, opts, &p.next)
	ev := p.next
	p.next = eventbus.Event{}
	if err != nil {
		return err
	}
	if p.n == p.window {
		if err := p.settleLocked(context.Background(), 1); err != nil {
			return err
		}
	}
	pa, err := p.be.AppendAsync(path, ev)
	if err != nil {
		if perr := p.settleLocked(context.Background(), p.n); perr != nil {
			return perr
		}
		return fmt.Errorf("eventbus: publish to backend: %w", err)
	}
	p.flight[(p.head+p.n)%p.window] = inflight{ev: ev, p: pa}
	p.n++
	return nil
}

// Flush waits until every event in flight is acknowledged, or ctx is done
// (ctx's error; the events stay in flight and a later Flush goes on). It
// returns a [*PipelineError] when any of them failed.
func (p *Pipeline) Flush(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settleLocked(ctx, p.n)
}

// Pending returns the number of events in flight.
func (p *Pipeline) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// settleLocked waits for the acks of the oldest k events in flight. On
// the first failure it waits for every event in flight and returns the
// PipelineError. p.mu held.
func (p *Pipeline) settleLocked(ctx context.Context, k int) error {
	var high uint64
	defer func() { hook.Acked(p.b, high) }()
	for ; k > 0 && p.n > 0; k-- {
		f := &p.flight[p.head]
		id, err := f.p.Wait(ctx)
		if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return err
		}
		if err != nil {
			return p.failLocked(err, &high)
		}
		ev := f.ev
		ev.ID = id
		high = max(high, id)
		p.popLocked()
		if p.onOK != nil {
			p.onOK(ev)
		}
	}
	return nil
}

// popLocked drops the oldest event in flight.
func (p *Pipeline) popLocked() {
	p.flight[p.head] = inflight{}
	p.head = (p.head + 1) % p.window
	p.n--
}

// failLocked waits for everything in flight after a failure of the oldest
// (each wait is bounded by the backend) and reports the events not
// confirmed.
func (p *Pipeline) failLocked(first error, high *uint64) error {
	perr := &PipelineError{Err: first}
	perr.Unknown = append(perr.Unknown, p.flight[p.head].ev)
	p.popLocked()
	for p.n > 0 {
		f := p.flight[p.head]
		p.popLocked()
		id, err := f.p.Wait(context.Background())
		if err != nil {
			perr.Unknown = append(perr.Unknown, f.ev)
			continue
		}
		f.ev.ID = id
		*high = max(*high, id)
		if p.onOK != nil {
			p.onOK(f.ev)
		}
	}
	p.head = 0
	return perr
}
