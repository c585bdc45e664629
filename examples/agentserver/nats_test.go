package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/nats/embedded"
)

// TestRunNATS: two agentservers share one bus over NATS: the first with
// -nats embedded, the second connected to it; an event posted to the first
// arrives on an SSE stream of the second.
func TestRunNATS(t *testing.T) {
	base1, logs1, stop1 := startRun(t, "-nats", "embedded", "-nats-dir", t.TempDir(), "-nats-listen", "127.0.0.1:0")
	defer stop1()
	url := regexp.MustCompile(`url=(nats://[0-9.:]+)`).FindStringSubmatch(logs1.String())
	require.Len(t, url, 2, "the embedded server's URL is logged:\n%s", logs1.String())
	base2, _, stop2 := startRun(t, "-nats", url[1])
	defer stop2()

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	resp, err := client.Post(base1+"/sessions", "application/json", strings.NewReader(`{"id":"shared"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	var stream *http.Response
	require.Eventually(t, func() bool {
		r, err := client.Get(base2 + "/session/shared/events")
		if err != nil {
			return false
		}
		if r.StatusCode != http.StatusOK {
			r.Body.Close()
			return false
		}
		stream = r
		return true
	}, 10*time.Second, 20*time.Millisecond, "node 2 learns the session")
	defer stream.Body.Close()

	resp, err = client.Post(base1+"/session/shared/events", "application/json", strings.NewReader(`{"type":"note","data":{"n":1}}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	br := bufio.NewReader(stream.Body)
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if strings.HasPrefix(line, "id: ") {
			break
		}
	}
	tr.CloseIdleConnections()
}

// TestRunNATSBadURL: a -nats value that is neither embedded nor a URL is a
// usage error.
func TestRunNATSBadURL(t *testing.T) {
	err := run(context.Background(), []string{"-nats", "localhost"}, &syncBuffer{}, nil)
	var ue usageError
	require.ErrorAs(t, err, &ue)
	assert.Contains(t, err.Error(), "-nats")
}

// TestRunNATSListenFlag: -nats-listen defaults to 127.0.0.1:4222 (loopback,
// the port docs/distributed.md's second node dials); a bad value is a usage
// error naming it, and so are -nats-listen and -nats-dir without -nats
// embedded (they were silently ignored).
func TestRunNATSListenFlag(t *testing.T) {
	f, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:4222", f.nats.listen)
	for _, args := range [][]string{{"-nats-listen", "127.0.0.1:4223"}, {"-nats", "nats://127.0.0.1:4222", "-nats-listen", "127.0.0.1:4223"},
		{"-nats", "nats://127.0.0.1:4222", "-nats-dir", t.TempDir()}} {
		_, err := parseFlags(args, io.Discard)
		var ue usageError
		require.ErrorAs(t, err, &ue, args)
		assert.Contains(t, err.Error(), "applies to -nats embedded only", args)
	}
	for _, bad := range []string{"4222", ":4222", "127.0.0.1:x", "127.0.0.1:70000"} {
		err := run(context.Background(), []string{"-nats", "embedded", "-nats-listen", bad, "-nats-dir", t.TempDir()}, &syncBuffer{}, nil)
		var ue usageError
		require.ErrorAs(t, err, &ue, bad)
		assert.Contains(t, err.Error(), "-nats-listen", bad)
		assert.Contains(t, err.Error(), bad)
	}
}

// Issue 18.6: a NATS node that heals, as docs/distributed.md runs it. Node
// A hosts the embedded server on a fixed address (-nats-listen), node B
// joins with -nats nats://that-address. While A is down, B's /healthz is
// 503, and a publish, a create, an SSE subscribe and a WebSocket handshake
// on B are 503 unavailable with Retry-After (which the Go clients retry),
// not a 500 after 5 s or an empty 200 stream. When A comes back on the same
// address and data folder, B reconnects by itself: /healthz is 200 again,
// B publishes, and an event published on A reaches a stream on B.
func TestNATSNodeHeals(t *testing.T) {
	port, err := embedded.FreePort()
	require.NoError(t, err)
	natsAddr := fmt.Sprintf("127.0.0.1:%d", port)
	dir := t.TempDir()
	nodeA := []string{"-nats", "embedded", "-nats-dir", dir, "-nats-listen", natsAddr}
	baseA, logsA, stopA := startRun(t, nodeA...)
	assert.Contains(t, logsA.String(), "url=nats://"+natsAddr)
	baseB, _, stopB := startRun(t, "-nats", "nats://"+natsAddr)
	defer stopB()

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	do := func(method, url, body string, hdr ...string) (int, http.Header, map[string]string) {
		t.Helper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, url, r)
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]string
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			_ = json.NewDecoder(resp.Body).Decode(&out)
		}
		return resp.StatusCode, resp.Header, out
	}
	status, _, _ := do("POST", baseA+"/sessions", `{"id":"run"}`)
	require.Equal(t, http.StatusCreated, status)
	status, _, body := do("GET", baseB+"/healthz", "")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok", body["status"])
	require.Eventually(t, func() bool {
		status, _, _ := do("POST", baseB+"/session/run/events", `{"type":"note"}`)
		return status == http.StatusAccepted
	}, 20*time.Second, 20*time.Millisecond, "node B learns the session")

	// Node A (and with it the NATS server) goes away.
	stopA()
	require.Eventually(t, func() bool {
		status, _, _ := do("GET", baseB+"/healthz", "")
		return status == http.StatusServiceUnavailable
	}, 20*time.Second, 10*time.Millisecond, "B's /healthz reports the backend down")
	status, hdr, body := do("GET", baseB+"/healthz", "")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, "unavailable", body["status"])
	assert.Contains(t, body["message"], "NATS")
	assert.Equal(t, "1", hdr.Get("Retry-After"))
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      []string
	}{
		{"publish", "POST", "/session/run/events", `{"type":"note"}`, nil},
		{"create", "POST", "/sessions", `{"id":"other"}`, nil},
		{"close", "DELETE", "/session/run", "", nil},
		{"SSE subscribe", "GET", "/session/run/events", "", nil},
		{"WebSocket handshake", "GET", "/session/run/ws", "", []string{"Connection", "Upgrade", "Upgrade", "websocket",
			"Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}},
	} {
		status, hdr, body := do(tc.method, baseB+tc.path, tc.body, tc.hdr...)
		assert.Equal(t, http.StatusServiceUnavailable, status, tc.name)
		assert.Equal(t, "unavailable", body["code"], tc.name)
		assert.Equal(t, "1", hdr.Get("Retry-After"), tc.name)
	}

	// A comes back on the same address and data folder.
	baseA, _, stopA = startRun(t, nodeA...)
	defer stopA()
	require.Eventually(t, func() bool {
		status, _, _ := do("GET", baseB+"/healthz", "")
		return status == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "B reconnects by itself")
	require.Eventually(t, func() bool {
		status, _, _ := do("POST", baseB+"/session/run/events", `{"type":"note"}`)
		return status == http.StatusAccepted
	}, 30*time.Second, 20*time.Millisecond, "B publishes again")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", baseB+"/session/run/events?replay=0", nil)
	require.NoError(t, err)
	stream, err := client.Do(req)
	require.NoError(t, err)
	defer stream.Body.Close()
	require.Equal(t, http.StatusOK, stream.StatusCode)
	status, _, _ = do("POST", baseA+"/session/run/events", `{"type":"from-a"}`)
	require.Equal(t, http.StatusAccepted, status)
	br := bufio.NewReader(stream.Body)
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err, "B's stream ended before A's event arrived")
		if strings.HasPrefix(line, "event: from-a") {
			break
		}
	}
	cancel()
	tr.CloseIdleConnections()
}
