// Package metrics exports an event bus's counters to Prometheus.
//
// [NewCollector] wraps a [eventbus.Bus] in a prometheus.Collector that reads
// [eventbus.Bus.Stats] on every scrape: no hot-path cost, no goroutine.
// Register it with a prometheus.Registerer and serve promhttp.Handler:
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(metrics.NewCollector(bus, "replaybus"))
//	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// # Metrics
//
// Gauges: <ns>_sessions, <ns>_subscribers, <ns>_retained_buffers. Counters: <ns>_events_published_total,
// <ns>_events_delivered_total, <ns>_events_replayed_total,
// <ns>_events_dropped_total, <ns>_subscribers_evicted_total,
// <ns>_slow_client_warnings_total, <ns>_resyncs_total,
// <ns>_sessions_expired_total, <ns>_retained_buffers_dropped_total. Each counter is the bus's total since it was
// created, so a restarted bus starts again from zero, as Prometheus expects.
//
// # Concurrency
//
// A Collector is safe for concurrent scrapes; each takes the bus lock once,
// briefly.
package metrics
