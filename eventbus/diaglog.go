package eventbus

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Diagnostics leave the bus's locks before anyone sees them: diagnose
// (called inside a fan-out, with a tree lock, allMu or the structure lock
// held) only queues them, under diag.mu, a lock of their own that publishers
// of distinct trees share for a moment only when there is a diagnostic;
// flushDiagnostics, deferred by every method that can produce one so that it
// runs after every bus lock is released, hands them to the hook and to the
// aggregating logger on the caller's goroutine (with parallel publishers,
// possibly one that takes another's along).
//
// Logging is aggregated so that a stalled reader or a churn of sessions
// cannot flood the log (one WARN per dropped event for one stalled reader
// was 190 lines; one line per session expiry, tens of thousands):
//
//   - events_dropped: one WARN line when a subscriber's drop episode starts,
//     then at most one per diagLogEvery with the number dropped since; an
//     episode ends after diagLogEvery without a drop, and the next drop
//     starts a new one (its line carries the previous episode's unlogged
//     count);
//   - client_evicted: one WARN line per eviction (with the subscriber's
//     unlogged drops);
//   - slow_client_warning: INFO (the bus already sends it once per
//     episode; the eviction is what needs attention);
//   - session_expired: INFO;
//   - every kind: at most diagLogBurst lines per diagLogEvery; the rest are
//     counted and the next line of that kind says how many were suppressed.
//
// The counters of [Bus.Stats] stay exact whatever is logged.
const (
	diagLogEvery   = 10 * time.Second
	diagLogBurst   = 10
	maxPendingDiag = 4096 // queued, not yet flushed; more are counted as suppressed
	maxEpisodes    = 1024 // drop episodes remembered before idle ones are swept
)

type diagState struct {
	n       atomic.Int32 // len(pending), read without mu
	owed    atomic.Bool  // some kind has suppressed lines not reported yet
	mu      sync.Mutex
	pending []Diagnostic
	lost    int // diagnostics beyond maxPendingDiag, reported with the next line

	logMu    sync.Mutex
	episodes map[uint64]*dropEpisode // by subscriber id
	limits   map[DiagnosticKind]*lineLimit
}

type dropEpisode struct {
	first, last uint64    // ids of the first and last drop since the last line
	count       int       // drops since the last line
	lastDrop    time.Time // when the latest drop happened
	lastLine    time.Time // when the latest line was written
}

type lineLimit struct {
	window     time.Time
	lines      int
	suppressed int
}

// diagnose queues one diagnostic. A bus lock is held (see above): it must
// stay cheap and never log or call the hook.
func (b *Bus) diagnose(kind DiagnosticKind, s *Subscription, r *record) {
	if b.cfg.Diagnostics == nil && b.cfg.Logger == nil {
		return
	}
	d := Diagnostic{Kind: kind, Session: s.sess.id, Subscriber: s.id, Name: s.name, EventID: r.id, EventType: r.typ}
	if s.id != 0 {
		s.mu.Lock()
		d.Queue = s.figuresLocked()
		s.mu.Unlock()
	}
	b.diag.mu.Lock()
	if len(b.diag.pending) < maxPendingDiag {
		b.diag.pending = append(b.diag.pending, d)
		b.diag.n.Store(int32(len(b.diag.pending)))
	} else {
		b.diag.lost++
	}
	b.diag.mu.Unlock()
}

// flushDiagnostics delivers the queued diagnostics. It must be called
// without any bus lock held (methods defer it before taking one).
func (b *Bus) flushDiagnostics() {
	if b.diag.n.Load() == 0 && !b.diag.owed.Load() {
		return
	}
	b.diag.mu.Lock()
	batch, lost := b.diag.pending, b.diag.lost
	b.diag.pending, b.diag.lost = nil, 0
	b.diag.n.Store(0)
	b.diag.mu.Unlock()
	for _, d := range batch {
		if b.cfg.Diagnostics != nil {
			b.cfg.Diagnostics(d)
		}
	}
	if b.cfg.Logger == nil {
		return
	}
	now := b.cfg.now()
	var lines []slog.Record
	b.diag.logMu.Lock()
	for i, d := range batch {
		extra := 0
		if i == 0 {
			extra = lost
		}
		if rec, ok := b.diag.lineFor(d, now, extra); ok {
			lines = append(lines, rec)
		}
	}
	lines = b.diag.summaries(now, lines)
	b.diag.logMu.Unlock()
	h := b.cfg.Logger.Handler()
	for _, rec := range lines {
		if h.Enabled(context.Background(), rec.Level) {
			_ = h.Handle(context.Background(), rec)
		}
	}
}

