package eventbus

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/replaybus/replaybus/eventbus/backend"
	"github.com/replaybus/replaybus/eventbus/producer"
)

// The window of a Pipeline: its default and its largest.
const (
	defaultPipelineWindow = 256
	maxPipelineWindow     = 4096
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
	OnStored func(Event)
}

// Pipeline publishes one producer's events with a bounded window of
// backend appends in flight: [Pipeline.Publish] returns once the event is
// sent and waits only when Window events are in flight. Ids rise in the
// order of the Publish calls and reach subscribers as any published event.
// A failure is reported by the Publish or Flush that finds it, as a
// [*PipelineError]. On the in-memory bus, and over a backend without
// backend.AsyncBackend, each Publish is a [Bus.Publish]. Safe for concurrent use
// (calls are serialised); it holds no goroutine.
type Pipeline struct {
	b      *Bus
	f      *fedStore // the store whose backend keeps appends in flight; nil: publish synchronously
	window int
	onOK   func(Event)

	mu     sync.Mutex
	flight []inflight // ring of window slots; oldest at head
	head   int
	n      int // events in flight
}

type inflight struct {
	ev Event
	p  backend.PendingAppend
}

// PipelineError reports events a [Pipeline] sent whose storing failed or is
// unknown (a timeout: they may be stored; a refusal or a lost connection:
// they may not). Events acknowledged before and after them were reported
// through OnStored as usual. After it the pipeline is empty and usable.
type PipelineError struct {
	// Unknown are the events concerned, in publish order, with ID 0.
	Unknown []Event
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
// ErrInvalid naming a Window out of range.
func NewPipeline(b *Bus, opts PipelineOptions) (*Pipeline, error) {
	w := opts.Window
	if w == 0 {
		w = defaultPipelineWindow
	}
	if w < 1 || w > maxPipelineWindow {
		return nil, invalidf("pipeline window %d out of range [1, %d]", opts.Window, maxPipelineWindow)
	}
	p := &Pipeline{b: b, f: b.st.pipeline(), window: w, onOK: opts.OnStored}
	if p.f != nil {
		p.flight = make([]inflight, w)
	}
	return p, nil
}

// Publish publishes one event as [Bus.Publish] does, but over an
// backend.AsyncBackend returns once it is sent, waiting for the oldest ack when
// Window events are in flight. After an earlier failure it waits for every
// event in flight, publishes nothing and returns a [*PipelineError]. A
// stamped publish over a backend.AsyncBackend is producer.ErrUnsupported.
func (p *Pipeline) Publish(sessionID, typ string, data any, opts ...PublishOption) error {
	if p.f == nil {
		ev, err := p.b.Publish(sessionID, typ, data, opts...)
		if err == nil && p.onOK != nil {
			p.onOK(ev)
		}
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ev, path, err := p.prepare(sessionID, typ, data, opts)
	if err != nil {
		return err
	}
	if p.n == p.window {
		if err := p.settleLocked(context.Background(), 1); err != nil {
			return err
		}
	}
	pa, err := p.f.async.AppendAsync(path, recordOf(&ev))
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

// prepare is the first half of a pipelined publish: the checks and the
// encoding of Publish, then the session (created if new, unless
// Existing; marked published) and its tree path.
func (p *Pipeline) prepare(sessionID, typ string, data any, opts []PublishOption) (Event, []string, error) {
	if err := checkEvent(sessionID, typ); err != nil {
		return Event{}, nil, err
	}
	raw, err := encode(data)
	if err != nil {
		return Event{}, nil, err
	}
	origin, create, stamp := publishOpts(opts) // Existing and WithOrigin, as Publish
	if stamp != nil {
		return Event{}, nil, producer.ErrUnsupported // appends in flight are not checked, so refused
	}
	path, err := p.f.target(sessionID, create)
	if err != nil {
		return Event{}, nil, err
	}
	return Event{Session: sessionID, Type: typ, Data: raw, Time: p.b.cfg.now(), Origin: origin}, path, nil
}

// Flush waits until every event in flight is acknowledged, or ctx is done
// (ctx's error; the events stay in flight and a later Flush goes on). It
// returns a [*PipelineError] when any of them failed.
func (p *Pipeline) Flush(ctx context.Context) error {
	if p.f == nil {
		return nil // each Publish completed at once
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settleLocked(ctx, p.n)
}

// settleLocked waits for the acks of the oldest k events in flight. On
// the first failure it waits for every event in flight and returns the
// PipelineError. p.mu held.
func (p *Pipeline) settleLocked(ctx context.Context, k int) error {
	var high uint64
	defer func() { p.f.acked(high) }()
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
