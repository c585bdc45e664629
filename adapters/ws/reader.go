package ws

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/replaybus/replaybus/adapters/internal/serve"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
)

// readLoop reads client messages until the connection ends. While the
// handler waits for a resume, the first message goes to cn.first.
func (cn *conn) readLoop() {
	defer close(cn.readDone)
	defer cn.cancel() // the peer is gone, or broke the protocol: end the stream
	firstDone := false
	for {
		typ, b, err := cn.c.Read(cn.readCtx)
		if err != nil {
			if errors.Is(err, websocket.ErrMessageTooBig) {
				cn.h.protocolErrors.Add(1) // the library sent 1009 itself
			}
			return
		}
		if typ != websocket.MessageText {
			cn.h.protocolErrors.Add(1)
			cn.closeWith(CloseUnsupportedData, "binary messages are not accepted (want JSON text)")
			return
		}
		m, err := ParseClientMessage(b)
		if err != nil {
			cn.h.protocolErrors.Add(1)
			var me *MessageError
			errors.As(err, &me)
			cn.closeWith(ClosePolicyViolation, "invalid message: "+me.Reason)
			return
		}
		first := !firstDone
		if first {
			firstDone = true
			cn.firstMu.Lock()
			waiting := cn.waiting
			if waiting {
				cn.first <- m // buffered, and the only send
			}
			cn.firstMu.Unlock()
			if !waiting && !cn.urlCursor && m.Resume != nil && m.Resume.Cursor != nil {
				// The wait is over: the stream started as the URL said.
				// (With a cursor in the URL there was no wait: the check
				// below names that.)
				cn.h.protocolErrors.Add(1)
				cn.closeWith(ClosePolicyViolation, "resume too late: send it first, within the resume wait")
				return
			}
		}
		if m.Resume != nil && !first {
			cn.h.protocolErrors.Add(1)
			cn.closeWith(ClosePolicyViolation, "resume must be the first message")
			return
		}
		if m.Resume != nil && cn.urlCursor && m.Resume.Cursor != nil {
			cn.h.protocolErrors.Add(1)
			cn.closeWith(ClosePolicyViolation, "resume with a cursor, but the URL already carries one")
			return
		}
		if m.Ping != nil {
			if err := cn.pong(m.Ping); err != nil {
				return
			}
		}
		if m.Cancel != nil || m.CancelErr != nil {
			if err := cn.cancelTurns(m); err != nil {
				return
			}
		}
	}
}

// cancelTurns applies a cancel message as POST /session/{id}/cancel does
// — the connection's ?client= as who asked, the AuthorizeCancel hook with
// the upgrade request — and answers it with a cancel_result frame carrying
// the route's status and body. It blocks the reader for at most
// serve.CancelTimeout (over a backend, the wait for the record to be
// stored; in process it returns at once).
func (cn *conn) cancelTurns(m ClientMessage) error {
	err := m.CancelErr
	var res eventbus.CancelResult
	if err == nil {
		res, err = serve.Cancel(cn.ctx, cn.h.bus, cn.req, cn.sessionID, *m.Cancel, cn.client, cn.h.o.AuthorizeCancel)
	}
	var b []byte
	if err != nil {
		var se *resume.StatusError
		errors.As(resume.StatusFor(err, cn.sessionID), &se)
		b, _ = textutil.MarshalJSON(CancelResultData{Status: se.Status, Code: se.Code, Message: se.Message})
	} else {
		cn.h.cancels.Add(1)
		// The route's 202 body, lists empty rather than absent.
		b, _ = json.Marshal(struct {
			Status int `json:"status"`
			eventbus.CancelResult
		}{http.StatusAccepted, res})
	}
	if err := cn.writeMessage(eventbus.Event{Type: TypeCancelResult, Session: cn.sessionID, Data: b}); err != nil {
		return err
	}
	cn.h.frames.Add(1)
	return nil
}

// pong answers a ping message with a pong frame.
func (cn *conn) pong(v []byte) error {
	if err := cn.writeMessage(eventbus.Event{Type: TypePong, Session: cn.sessionID, Data: v}); err != nil {
		return err
	}
	cn.h.pongs.Add(1)
	return nil
}

func (cn *conn) stopKeeper() {
	cn.keeperOnce.Do(func() { close(cn.keeperStop) })
}

// keep pings the peer every PingInterval (cutting it off when a pong does
// not come within WriteTimeout) and starts the close grace the moment the
// subscription is evicted, so that a writer stuck on a peer that stopped
// reading cannot hold the socket past it.
func (cn *conn) keep(sub *eventbus.Subscription, done chan<- struct{}) {
	defer close(done)
	var tick <-chan time.Time
	if cn.h.ping > 0 {
		t := time.NewTicker(cn.h.ping)
		defer t.Stop()
		tick = t.C
	}
	subDone := sub.Done()
	for {
		select {
		case <-cn.keeperStop:
			return
		case <-cn.ctx.Done():
			return
		case <-subDone:
			subDone = nil
			if errors.Is(sub.Err(), eventbus.ErrEvicted) {
				cn.evicted()
			}
		case <-tick:
			ctx, cancel := context.WithTimeout(cn.ctx, max(cn.h.wt, time.Second))
			err := cn.c.Ping(ctx)
			cancel()
			if err != nil {
				if cn.ctx.Err() == nil {
					cn.h.writeErrors.Add(1)
					cn.abort()
					cn.cancel()
				}
				return
			}
		}
	}
}
