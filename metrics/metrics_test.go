package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCollectorReportsStats(t *testing.T) {
	bus, err := eventbus.New(eventbus.Options{MaxQueueSize: 2, OverflowPolicy: eventbus.DropSubscriber, Epoch: "e1"})
	require.NoError(t, err)
	defer bus.Close()
	sub, err := bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	for i := 0; i < 3; i++ { // 1, 2 queued (warning at 2), 3 evicts
		_, err := bus.Publish("s", "t", i)
		require.NoError(t, err)
	}
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(metrics.NewCollector(bus, "replaybus")))
	want := `
# HELP replaybus_events_published_total Events accepted by Publish and CloseSession.
# TYPE replaybus_events_published_total counter
replaybus_events_published_total{epoch="e1"} 3
# HELP replaybus_subscribers_evicted_total Subscribers evicted with client_evicted.
# TYPE replaybus_subscribers_evicted_total counter
replaybus_subscribers_evicted_total{epoch="e1"} 1
# HELP replaybus_slow_client_warnings_total slow_client_warning frames sent.
# TYPE replaybus_slow_client_warnings_total counter
replaybus_slow_client_warnings_total{epoch="e1"} 1
# HELP replaybus_subscribers Live subscribers.
# TYPE replaybus_subscribers gauge
replaybus_subscribers{epoch="e1"} 0
# HELP replaybus_sessions Live sessions.
# TYPE replaybus_sessions gauge
replaybus_sessions{epoch="e1"} 1
`
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"replaybus_events_published_total", "replaybus_subscribers_evicted_total",
		"replaybus_slow_client_warnings_total", "replaybus_subscribers", "replaybus_sessions"))
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Equal(t, 20, n)
}

func TestCollectorReportsTurns(t *testing.T) {
	bus, err := eventbus.New(eventbus.Options{Epoch: "e1"})
	require.NoError(t, err)
	defer bus.Close()
	require.NoError(t, bus.CreateSession("s", ""))
	_, err = bus.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "t"})
	require.NoError(t, err)
	_, err = bus.Cancel(context.Background(), "s", frame.TurnData{})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(metrics.NewCollector(bus, "replaybus")))
	want := `
# HELP replaybus_turns_started_total Turns started (turn_start records applied).
# TYPE replaybus_turns_started_total counter
replaybus_turns_started_total{epoch="e1"} 1
# HELP replaybus_turns_cancelled_total Turns ended cancelled.
# TYPE replaybus_turns_cancelled_total counter
replaybus_turns_cancelled_total{epoch="e1"} 1
`
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"replaybus_turns_started_total", "replaybus_turns_cancelled_total"))
}
