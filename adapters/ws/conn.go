package ws

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
)

// conn is one upgraded connection.
type conn struct {
	h         *Handler
	c         *websocket.Conn
	raw       net.Conn  // the hijacked connection
	cork      *corkConn // the writes' path to it
	ctx       context.Context
	cancel    context.CancelFunc
	sessionID string
	remote    string
	urlCursor bool // the request carried a cursor (URL or header)
	batched   bool // SubprotocolBatch was selected: every message is an array of envelopes
	// hdrEpoch is the handshake's X-Event-Epoch (validated): the epoch of a
	// resume message's plain cursor when the message names none, as the
	// header qualifies a plain Last-Event-ID on the SSE endpoint.
	hdrEpoch string

	readCtx  context.Context
	stopRead context.CancelFunc
	readDone chan struct{}
	// The first client message, handed to awaitResume while it waits
	// (waiting true); buffered so the reader never blocks on it.
	firstMu sync.Mutex
	waiting bool
	first   chan ClientMessage

	keeperStop chan struct{}
	keeperOnce sync.Once

	closeOnce sync.Once
	evictOnce sync.Once
	killOnce  sync.Once
	kill      *time.Timer
}

// armKill cuts the socket after the close grace unless the connection has
// ended before; armed at most once.
func (cn *conn) armKill() {
	cn.killOnce.Do(func() {
		cn.kill = time.AfterFunc(cn.h.grace, func() {
			_ = cn.raw.Close()
			_ = cn.c.CloseNow()
		})
	})
}

// evicted notes the eviction once — counted, logged — and starts the close
// grace: client_evicted and the 1008 close frame go out within it if the
// peer reads at all, and the socket is cut at its end regardless.
func (cn *conn) evicted() {
	cn.evictOnce.Do(func() {
		cn.h.evicted.Add(1)
		cn.armKill()
		if cn.h.o.Logger != nil {
			cn.h.o.Logger.LogAttrs(context.Background(), slog.LevelWarn, "ws: slow consumer evicted",
				slog.String("session", cn.sessionID), slog.String("remote", cn.remote))
		}
	})
}

// closeWith closes the connection with code and reason, once: the close
// frame is written and the peer's answer awaited within the close grace.
func (cn *conn) closeWith(code websocket.StatusCode, reason string) {
	cn.closeOnce.Do(func() {
		cn.armKill()
		_ = cn.c.Close(code, closeReason(reason))
		if cn.h.o.Logger != nil {
			cn.h.o.Logger.LogAttrs(context.Background(), slog.LevelDebug, "ws: connection closed",
				slog.String("session", cn.sessionID), slog.String("remote", cn.remote),
				slog.Int("code", int(code)), slog.String("reason", reason))
		}
	})
}

// abort ends the connection without a close frame (a broken socket).
func (cn *conn) abort() {
	cn.closeOnce.Do(func() { _ = cn.c.CloseNow() })
}

// finish releases everything: the reader, the write context, the timer.
func (cn *conn) finish() {
	cn.abort() // no-op after a close
	cn.cancel()
	cn.stopRead()
	<-cn.readDone
	cn.killOnce.Do(func() {}) // no timer after this point
	if cn.kill != nil {
		cn.kill.Stop()
	}
}

// writeStart writes the resume.TypeStreamStart frame of a live-only stream;
// false when the write failed.
func (cn *conn) writeStart(start uint64) bool {
	epoch, idEpoch := cn.h.bus.Epoch(), cn.h.bus.Epoch()
	if cn.h.o.PlainIDs {
		idEpoch = ""
	}
	if err := cn.writeMessage(resume.StartEvent(cn.sessionID, resume.FormatID(start, idEpoch), epoch)); err != nil {
		cn.abort()
		return false
	}
	cn.h.frames.Add(1)
	return true
}

