package diag

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The detail logger gets every incident as its own record; the log gets one line per drop episode and
// at most diagLogBurst lines per kind per window, then a summary.
func TestAggregatorFlush(t *testing.T) {
	var a Aggregator
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	var detailBuf bytes.Buffer
	hook := slog.New(slog.NewTextHandler(&detailBuf, &slog.HandlerOptions{Level: slog.LevelInfo}))

	for i := range 50 {
		a.Add(Item{Kind: Dropped, Session: "s", Subscriber: 1, EventID: uint64(i + 1)})
	}
	for i := range 15 {
		a.Add(Item{Kind: Evicted, Session: "s", Subscriber: uint64(100 + i), EventID: 7})
	}
	a.Flush(clock, hook, logger)
	details := strings.Split(strings.TrimSpace(detailBuf.String()), "\n")
	assert.Len(t, details, 65, "the detail logger sees every incident")
	assert.Contains(t, details[64], `msg="eventbus: client_evicted" session=s subscriber=114`)
	detailBuf.Reset()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	assert.Equal(t, 1+diagLogBurst, len(lines), "one drop line, then the eviction burst limit: %s", buf.String())
	assert.Contains(t, lines[0], "events_dropped")
	assert.Contains(t, lines[0], "dropped=1")

	buf.Reset()
	now = now.Add(diagLogEvery)
	a.Flush(clock, hook, logger) // nothing pending: the window's summary only
	assert.Empty(t, detailBuf.String(), "no incident, no detail")
	assert.Contains(t, buf.String(), "client_evicted (summary)")
	assert.Contains(t, buf.String(), "suppressed=5")

	buf.Reset()
	a.Add(Item{Kind: Dropped, Session: "s", Subscriber: 1, EventID: 51})
	a.Flush(clock, nil, logger)
	assert.Contains(t, buf.String(), "previous_episode_unlogged=49", "the new episode reports the old one's drops")
}
