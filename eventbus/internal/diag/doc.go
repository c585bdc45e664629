// Package diag is the bus's diagnostics aggregator: it queues incidents
// (slow-client warnings, evictions, drops, session expiries) while the
// caller holds the bus's locks, and later, with no bus lock held, hands
// each to a hook and writes aggregated, rate-limited log lines. It knows
// nothing of the bus beyond the incidents' fields.
//
// Incidents leave the bus's locks before anyone sees them: [Aggregator.Add]
// (called inside a fan-out, with a bus lock held) only queues them, under a
// lock of their own that publishers of distinct trees share for a moment
// only when there is an incident; [Aggregator.Flush], which the bus runs
// after every bus lock is released, hands them to the hook and to the
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
// The bus's counters (Bus.Stats) stay exact whatever is logged.
package diag
