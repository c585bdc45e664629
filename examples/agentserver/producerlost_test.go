package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// startNATSChild runs the agentserver as a child process on addr with
// extra flags (startChild's), and returns it once /healthz answers.
func startNATSChild(t *testing.T, addr string, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=-addr "+addr+" "+strings.Join(extra, " "), "PORT=")
	var logs syncBuffer
	cmd.Stderr = &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agentserver child does not answer on %s: %v\n%s", addr, err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// frames reads st on a goroutine of its own until it stops.
func frames(st *sse.Stream) <-chan eventbus.Event {
	ch := make(chan eventbus.Event, 1024)
	go func() {
		defer close(ch)
		for {
			ev, err := st.Next()
			if err != nil {
				return
			}
			ch <- ev
		}
	}()
	return ch
}

// until reads ch until match holds, within d; it returns the frame and
// the frames read before it.
func until(t *testing.T, ch <-chan eventbus.Event, d time.Duration, what string, match func(eventbus.Event) bool) (eventbus.Event, []eventbus.Event) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	var before []eventbus.Event
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before %s", what)
			}
			if match(ev) {
				return ev, before
			}
			before = append(before, ev)
		case <-timer.C:
			t.Fatalf("no %s within %v", what, d)
		}
	}
}

func presenceOf(t *testing.T, ev eventbus.Event) frame.PresenceData {
	var d frame.PresenceData
	require.NoError(t, json.Unmarshal(ev.Data, &d))
	return d
}

// Issue 29.3 over real processes: two example servers over one NATS
// server; the one running a turn of its model is killed (SIGKILL, no
// goodbye). The other's SSE stream shows turn_end{producer_lost} within
// 2 × the lease, exactly once; presence agrees on both nodes within 1 s
// while both live; a client moving between the nodes within the grace
// is no leave and join; the dead node's client leaves.
func TestSIGKILLedNodeTurnEndsProducerLost(t *testing.T) {
	const lease = 2 * time.Second
	t.Setenv("AGENTPOOL_EVENTBUS_TURN_LEASE", lease.String())
	t.Setenv("AGENTPOOL_EVENTBUS_PRESENCE_GRACE", "5s")
	ns, err := embedded.RunServer(embedded.ServerConfig{})
	require.NoError(t, err)
	defer ns.Shutdown()
	flags := []string{"-nats", ns.ClientURL(), "-nats-storage", "memory", "-demo-rate", "20"}
	addrA, addrB := freeAddr(t), freeAddr(t)
	childA := startNATSChild(t, addrA, flags...)
	startNATSChild(t, addrB, flags...)
	baseA, baseB := "http://"+addrA, "http://"+addrB
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(url, body string) (int, string) {
		t.Helper()
		resp, err := client.Post(url, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	presence := func(base string) frame.PresenceData {
		t.Helper()
		resp, err := client.Get(base + "/session/k/presence")
		require.NoError(t, err)
		defer resp.Body.Close()
		var d frame.PresenceData
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&d))
		return d
	}
	code, body := post(baseA+"/sessions", `{"id":"k"}`)
	require.Equal(t, http.StatusCreated, code, body)
	require.Eventually(t, func() bool {
		resp, err := client.Get(baseB + "/session/k/presence")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond, "node B learns the session")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(base, client string, presence bool) (*sse.Stream, <-chan eventbus.Event) {
		st := (&sse.Client{Retry: 100 * time.Millisecond}).Subscribe(ctx, base+"/session/k/events", sse.StreamOptions{Client: client, Presence: presence})
		t.Cleanup(func() { _ = st.Close() })
		return st, frames(st)
	}
	_, onB := open(baseB, "watcher", true)
	isPresence := func(ev eventbus.Event) bool { return ev.Type == frame.TypePresence }
	until(t, onB, 5*time.Second, "the presence snapshot", isPresence)

	// A client on A: both nodes agree within 1 s.
	joined := time.Now()
	open(baseA, "on-a", false)
	ev, _ := until(t, onB, 5*time.Second, "on-a's join on B", func(ev eventbus.Event) bool {
		return isPresence(ev) && presenceOf(t, ev).Clients == 2
	})
	assert.Less(t, time.Since(joined), time.Second, "presence converges within 1 s")
	assert.Equal(t, []string{"on-a"}, presenceOf(t, ev).Joined)
	pa, pb := presence(baseA), presence(baseB)
	assert.Equal(t, 2, pa.Clients)
	assert.Equal(t, pa.Clients, pb.Clients)

	// A client moves from A to B within the grace: no leave, no join.
	mover, _ := open(baseA, "mover", false)
	until(t, onB, 5*time.Second, "mover's join", func(ev eventbus.Event) bool {
		return isPresence(ev) && presenceOf(t, ev).Clients == 3
	})
	require.NoError(t, mover.Close())
	open(baseB, "mover", false)

	// A turn of A's model, slow: it runs until the kill.
	code, body = post(baseA+"/session/k/messages", `{"text":"stream 100000"}`)
	require.Equal(t, http.StatusAccepted, code, body)
	var started struct{ Turn string }
	require.NoError(t, json.Unmarshal([]byte(body), &started))
	_, seen := until(t, onB, 10*time.Second, "the turn's first delta on B", func(ev eventbus.Event) bool {
		return ev.Type == "agent_message_chunk"
	})
	for _, ev := range seen {
		if isPresence(ev) {
			d := presenceOf(t, ev)
			assert.Empty(t, d.Left, "a reconnect within the grace shows no leave")
			assert.Empty(t, d.Joined, "a reconnect within the grace shows no join")
		}
	}

	killed := time.Now()
	require.NoError(t, childA.Process.Signal(syscall.SIGKILL))
	end, between := until(t, onB, 4*lease, "turn_end on B", func(ev eventbus.Event) bool { return ev.Type == frame.TypeTurnEnd })
	took := time.Since(killed)
	t.Logf("turn_end on B %v after SIGKILL (lease %v)", took, lease)
	assert.Less(t, took, 2*lease, "producer_lost within 2 × the lease")
	var d frame.TurnData
	require.NoError(t, json.Unmarshal(end.Data, &d))
	assert.Equal(t, frame.TurnData{Turn: started.Turn, Reason: frame.ReasonProducerLost, Message: "lease expired"}, d)
	left := map[string]bool{}
	for _, ev := range between {
		if isPresence(ev) {
			for _, c := range presenceOf(t, ev).Left {
				left[c] = true
			}
		}
	}

	// Exactly once: nothing of the turn after it, no second end; the
	// dead node's client has left, the mover has not.
	deadline := time.After(lease)
	for done := false; !done; {
		select {
		case ev := <-onB:
			assert.NotEqual(t, frame.TypeTurnEnd, ev.Type, "a second turn_end: %s", ev.Data)
			if isPresence(ev) {
				for _, c := range presenceOf(t, ev).Left {
					left[c] = true
				}
			}
		case <-deadline:
			done = true
		}
	}
	assert.Equal(t, map[string]bool{"on-a": true}, left, "the dead node's client leaves, the mover stays")
	resp, err := client.Get(baseB + "/session/k/turn")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode, "no stuck turn")
	assert.Equal(t, 2, presence(baseB).Clients, fmt.Sprint("watcher and mover: ", presence(baseB)))
}

