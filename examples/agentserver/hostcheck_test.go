package main

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An attacker by DNS rebinding: a page on evil.example re-points its
// name at 127.0.0.1 and, being same-origin with http://evil.example:8080,
// reads the streams, publishes and closes sessions of a developer's
// loopback server (the WebSocket origin check compares Origin with Host,
// which match). A loopback-only server now refuses a Host that is not a
// loopback name with 421; localhost and loopback IPs work as before.
func TestLoopbackServerRefusesForeignHost(t *testing.T) {
	t.Setenv("PORT", "")
	base, _, stop := startRun(t)
	defer stop()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)

	get := func(host, path string) (int, map[string]string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example:" + port, "10.0.0.1:" + port, "127.0.0.1.nip.io:" + port} {
		status, body := get(host, "/sessions")
		assert.Equal(t, http.StatusMisdirectedRequest, status, host)
		assert.Equal(t, "misdirected_request", body["code"], host)
		assert.Contains(t, body["message"], host, "the message names the Host")
	}
	for _, host := range []string{"localhost:" + port, "LOCALHOST:" + port, "localhost.:" + port, "127.0.0.1:" + port, "127.0.0.2:" + port, "[::1]:" + port, "localhost"} {
		status, _ := get(host, "/healthz")
		assert.Equal(t, http.StatusOK, status, host)
	}
}

func TestIsLoopbackHost(t *testing.T) {
	for h, want := range map[string]bool{
		"localhost": true, "localhost:1": true, "[::1]:80": true, "::1": true, "127.9.9.9": true,
		"": false, "evil.example": false, "0.0.0.0:80": false, "[::]:80": false, "192.168.1.2": false,
	} {
		assert.Equal(t, want, isLoopbackHost(h), "%q", h)
	}
}
