// Package observe holds what an eventbus.Bus reports about itself: the
// [Stats] counters, the [SessionInfo] of a listing and the [Diagnostic]
// incidents (slow clients, evictions, drops, expiries) its
// Options.Diagnostics hook receives. They are plain values, safe to copy
// and share; the metrics module exports them to Prometheus.
package observe
