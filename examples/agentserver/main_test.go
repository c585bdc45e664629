package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childEnv); ok {
		// This test binary runs as the agentserver itself (a real child
		// process that a test can kill -9): see startChild.
		os.Args = append(os.Args[:1], strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// syncBuffer is a bytes.Buffer safe for the logger and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunDemoAndGracefulShutdown runs the program with -demo on a loopback
// port, reads the demo through the API and an SSE stream, then cancels (as
// SIGINT does): run must return nil promptly and the open stream must end
// with a clean end of body.
func TestRunDemoAndGracefulShutdown(t *testing.T) {
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-demo", "-demo-rate", "400"}, &logs,
			func(a net.Addr) { addrc <- a.String() })
	}()
	var base string
	select {
	case a := <-addrc:
		base = "http://" + a
	case err := <-done:
		t.Fatalf("run ended early: %v\n%s", err, logs.String())
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	resp, err := client.Get(base + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	// The demo's parent and, soon, its two children.
	require.Eventually(t, func() bool {
		resp, err := client.Get(base + "/sessions")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var list []struct{ ID, Parent string }
		if json.NewDecoder(resp.Body).Decode(&list) != nil {
			return false
		}
		children := 0
		for _, s := range list {
			if s.Parent == "demo" {
				children++
			}
		}
		return children == 2
	}, 10*time.Second, 20*time.Millisecond, "the demo creates two child sessions")

	stream, err := client.Get(base + "/session/demo/events?scope=descendants")
	require.NoError(t, err)
	defer stream.Body.Close()
	require.Equal(t, http.StatusOK, stream.StatusCode)
	br := bufio.NewReader(stream.Body)
	ids := 0
	for ids < 10 {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if strings.HasPrefix(line, "id: ") {
			ids++
			assert.Regexp(t, `^id: [0-9a-f]{16}-[0-9]+\n$`, line, "epoch-qualified ids by default")
		}
	}

	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, br)
		ended <- err
	}()
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatalf("run did not return after cancel\n%s", logs.String())
	}
	select {
	case err := <-ended:
		assert.NoError(t, err, "the SSE stream ends with a clean end of body")
	case <-time.After(5 * time.Second):
		t.Fatal("the SSE stream did not end")
	}
	assert.Less(t, time.Since(start), 5*time.Second, "shutdown is prompt")
	assert.Contains(t, logs.String(), "shutting down")
	assert.Contains(t, logs.String(), "stopped")
}

// TestRunConfigErrors: bad AGENTPOOL_EVENTBUS_* variables stop the program
// before it listens, with every problem listed.
func TestRunConfigErrors(t *testing.T) {
	t.Setenv("AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE", "0")
	t.Setenv("AGENTPOOL_EVENTBUS_OVERFLOW_POLICY", "block")
	var logs syncBuffer
	err := run(context.Background(), []string{"-addr", "127.0.0.1:0"}, &logs, func(net.Addr) {
		t.Error("must not listen with a bad configuration")
	})
	require.Error(t, err)
	var ue usageError
	require.True(t, errors.As(err, &ue), "a configuration error exits with status 2")
	msg := err.Error()
	assert.Contains(t, msg, "invalid configuration")
	assert.Contains(t, msg, "AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE")
	assert.Contains(t, msg, "AGENTPOOL_EVENTBUS_OVERFLOW_POLICY")
	assert.Equal(t, 2, strings.Count(msg, "\n  - "), "one line per problem:\n%s", msg)
}

func TestParseFlags(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		t.Setenv("PORT", "")
		f, err := parseFlags(nil, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, "127.0.0.1:8080", f.addr)
		assert.False(t, f.demo)
		assert.True(t, f.epochIDs)
	})
	t.Run("PORT", func(t *testing.T) {
		t.Setenv("PORT", "9999")
		f, err := parseFlags(nil, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, ":9999", f.addr)
		f, err = parseFlags([]string{"-addr", "127.0.0.1:7000"}, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, "127.0.0.1:7000", f.addr, "-addr wins over PORT")
	})
	t.Run("bad", func(t *testing.T) {
		for _, args := range [][]string{{"-nope"}, {"extra"}, {"-log-level", "loud"}} {
			_, err := parseFlags(args, io.Discard)
			var ue usageError
			assert.True(t, errors.As(err, &ue), "%v: %v", args, err)
		}
	})
}

// startRun runs the program with args on a loopback port and returns its
// base URL once it listens (10 s at most), its logs and a stop function that
// cancels it and waits (15 s at most) for it to return nil.
func startRun(t *testing.T, args ...string) (string, *syncBuffer, func()) {
	t.Helper()
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), logs, func(a net.Addr) { addrc <- a.String() })
	}()
	select {
	case a := <-addrc:
		return "http://" + a, logs, func() {
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err)
			case <-time.After(15 * time.Second):
				t.Errorf("run did not return\n%s", logs.String())
			}
		}
	case err := <-done:
		cancel()
		t.Fatalf("run ended early: %v\n%s", err, logs.String())
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatalf("not listening\n%s", logs.String())
	}
	return "", nil, nil
}
