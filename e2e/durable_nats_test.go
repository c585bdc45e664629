package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/eventbus"
)

// TestDurableClientResumesAcrossRestartOverNATS: the agent server runs
// over NATS JetStream, whose history and epoch outlive it. npm
// @durable-streams/client tails a session holding ids 1…10, over long-poll
// and over SSE; the agent server restarts on the same address (a new bus
// node over the same JetStream, a new Durable Streams handler that has
// never seen the stream), and Go publishes 11…20. The client's next read
// carries its offset of the same epoch: it resumes exactly there and ends
// with ids 1…20, each once, in order. Over long-poll the client's own
// retry reaches the new server; over SSE the cut answer ends the client's
// read and client.mjs starts a new one from its last offset
// (docs/durable-streams.md, "Real clients").
func TestDurableClientResumesAcrossRestartOverNATS(t *testing.T) {
	node, dir := needDurableDeps(t)
	for _, live := range []string{"long-poll", "sse"} {
		t.Run(live, func(t *testing.T) { resumesAcrossRestartOverNATS(t, node, dir, live) })
	}
}

func resumesAcrossRestartOverNATS(t *testing.T, node, dir, live string) {
	ns, err := embedded.RunServer(embedded.ServerConfig{})
	require.NoError(t, err)
	defer ns.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := func(addr string) (*eventbus.Bus, *httptest.Server, chan string) {
		bus, err := rbnats.Connect(ctx, ns.ClientURL(), eventbus.Options{ReplayBufferSize: 1000})
		require.NoError(t, err)
		ts, offsets := startDurableServer(t, bus, addr)
		return bus, ts, offsets
	}
	bus1, ts1, live1 := start("")
	require.NoError(t, bus1.CreateSession("run", ""))
	var last eventbus.Event
	var ids []uint64
	for i := 1; i <= 10; i++ {
		last, err = bus1.Publish("run", "tick", map[string]int{"n": i})
		require.NoError(t, err)
		ids = append(ids, last.ID)
	}
	tail := durable.FormatOffset(eventbus.Position{ID: last.ID, Epoch: bus1.Epoch()})

	out, stderr := runDurableClient(ctx, t, node, dir, ts1.URL+durable.Pattern+"run", 20, live)
	for off := range live1 {
		if off == tail {
			break // the client tails the stream after the 10th event
		}
	}
	addr := ts1.Listener.Addr().String()
	ts1.CloseClientConnections()
	ts1.Close()
	require.NoError(t, bus1.Close())

	bus2, ts2, _ := start(addr)
	defer ts2.Close()
	defer bus2.Close()
	require.Equal(t, bus1.Epoch(), bus2.Epoch(), "JetStream keeps the epoch")
	for i := 11; i <= 20; i++ {
		ev, err := bus2.Publish("run", "tick", map[string]int{"n": i})
		require.NoError(t, err)
		ids = append(ids, ev.ID)
	}
	res := <-out
	require.Nil(t, res.Error, "the read ended with an error %+v; reason %s, stderr: %s", res.Error, res.Reason, stderr)
	require.Equal(t, "total", res.Reason, "stderr: %s", stderr)
	assert.Equal(t, ids, res.IDs, "the events of both nodes, once each, in order")
	if live == "sse" {
		assert.Positive(t, res.Retries, "the cut SSE read was started again by client.mjs")
	}
}

// TestDurableProducersOverNATS: the Durable Streams route of the example
// server over a bus on NATS JetStream takes Producer-Id/-Epoch/-Seq as it
// does in memory (PROTOCOL.md §5.2.1): the first append is stored (200),
// its retry after a lost answer is acknowledged without a second item
// (204), a sequence gap is 409 naming the expected sequence, and a zombie
// of an older epoch is 403 naming the epoch in force — also when it talks
// to another server node over the same JetStream.
func TestDurableProducersOverNATS(t *testing.T) {
	ns, err := embedded.RunServer(embedded.ServerConfig{})
	require.NoError(t, err)
	t.Cleanup(ns.Shutdown) // after the buses' Close (t.Cleanup runs last in, first out): a node closed after its server waits out the publish timeout
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := func() *eventbus.Bus {
		bus, err := rbnats.Connect(ctx, ns.ClientURL(), eventbus.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { bus.Close() })
		return bus
	}
	bus1, bus2 := start(), start()
	ts1, _ := startDurableServer(t, bus1, "")
	defer ts1.Close()
	ts2, _ := startDurableServer(t, bus2, "")
	defer ts2.Close()
	url1, url2 := ts1.URL+durable.Pattern+"run", ts2.URL+durable.Pattern+"run"

	do := func(method, url, body string, hdr ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	prod := func(epoch, seq string) []string {
		return []string{"Producer-Id", "writer", "Producer-Epoch", epoch, "Producer-Seq", seq}
	}
	require.Equal(t, http.StatusCreated, do(http.MethodPut, url1, "").StatusCode)

	first := do(http.MethodPost, url1, `{"n":1}`, prod("1", "0")...)
	require.Equal(t, http.StatusOK, first.StatusCode)
	retry := do(http.MethodPost, url1, `{"n":1}`, prod("1", "0")...)
	assert.Equal(t, http.StatusNoContent, retry.StatusCode, "the retry is acknowledged")
	assert.Equal(t, "0", retry.Header.Get("Producer-Seq"))
	assert.Equal(t, first.Header.Get("Stream-Next-Offset"), retry.Header.Get("Stream-Next-Offset"), "and stored nothing")

	gap := do(http.MethodPost, url1, `{"n":3}`, prod("1", "2")...)
	assert.Equal(t, http.StatusConflict, gap.StatusCode)
	assert.Equal(t, "1", gap.Header.Get("Producer-Expected-Seq"))
	assert.Equal(t, "2", gap.Header.Get("Producer-Received-Seq"))

	// The failover: the producer's replacement appends through node 2.
	require.Eventually(t, func() bool { return bus2.SessionExists("run") }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, http.StatusOK, do(http.MethodPost, url2, `{"n":2}`, prod("2", "0")...).StatusCode)
	for _, url := range []string{url1, url2} {
		zombie := do(http.MethodPost, url, `{"n":2}`, prod("1", "1")...)
		assert.Equal(t, http.StatusForbidden, zombie.StatusCode, url)
		assert.Equal(t, "2", zombie.Header.Get("Producer-Epoch"), url)
	}
	require.Eventually(t, func() bool { return bus1.LastEventID() >= bus2.LastEventID() }, 10*time.Second, 10*time.Millisecond)
	items, _ := durableGet(t, url1+"?offset=-1")
	assert.Len(t, items, 2, "two appends stored, once each")
}
