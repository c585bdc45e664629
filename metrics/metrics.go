package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/observe"
)

// Collector is a prometheus.Collector over one bus's [observe.Stats].
type Collector struct {
	bus   *eventbus.Bus
	descs []metric
}

type metric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(observe.Stats) float64
}

// NewCollector returns a Collector for bus whose metric names start with
// namespace (for example "replaybus"; "" for none). After bus.Close the
// collector keeps reporting the final counters.
func NewCollector(bus *eventbus.Bus, namespace string) *Collector {
	constLabels := prometheus.Labels{"epoch": bus.Epoch()}
	m := func(name, help string, kind prometheus.ValueType, v func(observe.Stats) float64) metric {
		return metric{prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, nil, constLabels), kind, v}
	}
	c := prometheus.CounterValue
	g := prometheus.GaugeValue
	return &Collector{bus: bus, descs: []metric{
		m("sessions", "Live sessions.", g, func(s observe.Stats) float64 { return float64(s.Sessions) }),
		m("subscribers", "Live subscribers.", g, func(s observe.Stats) float64 { return float64(s.Subscribers) }),
		m("events_published_total", "Events accepted by Publish and CloseSession.", c, func(s observe.Stats) float64 { return float64(s.Published) }),
		m("events_delivered_total", "Live events queued for subscribers.", c, func(s observe.Stats) float64 { return float64(s.Delivered) }),
		m("events_replayed_total", "Events handed out from replay buffers.", c, func(s observe.Stats) float64 { return float64(s.Replayed) }),
		m("events_dropped_total", "Events dropped for a slow subscriber (drop_oldest, drop_newest, droppable types).", c, func(s observe.Stats) float64 { return float64(s.Dropped) }),
		m("subscribers_evicted_total", "Subscribers evicted with client_evicted.", c, func(s observe.Stats) float64 { return float64(s.Evicted) }),
		m("slow_client_warnings_total", "slow_client_warning frames sent.", c, func(s observe.Stats) float64 { return float64(s.Warnings) }),
		m("resyncs_total", "state_resync_required frames sent around replays.", c, func(s observe.Stats) float64 { return float64(s.Resyncs) }),
		m("sessions_expired_total", "Sessions expired for idleness.", c, func(s observe.Stats) float64 { return float64(s.Expired) }),
		m("retained_buffers", "Closed sessions' replay buffers kept for their open ancestors.", g, func(s observe.Stats) float64 { return float64(s.Retained) }),
		m("retained_buffers_dropped_total", "Kept buffers dropped (retention time, cap, root closed) before a reopen.", c, func(s observe.Stats) float64 { return float64(s.RetainedDropped) }),
		m("turns_started_total", "Turns started (turn_start records applied).", c, func(s observe.Stats) float64 { return float64(s.TurnsStarted) }),
		m("turns_ended_total", "Turns ended, any reason (turn_end records applied).", c, func(s observe.Stats) float64 { return float64(s.TurnsEnded) }),
		m("turns_cancelled_total", "Turns ended cancelled.", c, func(s observe.Stats) float64 { return float64(s.TurnsCancelled) }),
		m("turns_failed_total", "Turns ended with an error.", c, func(s observe.Stats) float64 { return float64(s.TurnsFailed) }),
		m("turns_lost_total", "Turns ended producer_lost.", c, func(s observe.Stats) float64 { return float64(s.TurnsLost) }),
		m("cancels_held_total", "Cancels held for turns not yet started.", c, func(s observe.Stats) float64 { return float64(s.CancelsHeld) }),
		m("cancels_expired_total", "Held cancels that went unapplied.", c, func(s observe.Stats) float64 { return float64(s.CancelsExpired) }),
		m("presence_changes_total", "Changes of sessions' presence.", c, func(s observe.Stats) float64 { return float64(s.PresenceChanges) }),
	}}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.descs {
		ch <- m.desc
	}
}

// Collect implements prometheus.Collector: one [eventbus.Bus.Stats] call per
// scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.bus.Stats()
	for _, m := range c.descs {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(st))
	}
}
