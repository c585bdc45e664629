package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/examples/agentserver/server"
	"github.com/replaybus/replaybus/internal/testkit"
)

// durableItem is one item of a session read as a Durable Stream: the
// envelope of an event published by Go.
type durableItem struct {
	ID   uint64          `json:"id"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// durableGet reads url (a catch-up or long-poll read) and returns the items
// and the Stream-Next-Offset.
func durableGet(t *testing.T, url string) ([]durableItem, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var items []durableItem
	require.NoError(t, json.Unmarshal(b, &items), "%s", b)
	return items, resp.Header.Get(durable.HeaderNextOffset)
}

func itemIDs(items []durableItem) []uint64 {
	ids := make([]uint64, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	return ids
}

func idRange(from, to uint64) []uint64 {
	var ids []uint64
	for i := from; i <= to; i++ {
		ids = append(ids, i)
	}
	return ids
}

// TestDurableAndSSEReadOneSession: one session is read over the SSE route
// and as a Durable Stream at the same time, and positions translate one to
// one: an SSE id ("<epoch>-<id>") read halfway becomes a Durable Streams
// offset that resumes exactly after it, and a Durable Streams offset
// becomes a Last-Event-ID that resumes the SSE stream (and a lastEventId
// that resumes a WebSocket stream) exactly after it.
// A live event reaches a long-poll and the SSE stream alike, with the
// same id.
func TestDurableAndSSEReadOneSession(t *testing.T) {
	ts := startServer(t, eventbus.Options{ReplayBufferSize: 1000}, server.Options{
		SSE:     sse.HandlerOptions{},
		Durable: durable.HandlerOptions{ChunkBytes: 200, LongPollTimeout: 30 * time.Second},
	})
	bus, base := ts.bus, ts.ts.URL
	epoch := bus.Epoch()
	require.NoError(t, bus.CreateSession("run", ""))
	for i := 1; i <= 20; i++ {
		_, err := bus.Publish("run", "tick", map[string]int{"n": i})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// SSE → Durable Streams: read 10 events over SSE, resume as a Durable
	// Stream from the last SSE id.
	st := (&sse.Client{}).Subscribe(ctx, base+"/session/run/events", sse.StreamOptions{})
	defer st.Close()
	var sseIDs []uint64
	for len(sseIDs) < 10 {
		ev, err := st.Next()
		require.NoError(t, err)
		if ev.ID > 0 {
			sseIDs = append(sseIDs, ev.ID)
		}
	}
	require.Equal(t, idRange(1, 10), sseIDs)
	cur, err := resume.ParseCursor(resume.FormatID(10, epoch))
	require.NoError(t, err)
	var got []uint64
	off := durable.FormatOffset(*cur)
	for {
		items, next := durableGet(t, base+durable.Pattern+"run?offset="+off)
		if len(items) == 0 {
			break
		}
		got = append(got, itemIDs(items)...)
		last := items[len(items)-1].ID
		assert.Equal(t, durable.FormatOffset(eventbus.Position{ID: last, Epoch: epoch}), next,
			"the next offset is the last item's id")
		off = next
	}
	require.Equal(t, idRange(11, 20), got, "resumed exactly after the SSE id")

	// Durable Streams → SSE: read the first chunk as a Durable Stream,
	// resume over SSE from its next offset.
	items, next := durableGet(t, base+durable.Pattern+"run?offset=-1")
	require.NotEmpty(t, items)
	require.Less(t, len(items), 20, "ChunkBytes cut the read short")
	p, err := durable.ParseOffset(next)
	require.NoError(t, err)
	st2 := (&sse.Client{}).Subscribe(ctx, base+"/session/run/events",
		sse.StreamOptions{LastEventID: resume.FormatID(p.ID, p.Epoch)})
	defer st2.Close()
	var resumed []uint64
	for {
		ev, err := st2.Next()
		require.NoError(t, err)
		if ev.ID > 0 {
			resumed = append(resumed, ev.ID)
		}
		if ev.ID == 20 {
			break
		}
	}
	require.Equal(t, idRange(uint64(len(items))+1, 20), resumed, "resumed exactly after the offset")

	// Durable Streams → WebSocket: the same offset is the WebSocket
	// route's lastEventId as well.
	wst := ws.Subscribe(ctx, "ws"+strings.TrimPrefix(base, "http")+"/session/run/ws",
		ws.StreamOptions{LastEventID: resume.FormatID(p.ID, p.Epoch)})
	defer wst.Close()
	var wsIDs []uint64
	for {
		ev, err := wst.Next()
		require.NoError(t, err)
		if ev.ID > 0 {
			wsIDs = append(wsIDs, ev.ID)
		}
		if ev.ID == 20 {
			break
		}
	}
	require.Equal(t, resumed, wsIDs, "the WebSocket route resumed at the same place")

	// Live, both at once: a long-poll at the tail and the first SSE stream
	// receive the next event with one id.
	type lp struct {
		status int
		body   []byte
		next   string
		err    error
	}
	polled := make(chan lp, 1)
	go func() { // no require off the test goroutine: the answer goes back as is
		resp, err := http.Get(base + durable.Pattern + "run?live=long-poll&offset=" + off)
		if err != nil {
			polled <- lp{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		polled <- lp{resp.StatusCode, b, resp.Header.Get(durable.HeaderNextOffset), err}
	}()
	for len(sseIDs) < 20 { // the first stream catches up
		ev, err := st.Next()
		require.NoError(t, err)
		if ev.ID > 0 {
			sseIDs = append(sseIDs, ev.ID)
		}
	}
	require.Eventually(t, func() bool { return testkit.SubscriberCounts(bus)["run"] >= 3 }, 10*time.Second, time.Millisecond,
		"the long-poll waits beside the two SSE streams")
	ev, err := bus.Publish("run", "tick", map[string]int{"n": 21})
	require.NoError(t, err)
	r := <-polled
	require.NoError(t, r.err)
	require.Equal(t, http.StatusOK, r.status)
	var live []durableItem
	require.NoError(t, json.Unmarshal(r.body, &live), "%s", r.body)
	require.Equal(t, []uint64{ev.ID}, itemIDs(live))
	assert.JSONEq(t, `{"n":21}`, string(live[0].Data))
	assert.Equal(t, durable.FormatOffset(eventbus.Position{ID: ev.ID, Epoch: epoch}), r.next)
	for {
		sev, err := st.Next()
		require.NoError(t, err)
		if sev.ID > 0 {
			assert.Equal(t, ev.ID, sev.ID)
			assert.Equal(t, resume.FormatID(ev.ID, epoch), resume.FormatID(sev.ID, epoch))
			break
		}
	}
}
