package main

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/examples/agentserver/server"
)

// Issue 12.13: -h showed -addr's default twice, an unknown flag's error was
// printed twice (by the flag package and again by main), and the start-up
// log did not say which URL to open.
func TestFlagsOutputOnce(t *testing.T) {
	t.Setenv("PORT", "")
	var help syncBuffer
	require.NoError(t, run(context.Background(), []string{"-h"}, &help, nil))
	assert.Equal(t, 1, strings.Count(help.String(), ":8080"), "-addr's default once:\n%s", help.String())

	var out syncBuffer
	err := run(context.Background(), []string{"-nope"}, &out, nil)
	assert.Equal(t, 2, report(err, &out))
	assert.Equal(t, 1, strings.Count(out.String(), "flag provided but not defined: -nope"), out.String())

	var extra syncBuffer
	err = run(context.Background(), []string{"stray"}, &extra, nil)
	assert.Equal(t, 2, report(err, &extra))
	assert.Equal(t, 1, strings.Count(extra.String(), "unexpected arguments"), "errors the flag package did not print are printed once")
}

func TestStartupLogPrintsURL(t *testing.T) {
	base, logs, stop := startRun(t)
	stop()
	assert.Contains(t, logs.String(), "url="+base+"/")

	for in, want := range map[string]string{
		":8080": "http://localhost:8080/", "0.0.0.0:80": "http://localhost:80/", "[::]:9": "http://localhost:9/",
		"127.0.0.1:5": "http://127.0.0.1:5/", "[::1]:7": "http://[::1]:7/",
	} {
		addr, err := net.ResolveTCPAddr("tcp", in)
		require.NoError(t, err)
		assert.Equal(t, want, pageURL(addr), in)
	}
}

// An attacker on the same network: the default -addr was ":8080", so
// `go run ./examples/agentserver -demo` on a laptop let any host on the LAN
// publish to, create and close sessions (the server has no
// authentication). The default is now loopback only; -addr :8080 and PORT
// (container platforms) still listen on every interface.
func TestDefaultAddrIsLoopback(t *testing.T) {
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

// -demo-rate NaN or +Inf made every demo delay zero (each run was
// published at once), and a zero or negative rate silently meant the
// default. Each is now a usage error naming the value, before anything
// listens.
func TestDemoRateRefusesNonPositiveAndNonFinite(t *testing.T) {
	t.Setenv("PORT", "")
	for _, v := range []string{"NaN", "+Inf", "-Inf", "0", "-5", "100001"} {
		var out syncBuffer
		err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-demo", "-demo-rate", v}, &out, nil)
		if assert.Error(t, err, v) {
			assert.Equal(t, 2, report(err, &out), v)
			assert.Contains(t, out.String(), "invalid -demo-rate", v)
			assert.Contains(t, out.String(), "-demo-rate "+v+" ", "the message names the value")
		}
	}
}

// Issue 27.5: -h did not list the WebSocket and Durable Streams routes.
// It lists every route of server.Routes (TestRoutesListEveryMountedRoute
// checks that those are all the server mounts).
func TestHelpListsEveryRoute(t *testing.T) {
	var help syncBuffer
	require.NoError(t, run(context.Background(), []string{"-h"}, &help, nil))
	for _, r := range server.Routes() {
		assert.Contains(t, help.String(), r.Request, "-h lists %s", r.Pattern)
	}
	for _, want := range []string{"GET /session/{id}/ws", "/v1/stream/{name}", "WebSocket", "Durable Streams"} {
		assert.Contains(t, help.String(), want)
	}
}
