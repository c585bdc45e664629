package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/examples/agentserver/server"
)

// TestDurableHeadOnABusySession is issue 27's reproduction, over HTTP on
// the example server: PUT /v1/stream/busy, then events through another
// route, POST /session/busy/events — more than the replay buffer holds (150
// by default; DURABLE_BUSY_EVENTS=100000 for the closing note's figure) —
// then HEAD /v1/stream/busy and GET ?offset=now answer 200 with the tail,
// the offset of the last event posted (they answered 410), and ?offset=-1
// reads what the stream holds. It logs how long HEAD took.
func TestDurableHeadOnABusySession(t *testing.T) {
	n := 150
	if s := os.Getenv("DURABLE_BUSY_EVENTS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err, "DURABLE_BUSY_EVENTS=%q", s)
	}
	bus, err := eventbus.New(eventbus.Options{}) // a replay buffer of 100
	require.NoError(t, err)
	defer bus.Close()
	srv, err := server.New(bus, server.Options{})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	stream := ts.URL + durable.Pattern + "busy"

	req, err := http.NewRequest(http.MethodPut, stream, nil)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	// Post from 8 connections at once; the tail is the highest id answered.
	var mu sync.Mutex
	var last uint64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				body := fmt.Sprintf(`{"type":"tick","data":{"n":%d}}`, i)
				resp, err := http.Post(ts.URL+"/session/busy/events", "application/json", bytes.NewReader([]byte(body)))
				if !assert.NoError(t, err) {
					return
				}
				var ans struct{ ID uint64 }
				err = json.NewDecoder(resp.Body).Decode(&ans)
				_ = resp.Body.Close()
				if !assert.Equal(t, http.StatusAccepted, resp.StatusCode) || !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				last = max(last, ans.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	posted := time.Since(start)
	tail := durable.FormatOffset(eventbus.Position{ID: last, Epoch: bus.Epoch()})

	start = time.Now()
	req, err = http.NewRequest(http.MethodHead, stream, nil)
	require.NoError(t, err)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	took := time.Since(start)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "HEAD")
	assert.Equal(t, tail, resp.Header.Get(durable.HeaderNextOffset), "HEAD")
	t.Logf("HEAD after %d events posted through POST /session/busy/events (in %v): %d, Stream-Next-Offset %s, in %v",
		n, posted.Round(time.Millisecond), resp.StatusCode, resp.Header.Get(durable.HeaderNextOffset), took)

	items, next := durableGet(t, stream+"?offset=now")
	assert.Empty(t, items, "now")
	assert.Equal(t, tail, next, "now")
	items, next = durableGet(t, stream+"?offset=-1")
	assert.Len(t, items, min(n, 100), "-1: what the replay buffer holds")
	assert.Equal(t, tail, next, "-1")
}
