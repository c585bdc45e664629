package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/config"
)

// TestNATSFlagsRefusedWhereIgnored: a NATS flag that would be ignored, or a
// bad value, is a usage error naming it, before anything starts.
func TestNATSFlagsRefusedWhereIgnored(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-nats-replicas", "3"}, "-nats-replicas \"3\" applies to the bus over NATS only"},
		{[]string{"-nats-storage", "memory"}, "-nats-storage \"memory\" applies to the bus over NATS only"},
		{[]string{"-nats", "nats://127.0.0.1:4222", "-nats-sync", "always"}, "-nats-sync \"always\" applies to -nats embedded only"},
		{[]string{"-nats", "nats://127.0.0.1:4222", "-nats-cluster", "127.0.0.1:6222"}, "-nats-cluster \"127.0.0.1:6222\" applies to -nats embedded only"},
		{[]string{"-nats", "embedded", "-nats-routes", "nats-route://127.0.0.1:6223"}, "needs -nats-cluster"},
		{[]string{"-nats", "embedded", "-nats-replicas", "0"}, "-nats-replicas 0: out of range [1, 5]"},
		{[]string{"-nats", "embedded", "-nats-replicas", "6"}, "-nats-replicas 6: out of range [1, 5]"},
		{[]string{"-nats", "embedded", "-nats-storage", "disk"}, `-nats-storage "disk": want file or memory`},
		{[]string{"-nats", "embedded", "-nats-sync", "sometimes"}, `invalid value "sometimes" for flag -nats-sync`},
		{[]string{"-nats", "embedded", "-nats-sync", "2h"}, "out of range: always or [1ms, 1h]"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out syncBuffer
			_, err := parseFlags(tt.args, &out)
			var ue usageError
			require.ErrorAs(t, err, &ue)
			assert.Contains(t, err.Error()+out.String(), tt.want)
		})
	}
}

// TestNATSFlagsWinOverEnvironment: -nats-replicas, -nats-storage and
// -nats-sync override their AGENTPOOL_EVENTBUS_NATS_* variable; unset
// flags leave the variable's value; a sync policy from the environment
// with an external server is refused (that server decides).
func TestNATSFlagsWinOverEnvironment(t *testing.T) {
	env := config.NATS{Retention: 7, Replicas: 3, Storage: "memory", Sync: config.NATSSync{Interval: time.Second}}
	tests := []struct {
		name string
		args []string
		want config.NATS
		err  string
	}{
		{"environment only", []string{"-nats", "embedded"}, env, ""},
		{"flags win", []string{"-nats", "embedded", "-nats-replicas", "1", "-nats-storage", "file", "-nats-sync", "always"},
			config.NATS{Retention: 7, Replicas: 1, Storage: "file", Sync: config.NATSSync{Always: true}}, ""},
		{"external server, sync from the environment", []string{"-nats", "nats://127.0.0.1:4222"}, env,
			"AGENTPOOL_EVENTBUS_NATS_SYNC=1s applies to -nats embedded only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseFlags(tt.args, io.Discard)
			require.NoError(t, err)
			got, err := f.nats.settle(env)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestRunNATSEmbeddedClusterR3: three agentservers, each with an embedded
// NATS server joined into one cluster by -nats-cluster and -nats-routes,
// run one stream with three replicas on file storage, each server syncing
// every write (-nats-sync always); they start together (each waits for the
// cluster), and an event published on one is read from another.
func TestRunNATSEmbeddedClusterR3(t *testing.T) {
	var clientPorts, routePorts [3]int
	for i := range 3 {
		var err error
		clientPorts[i], err = embedded.FreePort()
		require.NoError(t, err)
		routePorts[i], err = embedded.FreePort()
		require.NoError(t, err)
	}
	type node struct {
		base string
		logs *syncBuffer
		stop func()
	}
	nodes := make([]node, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		var routes []string
		for j := range 3 {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", routePorts[j]))
			}
		}
		args := []string{"-nats", "embedded", "-nats-dir", t.TempDir(),
			"-nats-listen", fmt.Sprintf("127.0.0.1:%d", clientPorts[i]),
			"-nats-cluster", fmt.Sprintf("127.0.0.1:%d", routePorts[i]), "-nats-routes", strings.Join(routes, ","),
			"-nats-replicas", "3", "-nats-sync", "always"}
		wg.Go(func() {
			base, logs, stop := startRunWithin(t, 60*time.Second, args...)
			nodes[i] = node{base, logs, stop}
		})
	}
	wg.Wait()
	for _, n := range nodes {
		if n.stop == nil {
			t.FailNow() // startRunWithin reported why
		}
		defer n.stop()
		assert.Contains(t, n.logs.String(), "sync=always")
	}

	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", clientPorts[0]))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "REPLAYBUS")
	require.NoError(t, err)
	info := st.CachedInfo()
	assert.Equal(t, 3, info.Config.Replicas)
	assert.Equal(t, jetstream.FileStorage, info.Config.Storage)
	require.NotNil(t, info.Cluster)
	assert.Len(t, info.Cluster.Replicas, 2, "a leader and two replicas")

	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Post(nodes[0].base+"/sessions", "application/json", strings.NewReader(`{"id":"r3"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Eventually(t, func() bool {
		resp, err := client.Post(nodes[1].base+"/session/r3/events", "application/json", strings.NewReader(`{"type":"note","data":{"n":1}}`))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusAccepted
	}, 60*time.Second, 50*time.Millisecond, "node 2 learns the session and publishes")
	require.Eventually(t, func() bool {
		resp, err := client.Get(nodes[2].base + "/info")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return regexp.MustCompile(`"lastEventId":\s*"?[1-9]`).Match(b)
	}, 60*time.Second, 50*time.Millisecond, "node 3 ingests the event")
}

// startRunWithin is startRun with a longer bound on the start (a node of a
// cluster waits for the others); it returns a nil stop after reporting
// why the node did not start.
func startRunWithin(t *testing.T, bound time.Duration, args ...string) (string, *syncBuffer, func()) {
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
		t.Errorf("run ended early: %v\n%s", err, logs.String())
	case <-time.After(bound):
		cancel()
		<-done
		t.Errorf("not listening after %v\n%s", bound, logs.String())
	}
	return "", logs, nil
}
