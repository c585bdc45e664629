package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/examples/agentserver/server"
)

// Issue 18.5, the 421 path: a POST with a Host the DNS-rebinding guard
// refuses, whose body never arrives, held its connection with no answer for
// as long as the client liked (net/http waited to discard the body before
// writing the 421). Now it is answered 421 at once and closed within the
// body timeout; a loopback Host on the same server gets the server's own
// 408 within it.
func TestForeignHostWithoutBodyIsAnsweredAndClosed(t *testing.T) {
	t.Parallel()
	const bodyTimeout = 2 * time.Second
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bus.Close() })
	require.NoError(t, bus.CreateSession("s1", ""))
	srv, err := server.New(bus, server.Options{BodyTimeout: bodyTimeout})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	ts := httptest.NewServer(loopbackHosts(srv, bodyTimeout))
	t.Cleanup(ts.Close)
	addr := ts.Listener.Addr().String()
	require.True(t, listensOnLoopbackOnly(ts.Listener.Addr()))

	const closeSlack = 500*time.Millisecond + time.Second
	for _, tc := range []struct {
		name, host, headers, status string
		refused                     bool
	}{
		{"foreign Host, JSON", "evil.example", "Content-Type: application/json\r\nContent-Length: 100\r\n", "421", true},
		{"foreign Host, no Content-Type", "evil.example:8080", "Content-Length: 100\r\n", "421", true},
		{"foreign Host, chunked", "evil.example", "Transfer-Encoding: chunked\r\n", "421", true},
		{"loopback Host, JSON", "localhost", "Content-Type: application/json\r\nContent-Length: 100\r\n", "408", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer c.Close()
			start := time.Now()
			_, err = io.WriteString(c, "POST /session/s1/events HTTP/1.1\r\nHost: "+tc.host+"\r\n"+tc.headers+"\r\n")
			require.NoError(t, err)
			require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			require.NoError(t, err, "no answer while the body is missing")
			answered := time.Since(start)
			assert.Contains(t, resp.Status, tc.status)
			assert.True(t, resp.Close, "the answer says the connection closes")
			_, err = io.Copy(io.Discard, br)
			if !errors.Is(err, syscall.ECONNRESET) {
				require.NoError(t, err, "the connection was not closed")
			}
			closed := time.Since(start)
			if tc.refused {
				assert.Less(t, answered, bodyTimeout, "a refusal does not wait for the body")
			}
			assert.Less(t, answered, bodyTimeout+closeSlack, "answered within the body timeout")
			assert.Less(t, closed, bodyTimeout+closeSlack, "closed within the body timeout")
		})
	}
}
