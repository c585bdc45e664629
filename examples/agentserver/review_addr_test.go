package main

import (
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Review (attacker on the same network): the default -addr was ":8080", so
// `go run ./examples/agentserver -demo` on a laptop let any host on the LAN
// publish to, create and close sessions (the server has no
// authentication). The default is now loopback only; -addr :8080 and PORT
// (container platforms) still listen on every interface.
func TestReviewDefaultAddrIsLoopback(t *testing.T) {
	t.Setenv("PORT", "")
	f, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(f.addr)
	require.NoError(t, err)
	assert.True(t, net.ParseIP(host).IsLoopback(), "default host %q", host)
	assert.Equal(t, "8080", port)

	f, err = parseFlags([]string{"-addr", ":8080"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, ":8080", f.addr, "every interface on request")
	t.Setenv("PORT", "9999")
	f, err = parseFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, ":9999", f.addr, "PORT keeps every interface")
}
