package ws_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
)

// TestIdleSocketSurvivesWriteTimeout: the write deadline bounds writes
// only; a socket idle for many write timeouts stays open and gets the next
// event. The write timeout is not tiny: it bounds the two real writes too,
// and a 50 ms bound could expire on a loaded machine under -race while the
// writer waits for a CPU, which is not what this test is about.
func TestIdleSocketSurvivesWriteTimeout(t *testing.T) {
	const wt = 300 * time.Millisecond
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{ResumeWait: -1, WriteTimeout: wt, PingInterval: -1})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	c := dial(t, s.url("s1", ""))
	publish(t, s.bus, "s1", 1)
	assert.EqualValues(t, 1, read(t, c).ID)
	time.Sleep(4 * wt) // 4 write timeouts of silence
	publish(t, s.bus, "s1", 1)
	assert.EqualValues(t, 2, read(t, c).ID)
	assert.Zero(t, s.h.Stats().WriteErrors)
}

// TestPingKeepAlive: a peer that reads answers the server's pings and
// stays; one that never reads cannot answer and is cut after the write
// timeout.
func TestPingKeepAlive(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{ResumeWait: -1, WriteTimeout: 200 * time.Millisecond, PingInterval: 50 * time.Millisecond})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	reader := dial(t, s.url("s1", ""))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	readErr := make(chan error, 1)
	go func() {
		_, _, err := reader.Read(ctx) // answers pings while it waits
		readErr <- err
	}()
	deaf := dial(t, s.url("s1", "")) // never reads: its pings go unanswered
	_ = deaf
	require.Eventually(t, func() bool { return s.h.Stats().Active == 1 }, waitFor, 5*time.Millisecond,
		"the deaf socket is cut")
	assert.EqualValues(t, 1, s.h.Stats().WriteErrors)
	time.Sleep(300 * time.Millisecond) // six more pings
	assert.Equal(t, 1, s.h.Stats().Active, "the reading socket stays")
	publish(t, s.bus, "s1", 1)
	select {
	case err := <-readErr:
		require.NoError(t, err, "the reader gets the event")
	case <-time.After(waitFor):
		t.Fatal("no event")
	}
}
