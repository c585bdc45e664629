// Package observe holds what an eventbus.Bus reports about itself: the
// [Stats] counters and the [SessionInfo] of a listing. They are plain
// values, safe to copy and share; the metrics module exports them to
// Prometheus.
package observe
