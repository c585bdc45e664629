package eventbus

import (
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/eventbus/internal/diag"
	"github.com/replaybus/replaybus/eventbus/observe"
)

// Diagnostics leave the bus's locks before anyone sees them (package
// internal/diag): diagnose, called inside a fan-out with a tree lock,
// allMu or the structure lock held, only queues them; flushDiagnostics,
// deferred by every method that can produce one so that it runs after
// every bus lock is released, hands them to Options.Diagnostics and to the
// aggregating logger of Options.Logger on the caller's goroutine.

// diagnose queues one diagnostic. A bus lock is held: it must stay cheap
// and never log or call the hook.
func (b *Bus) diagnose(kind observe.DiagnosticKind, s *Subscription, r *record) {
	if b.cfg.Diagnostics == nil && b.cfg.Logger == nil {
		return
	}
	d := diag.Item{Kind: string(kind), Session: s.sess.id, Subscriber: s.id, Name: s.name, EventID: r.ID, EventType: r.Type}
	if s.id != 0 {
		s.mu.Lock()
		q := s.figuresLocked()
		s.mu.Unlock()
		d.QueueSize, d.MaxQueued, d.QueuedBytes, d.MaxQueuedBytes = q.QueueSize, q.MaxQueued, q.QueuedBytes, q.MaxQueuedBytes
	}
	b.diag.Add(d)
}

// flushDiagnostics delivers the queued diagnostics. It must be called
// without any bus lock held (methods defer it before taking one).
func (b *Bus) flushDiagnostics() {
	b.diag.Flush(b.cfg.now, b.diagHook, b.cfg.Logger)
}

// diagHook turns an incident into the observe.Diagnostic of Options.Diagnostics.
func (b *Bus) diagHook(d diag.Item) {
	if b.cfg.Diagnostics == nil {
		return
	}
	b.cfg.Diagnostics(observe.Diagnostic{
		Kind: observe.DiagnosticKind(d.Kind), Session: d.Session, Subscriber: d.Subscriber, Name: d.Name,
		EventID: d.EventID, EventType: d.EventType,
		Queue: frame.QueueFigures{QueueSize: d.QueueSize, MaxQueued: d.MaxQueued, QueuedBytes: d.QueuedBytes, MaxQueuedBytes: d.MaxQueuedBytes},
	})
}
