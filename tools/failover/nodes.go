package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// busNode is one example server (examples/agentserver) child process: a
// bus node over the NATS cluster, as a user runs it (-nats with every
// server's URL, -nats-replicas 3).
type busNode struct {
	name string
	addr string // host:port of its HTTP server
	cmd  *exec.Cmd
	done chan struct{}
}

// nodeEnv is the bus configuration of the harness's nodes: replay buffers
// large enough that a subscriber that resumes after a fault finds every
// event it missed there (a smaller one would announce ring_evicted, which
// the checker accepts but which proves less).
var nodeEnv = []string{
	"AGENTPOOL_EVENTBUS_REPLAY_BUFFER_SIZE=50000",
	"AGENTPOOL_EVENTBUS_MAX_QUEUE_SIZE=100000",
	"AGENTPOOL_EVENTBUS_MAX_QUEUED_BYTES=64MiB",
}

// startNode starts the example server bin as node name, connected to the
// NATS servers urls with the stream's replicas and storage, logging to
// dir/name.log, and waits until its /healthz answers 200.
func startNode(ctx context.Context, bin, dir, name, urls string, replicas int, storage string) (*busNode, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	n := &busNode{name: name, addr: fmt.Sprintf("127.0.0.1:%d", port), done: make(chan struct{})}
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	n.cmd = exec.Command(bin, "-addr", n.addr, "-nats", urls,
		"-nats-replicas", fmt.Sprint(replicas), "-nats-storage", storage, "-log-level", "info")
	n.cmd.Env = append(cleanEnv(), nodeEnv...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() { _ = n.cmd.Wait(); logf.Close(); close(n.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := httpc.Get("http://" + n.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return n, nil
			}
		}
		select {
		case <-n.done:
			return nil, fmt.Errorf("%w: %s (see %s.log)", errNodeExited, name, name)
		case <-ctx.Done():
			n.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n.stop()
			return nil, fmt.Errorf("node %s not healthy after 60s (see %s.log)", name, name)
		}
	}
}

// errNodeExited: a node's process exited at start (its port taken, say).
var errNodeExited = errors.New("node exited at start")

// cleanEnv is the harness's environment without AGENTPOOL_EVENTBUS_*
// variables of its own caller.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(strings.ToUpper(kv), "AGENTPOOL_EVENTBUS_") {
			env = append(env, kv)
		}
	}
	return env
}

// alive reports whether the node's process runs.
func (n *busNode) alive() bool {
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// stop ends the node gracefully (SIGTERM), or with SIGKILL after 15 s.
func (n *busNode) stop() {
	if !n.alive() {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(15 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
}

// httpc is the harness's plain HTTP client (sessions, health); Run closes
// its idle connections at the end.
var httpc = &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
