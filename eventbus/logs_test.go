package eventbus_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// logSink collects log lines, safe for concurrent use.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logSink) lines(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if line != "" && strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

func logger(sink *logSink, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(sink, &slog.HandlerOptions{Level: level}))
}

// Issue 12.9: one stalled reader of droppable events produced one WARN
// line per dropped event (190 lines) where the docs promise one per
// episode. Now: one line for the episode; Stats still counts every drop.
func TestLogOneLinePerDropEpisode(t *testing.T) {
	t.Parallel()
	var sink logSink
	b := newBus(t, eventbus.Options{DroppableTypes: []string{"delta"}, Logger: logger(&sink, slog.LevelInfo)})
	subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 16, NoReplay: true, Name: "stalled"})
	publish(t, b, "s", 12) // 75 %: the slow-client warning
	for range 190 {
		_, err := b.Publish("s", "delta", nil)
		require.NoError(t, err)
	}
	assert.EqualValues(t, 190, b.Stats().Dropped, "every drop is counted")
	drops := sink.lines("eventbus: events_dropped")
	require.Len(t, drops, 1, "one line for the episode:\n%s", strings.Join(drops, "\n"))
	assert.Contains(t, drops[0], "level=WARN")
	assert.Contains(t, drops[0], "name=stalled")
	assert.Len(t, sink.lines("eventbus: slow_client_warning"), 1)
}

// Issue 12.9: an evicted client produced three lines. Now one WARN line
// (the slow-client warning before it is INFO).
func TestLogOneWarnLinePerEviction(t *testing.T) {
	t.Parallel()
	var sink logSink
	b := newBus(t, eventbus.Options{Logger: logger(&sink, slog.LevelWarn)})
	subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 16, NoReplay: true, Policy: eventbus.DropSubscriber})
	publish(t, b, "s", 40)
	assert.EqualValues(t, 1, b.Stats().Evicted)
	warn := sink.lines("level=WARN")
	require.Len(t, warn, 1, strings.Join(warn, "\n"))
	assert.Contains(t, warn[0], "eventbus: client_evicted")
}

// Issue 12.9: session churn logged one line per session. Expiries are INFO
// and at most 10 lines per 10 s; the next line says how many were
// suppressed. Runs on synctest's clock.
func TestLogSessionExpiryRateLimited(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var sink logSink
		b := newBus(t, eventbus.Options{SessionTTL: time.Second, Logger: logger(&sink, slog.LevelInfo)})
		for i := range 500 {
			publish(t, b, fmt.Sprintf("s%d", i), 1)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.EqualValues(t, 500, b.Stats().Expired)
		lines := sink.lines("eventbus: session_expired")
		assert.Len(t, lines, 10, "the burst, then silence")
		for i := range 300 {
			publish(t, b, fmt.Sprintf("t%d", i), 1)
		}
		time.Sleep(12 * time.Second)
		synctest.Wait()
		assert.EqualValues(t, 800, b.Stats().Expired)
		lines = sink.lines("eventbus: session_expired")
		require.Len(t, lines, 11, "one summary line when the window ends")
		assert.Contains(t, lines[10], "suppressed=790")
	})
}

// Issue 12.9: consecutive droppable drops that straddle the consumer's
// batch (it took a batch ending in an events_dropped frame, more were
// dropped while it worked through it) came out as two or more
// events_dropped frames in a row. They merge into one.
func TestConsecutiveDropsMergeIntoOneFrame(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{DroppableTypes: []string{"delta"}})
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{MaxQueued: 16, NoReplay: true, SlowClientWarning: new(bool)})
	publish(t, b, "s", 15) // 1..15, over 75 %
	_, err := b.Publish("s", "delta", nil)
	require.NoError(t, err) // 16: dropped
	first := next(t, s)     // takes the whole batch: 1..15 and the drop frame
	require.EqualValues(t, 1, first.ID)
	for range 5 { // 17..21: still over 75 % (14 queued): dropped
		_, err := b.Publish("s", "delta", nil)
		require.NoError(t, err)
	}
	evs := drain(s)
	require.Len(t, evs, 15, "14 events and ONE events_dropped frame")
	last := evs[len(evs)-1]
	require.Equal(t, frame.TypeStateResyncRequired, last.Type)
	var rd frame.ResyncData
	require.NoError(t, json.Unmarshal(last.Data, &rd))
	assert.Equal(t, frame.ReasonEventsDropped, rd.Reason)
	assert.EqualValues(t, 16, rd.FirstDroppedID)
	assert.EqualValues(t, 21, rd.LastDroppedID)
	assert.Equal(t, 6, rd.DroppedCount)
	assert.EqualValues(t, 15, rd.LastDeliveredID)
}