// lineFor decides whether d gets a log line and builds it. logMu is held.
func (ds *diagState) lineFor(d Diagnostic, now time.Time, lost int) (slog.Record, bool) {
	level := slog.LevelWarn
	var attrs []slog.Attr
	switch d.Kind {
	case DiagDropped:
		if ds.episodes == nil {
			ds.episodes = make(map[uint64]*dropEpisode)
		}
		ep := ds.episodes[d.Subscriber]
		switch {
		case ep == nil:
			if len(ds.episodes) >= maxEpisodes {
				ds.sweep(now)
			}
			ep = &dropEpisode{}
			ds.episodes[d.Subscriber] = ep
		case now.Sub(ep.lastDrop) >= diagLogEvery:
			// The previous episode ended; this drop starts a new one.
			if ep.count > 0 {
				attrs = append(attrs, slog.Int("previous_episode_unlogged", ep.count))
			}
			*ep = dropEpisode{}
		case now.Sub(ep.lastLine) < diagLogEvery:
			// Inside an episode, within the interval: count only.
			ep.count++
			ep.last = d.EventID
			ep.lastDrop = now
			return slog.Record{}, false
		}
		if ep.count == 0 {
			ep.first = d.EventID
		}
		ep.count++
		ep.last = d.EventID
		ep.lastDrop, ep.lastLine = now, now
		attrs = append(attrs, slog.Int("dropped", ep.count),
			slog.Uint64("first_event_id", ep.first), slog.Uint64("last_event_id", ep.last))
		ep.count = 0
	case DiagEvicted:
		if ep := ds.episodes[d.Subscriber]; ep != nil {
			if ep.count > 0 {
				attrs = append(attrs, slog.Int("dropped_unlogged", ep.count))
			}
			delete(ds.episodes, d.Subscriber)
		}
	case DiagSlowClientWarning, DiagSessionExpired:
		level = slog.LevelInfo
	}
	if ds.limits == nil {
		ds.limits = make(map[DiagnosticKind]*lineLimit)
	}
	lim := ds.limits[d.Kind]
	if lim == nil {
		lim = &lineLimit{}
		ds.limits[d.Kind] = lim
	}
	if now.Sub(lim.window) >= diagLogEvery {
		lim.window, lim.lines = now, 0
	}
	if lim.lines >= diagLogBurst {
		lim.suppressed++
		ds.owed.Store(true)
		return slog.Record{}, false
	}
	lim.lines++
	rec := slog.NewRecord(now, level, "eventbus: "+string(d.Kind), 0)
	rec.AddAttrs(slog.String("session", d.Session))
	if d.Subscriber != 0 {
		rec.AddAttrs(slog.Uint64("subscriber", d.Subscriber), slog.String("name", d.Name),
			slog.Uint64("event_id", d.EventID), slog.String("event_type", d.EventType),
			slog.Int("queue_size", d.Queue.QueueSize), slog.Int64("queued_bytes", d.Queue.QueuedBytes))
	}
	rec.AddAttrs(attrs...)
	if lim.suppressed > 0 {
		rec.AddAttrs(slog.Int("suppressed", lim.suppressed))
		lim.suppressed = 0
	}
	if lost > 0 {
		rec.AddAttrs(slog.Int("diagnostics_lost", lost))
	}
	return rec, true
}

// summaries appends one line per kind whose window ended with lines
// suppressed, so that a burst is reported even when nothing follows it
// (the expiry goroutine flushes periodically). logMu is held.
func (ds *diagState) summaries(now time.Time, lines []slog.Record) []slog.Record {
	if !ds.owed.Load() {
		return lines
	}
	owed := false
	for kind, lim := range ds.limits {
		if lim.suppressed == 0 {
			continue
		}
		if now.Sub(lim.window) < diagLogEvery {
			owed = true
			continue
		}
		level := slog.LevelWarn
		if kind == DiagSlowClientWarning || kind == DiagSessionExpired {
			level = slog.LevelInfo
		}
		rec := slog.NewRecord(now, level, "eventbus: "+string(kind)+" (summary)", 0)
		rec.AddAttrs(slog.Int("suppressed", lim.suppressed), slog.Duration("window", diagLogEvery))
		lines = append(lines, rec)
		lim.suppressed, lim.window, lim.lines = 0, now, 0
	}
	ds.owed.Store(owed)
	return lines
}

// sweep forgets drop episodes that ended (no drop for diagLogEvery).
func (ds *diagState) sweep(now time.Time) {
	for id, ep := range ds.episodes {
		if now.Sub(ep.lastDrop) >= diagLogEvery {
			delete(ds.episodes, id)
		}
	}
}
