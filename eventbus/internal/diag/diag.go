package diag

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// The kinds of incident: the message of their records is "eventbus: "
// and the kind.
const (
	Warning = "slow_client_warning"
	Evicted = "client_evicted"
	Dropped = "events_dropped"
	Expired = "session_expired"
)

// Item is one incident.
type Item struct {
	Kind           string
	Session        string
	Subscriber     uint64 // 0 for an expiry
	Name           string
	EventID        uint64
	EventType      string
	QueueSize      int
	MaxQueued      int
	QueuedBytes    int64
	MaxQueuedBytes int64
}

// Limits of the aggregation.
const (
	diagLogEvery   = 10 * time.Second
	diagLogBurst   = 10
	maxPendingDiag = 4096 // queued, not yet flushed; more are counted as suppressed
	maxEpisodes    = 1024 // drop episodes remembered before idle ones are swept
)

// Aggregator queues incidents and flushes them. The zero value is ready to
// use; all methods are safe for concurrent use.
type Aggregator struct {
	n       atomic.Int32 // len(pending), read without mu
	owed    atomic.Bool  // some kind has suppressed lines not reported yet
	mu      sync.Mutex
	pending []Item
	lost    int // diagnostics beyond maxPendingDiag, reported with the next line

	logMu    sync.Mutex
	episodes map[uint64]*dropEpisode // by subscriber id
	limits   map[string]*lineLimit
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

// Add queues one incident. A bus lock may be held: it stays cheap and
// never logs or calls the hook.
func (a *Aggregator) Add(d Item) {
	a.mu.Lock()
	if len(a.pending) < maxPendingDiag {
		a.pending = append(a.pending, d)
		a.n.Store(int32(len(a.pending)))
	} else {
		a.lost++
	}
	a.mu.Unlock()
}

// Flush writes one record per queued incident to detail (if not nil),
// unaggregated, and the log lines due to logger (if not nil), at now. No
// bus lock may be held.
func (a *Aggregator) Flush(now func() time.Time, detail, logger *slog.Logger) {
	if a.n.Load() == 0 && !a.owed.Load() {
		return
	}
	a.mu.Lock()
	batch, lost := a.pending, a.lost
	a.pending, a.lost = nil, 0
	a.n.Store(0)
	a.mu.Unlock()
	t := now()
	if detail != nil {
		h := detail.Handler()
		for _, d := range batch {
			if rec := d.Record(t); h.Enabled(context.Background(), rec.Level) {
				_ = h.Handle(context.Background(), rec)
			}
		}
	}
	if logger == nil {
		return
	}
	var lines []slog.Record
	a.logMu.Lock()
	for i, d := range batch {
		extra := 0
		if i == 0 {
			extra = lost
		}
		if rec, ok := a.lineFor(d, t, extra); ok {
			lines = append(lines, rec)
		}
	}
	lines = a.summaries(t, lines)
	a.logMu.Unlock()
	h := logger.Handler()
	for _, rec := range lines {
		if h.Enabled(context.Background(), rec.Level) {
			_ = h.Handle(context.Background(), rec)
		}
	}
}

// lineFor decides whether d gets a log line and builds it. logMu is held.
func (ds *Aggregator) lineFor(d Item, now time.Time, lost int) (slog.Record, bool) {
	level := slog.LevelWarn
	var attrs []slog.Attr
	switch d.Kind {
	case Dropped:
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
	case Evicted:
		if ep := ds.episodes[d.Subscriber]; ep != nil {
			if ep.count > 0 {
				attrs = append(attrs, slog.Int("dropped_unlogged", ep.count))
			}
			delete(ds.episodes, d.Subscriber)
		}
	case Warning, Expired:
		level = slog.LevelInfo
	}
	if ds.limits == nil {
		ds.limits = make(map[string]*lineLimit)
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
	rec := slog.NewRecord(now, level, "eventbus: "+d.Kind, 0)
	rec.AddAttrs(slog.String("session", d.Session))
	if d.Subscriber != 0 {
		rec.AddAttrs(slog.Uint64("subscriber", d.Subscriber), slog.String("name", d.Name),
			slog.Uint64("event_id", d.EventID), slog.String("event_type", d.EventType),
			slog.Int("queue_size", d.QueueSize), slog.Int64("queued_bytes", d.QueuedBytes))
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
func (ds *Aggregator) summaries(now time.Time, lines []slog.Record) []slog.Record {
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
		if kind == Warning || kind == Expired {
			level = slog.LevelInfo
		}
		rec := slog.NewRecord(now, level, "eventbus: "+kind+" (summary)", 0)
		rec.AddAttrs(slog.Int("suppressed", lim.suppressed), slog.Duration("window", diagLogEvery))
		lines = append(lines, rec)
		lim.suppressed, lim.window, lim.lines = 0, now, 0
	}
	ds.owed.Store(owed)
	return lines
}

// sweep forgets drop episodes that ended (no drop for diagLogEvery).
func (ds *Aggregator) sweep(now time.Time) {
	for id, ep := range ds.episodes {
		if now.Sub(ep.lastDrop) >= diagLogEvery {
			delete(ds.episodes, id)
		}
	}
}

// Record is d's own record, unaggregated: message "eventbus: " and the
// kind, WARN for a drop or an eviction and INFO otherwise, with the
// attributes session and, for a subscriber's incident, subscriber, name,
// event_id, event_type, queue_size, max_queued, queued_bytes and
// max_queued_bytes.
func (d Item) Record(now time.Time) slog.Record {
	level := slog.LevelInfo
	if d.Kind == Dropped || d.Kind == Evicted {
		level = slog.LevelWarn
	}
	rec := slog.NewRecord(now, level, "eventbus: "+d.Kind, 0)
	rec.AddAttrs(slog.String("session", d.Session))
	if d.Subscriber != 0 {
		rec.AddAttrs(slog.Uint64("subscriber", d.Subscriber), slog.String("name", d.Name),
			slog.Uint64("event_id", d.EventID), slog.String("event_type", d.EventType),
			slog.Int("queue_size", d.QueueSize), slog.Int("max_queued", d.MaxQueued),
			slog.Int64("queued_bytes", d.QueuedBytes), slog.Int64("max_queued_bytes", d.MaxQueuedBytes))
	}
	return rec
}
