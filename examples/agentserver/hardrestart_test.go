package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/adapters/ws"
)

// childEnv, set in a child's environment, makes this test binary run as
// the agentserver with the flags it holds (see TestMain).
const childEnv = "AGENTSERVER_TEST_CHILD_ARGS"

// startChild runs the agentserver as a child process listening on addr
// and returns it once /healthz answers (20 s at most); the test kills it
// at its end if it still runs.
func startChild(t *testing.T, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=-addr "+addr, "PORT=")
	var logs syncBuffer
	cmd.Stderr = &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agentserver child does not answer on %s: %v\n%s", addr, err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// Issue 27.9: a Go client across a hard restart (SIGKILL, same port) of
// the example server, where nothing re-creates the session, must stop
// with the documented 404 once its RestartGrace is over — over SSE and
// WebSocket, against the server as a real process. (Before, the wait
// after a 404 ran a whole backoff step past the grace: the stream went
// quiet for up to MaxBackoff more; TestRestartedServer404StopsWithinGrace
// in adapters/resume pins the timing on a fake clock.)
func TestGoClientsStopWith404AfterHardRestart(t *testing.T) {
	const grace = 2 * time.Second
	for _, tc := range []struct {
		name      string
		subscribe func(ctx context.Context, addr string) *resume.Stream
	}{
		{"sse", func(ctx context.Context, addr string) *resume.Stream {
			c := &sse.Client{Retry: 200 * time.Millisecond, RestartGrace: grace}
			return c.Subscribe(ctx, "http://"+addr+"/session/s1/events", sse.StreamOptions{})
		}},
		{"ws", func(ctx context.Context, addr string) *resume.Stream {
			c := &ws.Client{Retry: 200 * time.Millisecond, RestartGrace: grace}
			return c.Subscribe(ctx, "ws://"+addr+"/session/s1/ws", ws.StreamOptions{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := freeAddr(t)
			child := startChild(t, addr)
			for _, body := range []struct{ path, json string }{
				{"/sessions", `{"id":"s1"}`},
				{"/session/s1/events", `{"type":"note","data":{"n":1}}`},
			} {
				resp, err := http.Post("http://"+addr+body.path, "application/json", strings.NewReader(body.json))
				require.NoError(t, err)
				resp.Body.Close()
				require.Less(t, resp.StatusCode, 300, body.path)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			st := tc.subscribe(ctx, addr)
			defer st.Close()
			ev, err := st.Next()
			require.NoError(t, err)
			require.Equal(t, "note", ev.Type)
			oldEpoch := st.Epoch()

			require.NoError(t, child.Process.Signal(syscall.SIGKILL))
			_ = child.Wait()
			startChild(t, addr) // same port, new epoch, no session s1

			var stopErr error
			for stopErr == nil {
				ev, stopErr = st.Next()
				if stopErr == nil {
					require.Zero(t, ev.ID, "no event of s1 exists after the restart: %+v", ev)
				}
			}
			var se *resume.StatusError
			require.True(t, errors.As(stopErr, &se), "stopped with %v", stopErr)
			assert.Equal(t, http.StatusNotFound, se.Status)
			assert.Equal(t, resume.CodeSessionNotFound, se.Code)
			assert.NotEqual(t, oldEpoch, se.Epoch, "the 404 came from the restarted server")
			assert.NoError(t, ctx.Err(), fmt.Sprintf("stopped by the 404, not the test's deadline (grace %v)", grace))
		})
	}
}
