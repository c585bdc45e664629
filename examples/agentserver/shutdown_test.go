package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 18.14: the page showed close code 1006 after a server restart
// although the server closes every WebSocket with 1001: the WebSocket
// handler's close ran in a RegisterOnShutdown goroutine that http.Server's
// Shutdown does not wait for (the sockets are hijacked), so the process
// could exit before the close frames went out (a client of the binary saw
// no close frame in 1 of 10 SIGTERMs). run now waits for the handler's
// Shutdown: the client gets 1001 from run's shutdown, and run returns only
// once the close handshake is over.
func TestShutdownClosesWebSocketsWith1001BeforeReturning(t *testing.T) {
	t.Setenv("PORT", "")
	base, _, stop := startRun(t)
	resp, err := http.Post(base+"/sessions", "application/json", strings.NewReader(`{"id":"s"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/session/s/ws", nil)
	require.NoError(t, err)
	defer c.CloseNow()
	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(`{"resume":{}}`)))

	closed := make(chan websocket.StatusCode, 1)
	go func() {
		for {
			if _, _, err := c.Read(ctx); err != nil {
				closed <- websocket.CloseStatus(err)
				return
			}
		}
	}()
	stop() // cancels run and waits for it to return
	select {
	case code := <-closed:
		assert.Equal(t, websocket.StatusGoingAway, code)
	case <-time.After(5 * time.Second):
		t.Fatal("no close frame after run returned")
	}
}