// awaitResume waits for the first client message (or ResumeWait) and
// returns the subscription to stream: sub, or (replaced) a new one made
// from the resume message's cursor or the URL's replay. ok is false when
// the connection has ended.
func (cn *conn) awaitResume(sub *eventbus.Subscription, opts eventbus.SubscribeOptions) (_ *eventbus.Subscription, replaced, ok bool) {
	t := time.NewTimer(cn.h.resumeWait)
	defer t.Stop()
	var m ClientMessage
	select {
	case m = <-cn.first:
	case <-t.C:
		cn.firstMu.Lock()
		cn.waiting = false
		cn.firstMu.Unlock()
		select {
		case m = <-cn.first: // it came just now
		default:
		}
	case <-cn.ctx.Done():
		cn.closeEnded(nil)
		return sub, false, false
	}
	switch {
	case m.Resume != nil && m.Resume.Cursor != nil:
		// A resume (after a snapshot, the frame's lastEventId) asks for no
		// other snapshot, as over SSE; a lost position still gets one.
		opts.Cursor, opts.NoReplay, opts.Snapshot = &eventbus.Position{ID: m.Resume.Cursor.ID}, false, false
		if ep := cmp.Or(m.Resume.Epoch, cn.hdrEpoch); ep != "" {
			opts.Cursor.Epoch = resume.BusEpoch(ep, cn.h.bus.Epoch())
		}
	case opts.NoReplay:
		return sub, false, true // the placeholder is what the URL asked for
	}
	// Replaced: what the placeholder queued meanwhile is in the replay
	// buffer, and the new subscription replays it.
	sub.Close()
	ns, err := cn.h.bus.Subscribe(cn.ctx, cn.sessionID, opts)
	if err != nil {
		code, reason := closeFor(err)
		if cn.ctx.Err() != nil && cn.h.streams.Closed() {
			// The handler's Shutdown ended the connection's context
			// while the resume was being made: whatever Subscribe said
			// of it (context.Canceled), the server is going away.
			code, reason = CloseGoingAway, "server shutting down"
		}
		cn.closeWith(code, reason)
		return sub, false, false
	}
	return ns, true, true
}

// closeFor maps a Subscribe error after the upgrade to a close code.
func closeFor(err error) (websocket.StatusCode, string) {
	switch {
	case errors.Is(err, eventbus.ErrSubscriberLimit):
		return CloseTryAgainLater, resume.CodeSubscriberLimit
	case errors.Is(err, eventbus.ErrSessionClosed):
		return CloseNormal, resume.CodeSessionClosed
	case errors.Is(err, eventbus.ErrSessionNotFound):
		return ClosePolicyViolation, resume.CodeSessionNotFound
	case errors.Is(err, eventbus.ErrClosed):
		return CloseGoingAway, "server shutting down"
	case errors.Is(err, eventbus.ErrBackend):
		return CloseTryAgainLater, resume.CodeUnavailable
	case errors.Is(err, eventbus.ErrInvalid):
		return ClosePolicyViolation, resume.CodeInvalidArgument + ": " + err.Error()
	}
	return CloseInternalError, "internal_error"
}

// closeEnded closes the connection for the end of its subscription.
func (cn *conn) closeEnded(err error) {
	switch {
	case errors.Is(err, eventbus.ErrEvicted):
		cn.evicted()
		cn.closeWith(ClosePolicyViolation, ReasonSlowConsumer)
	case errors.Is(err, eventbus.ErrSessionClosed):
		cn.closeWith(CloseNormal, "session closed")
	case errors.Is(err, eventbus.ErrClosed) || cn.h.streams.Closed():
		cn.closeWith(CloseGoingAway, "server shutting down")
	case errors.Is(err, eventbus.ErrBackend):
		cn.closeWith(CloseTryAgainLater, resume.CodeUnavailable) // resume here later, or on another node
	default:
		// The reader ended (the peer closed, or a protocol error was
		// answered) or a write failed: nothing more to say.
		cn.abort()
	}
}