// Issue 29.2 over real processes: POST /session/{id}/cancel on node B
// stops the model's turn that node A runs (the turn_cancel crosses in the
// log; A cancels its producer and writes turn_end{cancelled}); both
// nodes' streams show one turn_end{cancelled}, and B's cancel answer
// names the turn.
func TestCancelOnAnotherExampleServer(t *testing.T) {
	ns, err := embedded.RunServer(embedded.ServerConfig{})
	require.NoError(t, err)
	defer ns.Shutdown()
	flags := []string{"-nats", ns.ClientURL(), "-nats-storage", "memory", "-demo-rate", "20"}
	addrA, addrB := freeAddr(t), freeAddr(t)
	startNATSChild(t, addrA, flags...)
	startNATSChild(t, addrB, flags...)
	baseA, baseB := "http://"+addrA, "http://"+addrB
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(url, body string) (int, string) {
		t.Helper()
		resp, err := client.Post(url, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post(baseA+"/sessions", `{"id":"x"}`)
	require.Equal(t, http.StatusCreated, code, body)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var streams []<-chan eventbus.Event
	for _, base := range []string{baseA, baseB} {
		var st *sse.Stream
		require.Eventually(t, func() bool {
			resp, err := client.Get(base + "/session/x/presence")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}, 10*time.Second, 20*time.Millisecond, "the node learns the session")
		st = (&sse.Client{Retry: 100 * time.Millisecond}).Subscribe(ctx, base+"/session/x/events", sse.StreamOptions{})
		t.Cleanup(func() { _ = st.Close() })
		streams = append(streams, frames(st))
	}
	code, body = post(baseA+"/session/x/messages", `{"text":"stream 100000"}`)
	require.Equal(t, http.StatusAccepted, code, body)
	var started struct{ Turn string }
	require.NoError(t, json.Unmarshal([]byte(body), &started))
	until(t, streams[1], 10*time.Second, "the turn's first delta on B", func(ev eventbus.Event) bool {
		return ev.Type == "agent_message_chunk"
	})

	code, body = post(baseB+"/session/x/cancel", `{}`)
	require.Equal(t, http.StatusAccepted, code, body)
	assert.JSONEq(t, fmt.Sprintf(`{"cancelled":[%q],"held":[]}`, started.Turn), body)
	for i, ch := range streams {
		end, _ := until(t, ch, 10*time.Second, "turn_end", func(ev eventbus.Event) bool { return ev.Type == frame.TypeTurnEnd })
		var d frame.TurnData
		require.NoError(t, json.Unmarshal(end.Data, &d))
		assert.Equal(t, frame.TurnData{Turn: started.Turn, Reason: frame.ReasonCancelled}, d, "node %d", i)
	}
	// No second end. (A delta the producer published while the end was
	// in flight may follow it over a backend: Turn.Publish says so.)
	time.Sleep(500 * time.Millisecond)
	for i, ch := range streams {
		for len(ch) > 0 {
			ev := <-ch
			assert.NotEqual(t, frame.TypeTurnEnd, ev.Type, "node %d: a second turn_end", i)
		}
	}
}
