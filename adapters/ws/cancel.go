package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/coder/websocket"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
)

// ErrNotConnected is what [resume.Stream.Cancel] returns over WebSocket
// while the stream has no open connection (before its first Next, or
// between a drop and the reconnect): the cancel message has no socket to
// go on. Try again once Next has reconnected, or post to the cancel route.
var ErrNotConnected = errors.New("ws: stream not connected")

// cancelAnswer is a cancel_result as the waiting Cancel takes it.
type cancelAnswer struct {
	res eventbus.CancelResult
	err error
}

// Cancel sends the cancel message {"type":"cancel", …} on the stream's
// open connection and waits for its cancel_result frame, which the
// stream's reader (Next) reads and hands over: the answer comes once Next
// reads it, so call Cancel from another goroutine than the one calling
// Next. ErrNotConnected without a connection; an error when the
// connection ends before the answer (the cancel may have been applied:
// ask GET /session/{id}/turn); ctx's error when it ends first. It is the
// WebSocket transport's [resume.Canceller].
func (t *transport) Cancel(ctx context.Context, c resume.CancelRequest) (eventbus.CancelResult, error) {
	t.mu.Lock()
	cc := t.cur
	t.mu.Unlock()
	if cc == nil {
		return eventbus.CancelResult{}, ErrNotConnected
	}
	msg, _ := json.Marshal(struct {
		Type string `json:"type"`
		resume.CancelRequest
	}{"cancel", c})
	ch := make(chan cancelAnswer, 1)
	// The waiter is queued and the message written under one lock, so that
	// the waiters' order is the messages' (the server answers in order).
	cc.cmu.Lock()
	if cc.gone {
		cc.cmu.Unlock()
		return eventbus.CancelResult{}, ErrNotConnected
	}
	cc.waiters = append(cc.waiters, ch)
	wctx, cancel := context.WithTimeout(ctx, DefaultWriteTimeout)
	err := cc.c.Write(wctx, websocket.MessageText, msg)
	cancel()
	if err != nil {
		cc.waiters = cc.waiters[:len(cc.waiters)-1]
		cc.cmu.Unlock()
		return eventbus.CancelResult{}, fmt.Errorf("ws: cancel: %w", err)
	}
	cc.cmu.Unlock()
	select {
	case a := <-ch:
		return a.res, a.err
	case <-ctx.Done():
		return eventbus.CancelResult{}, ctx.Err()
	}
}

// answer hands a cancel_result's data to the oldest waiting Cancel; false
// when none waits (a cancel sent by other means: the frame goes to Next).
func (c *clientConn) answer(data []byte) bool {
	c.cmu.Lock()
	if len(c.waiters) == 0 {
		c.cmu.Unlock()
		return false
	}
	ch := c.waiters[0]
	c.waiters = c.waiters[1:]
	c.cmu.Unlock()
	var d CancelResultData
	var a cancelAnswer
	switch {
	case json.Unmarshal(data, &d) != nil:
		a.err = fmt.Errorf("ws: malformed cancel_result %.80s", data)
	case d.Status == http.StatusAccepted:
		a.res = eventbus.CancelResult{Cancelled: d.Cancelled, Held: d.Held}
		if a.res.Cancelled == nil {
			a.res.Cancelled = []string{}
		}
		if a.res.Held == nil {
			a.res.Held = []string{}
		}
	default:
		a.err = &resume.StatusError{Status: d.Status, Code: d.Code, Message: d.Message}
	}
	ch <- a // buffered: the only send
	return true
}

// failWaiters ends every waiting Cancel: the connection is gone.
func (c *clientConn) failWaiters() {
	c.cmu.Lock()
	ws := c.waiters
	c.waiters, c.gone = nil, true
	c.cmu.Unlock()
	for _, ch := range ws {
		ch <- cancelAnswer{err: errors.New("ws: cancel: the connection ended before the answer")}
	}
}
