package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/internal/textutil"
)

// CloseError is why the server closed a connection for good: a close code
// the client must not retry (1003, 1008 other than "slow consumer", 1009,
// 1011), as [resume.Stream.Next] returns it.
type CloseError struct {
	Code   websocket.StatusCode // e.g. 1008
	Reason string               // the server's reason, e.g. `invalid message: unknown message "hello"`
}

// Error reads "ws: closed <code>: <reason>".
func (e *CloseError) Error() string {
	return fmt.Sprintf("ws: closed %d (%s): %s", int(e.Code), e.Code, e.Reason)
}

// Stream is one logical WebSocket subscription that survives dropped
// connections: [resume.Stream] over WebSocket (see [Client.Subscribe]).
type Stream = resume.Stream

// StreamOptions configure one [Client.Subscribe]: the starting cursor, its
// epoch and the session; see [resume.StreamOptions].
type StreamOptions = resume.StreamOptions

// Client opens resumable WebSocket streams to a replaybus [Handler]: the
// WebSocket transport under the resume protocol's client loop
// ([resume.Stream]), with the SSE client's rules. The zero value is ready
// to use; a Client is safe for concurrent use and may open any number of
// streams. Its fields must not change while streams are open.
type Client struct {
	// HTTPClient makes the handshakes; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Header holds extra handshake headers (authorization, say). One no
	// HTTP client can send (a CR or LF in a value, a space in a name)
	// stops the stream, naming it.
	Header http.Header
	// Retry is the base reconnection delay; zero means
	// resume.DefaultClientRetry (3 s).
	Retry time.Duration
	// MaxBackoff caps the delay after consecutive failures; zero means
	// resume.DefaultMaxBackoff (30 s).
	MaxBackoff time.Duration
	// MaxFrameBytes bounds one frame (message) read; zero means
	// resume.DefaultMaxFrameBytes (16 MiB).
	MaxFrameBytes int64
	// RestartGrace is how long a stream retries a 404 from a restarted
	// server (a handshake answer whose X-Event-Epoch differs from the
	// epoch the stream knew: an in-memory server has not recreated the
	// session yet), counted from the first such 404; as sse.Client's.
	// Zero means resume.DefaultRestartGrace (30 s); negative: never.
	RestartGrace time.Duration
}

// Subscribe returns a [Stream] for url (for example
// "ws://host/session/s1/ws?scope=descendants"; http and https URLs are
// accepted too). It does not connect: the first Next does. On every connect
// the stream sends the last id it received, and the epoch that came with
// it, in the handshake's Last-Event-ID and X-Event-Epoch headers (read by
// every handler, whatever its ResumeWait), then {"resume": {}} as its first
// message; a lastEventId / last_event_id in the URL is taken out of it and used as
// the starting cursor when opts.LastEventID is empty (the URL would repeat
// a stale one). A close with 1003, 1008 other than "slow consumer", 1009 or
// 1011 stops the stream with a [*CloseError]; 1000, 1001, 1008 "slow
// consumer", 1013 and a cut socket are resumed. The stream ends when ctx
// ends. Every handshake offers [SubprotocolBatch]: a server that selects it
// sends batches, which the stream splits ([SplitBatch]) and returns frame
// by frame; one that does not sends one frame per message, read as such. A
// malformed batch or frame stops the stream (a *resume.PermanentError
// naming it; the connection is closed with 1008). ?client= and
// ?presence=1 are set as opts asks ([resume.StreamURL]); the stream's
// Cancel sends the cancel message on its connection (see
// [ErrNotConnected]).
func (c *Client) Subscribe(ctx context.Context, rawURL string, opts StreamOptions) *Stream {
	if u, err := url.Parse(rawURL); err == nil {
		q := u.Query()
		for _, k := range [...]string{"lastEventId", "last_event_id"} {
			if v := q.Get(k); v != "" && opts.LastEventID == "" {
				opts.LastEventID = v
			}
			q.Del(k)
		}
		u.RawQuery = q.Encode()
		rawURL = u.String()
	}
	rawURL = resume.StreamURL(rawURL, opts)
	b := resume.Backoff{Retry: c.Retry, MaxBackoff: c.MaxBackoff, RestartGrace: c.RestartGrace}
	return resume.NewStream(ctx, &transport{c: c, url: rawURL}, rawURL, opts, b)
}

// Subscribe is [Client.Subscribe] on a zero Client.
func Subscribe(ctx context.Context, rawURL string, opts StreamOptions) *Stream {
	return new(Client).Subscribe(ctx, rawURL, opts)
}

// transport is the WebSocket [resume.Transport]: a handshake and a resume
// message per connect; cur is the open connection, for Cancel.
type transport struct {
	c   *Client
	url string

	mu  sync.Mutex
	cur *clientConn
}

// Connect dials with the cursor (plain seq) in the handshake's
// Last-Event-ID header and its epoch in X-Event-Epoch — which every server
// reads, whether or not it waits for a resume message (HandlerOptions.
// ResumeWait) — offering SubprotocolBatch, and sends {"resume": {}}, which
// starts a waiting server's stream at once. A malformed cursor or epoch is a *resume.PermanentError
// naming it, found before dialling.
func (t *transport) Connect(ctx context.Context, cursor, epoch string) (resume.Conn, string, error) {
	if _, err := resume.ParseEpoch(epoch); err != nil {
		return nil, "", &resume.PermanentError{Err: fmt.Errorf("ws: StreamOptions.Epoch: %w", err)}
	}
	if err := textutil.CheckHeader(t.c.Header); err != nil {
		return nil, "", &resume.PermanentError{Err: fmt.Errorf("ws: Client.Header: %w", err)}
	}
	hdr := t.c.Header.Clone()
	if cursor != "" {
		cur, err := resume.ParseCursor(cursor)
		if err != nil {
			return nil, "", &resume.PermanentError{Err: fmt.Errorf("ws: StreamOptions.LastEventID: %w", err)}
		}
		if cur.Epoch != "" {
			epoch = cur.Epoch
		}
		if hdr == nil {
			hdr = http.Header{}
		}
		hdr.Set("Last-Event-ID", resume.FormatID(cur.ID, ""))
		if epoch != "" {
			hdr.Set(resume.HeaderEpoch, epoch)
		}
	}
	msg := []byte(`{"resume":{}}`)
	u, err := wsURL(t.url)
	if err != nil {
		return nil, "", &resume.PermanentError{Err: err}
	}
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: t.c.HTTPClient, HTTPHeader: hdr,
		Subprotocols: []string{SubprotocolBatch}})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, "", resume.ReadStatusError(resp) // the library keeps the first 1 KiB of the body
		}
		return nil, "", err
	}
	limit := t.c.MaxFrameBytes
	if limit <= 0 {
		limit = resume.DefaultMaxFrameBytes
	}
	c.SetReadLimit(limit)
	wctx, cancel := context.WithTimeout(ctx, DefaultWriteTimeout)
	err = c.Write(wctx, websocket.MessageText, msg)
	cancel()
	if err != nil {
		_ = c.CloseNow()
		return nil, "", err
	}
	cc := &clientConn{t: t, c: c, fresh: true, batched: c.Subprotocol() == SubprotocolBatch}
	t.mu.Lock()
	t.cur = cc
	t.mu.Unlock()
	return cc, resp.Header.Get(resume.HeaderEpoch), nil
}

// clientConn is one client connection being read.
type clientConn struct {
	t       *transport
	c       *websocket.Conn
	fresh   bool     // no frame read yet
	batched bool     // the server selected SubprotocolBatch: every message is an array
	pending [][]byte // the envelopes of the last batch
	nextEnv int      // the first of pending not yet returned

	// The cancels sent and not yet answered, oldest first: the server
	// answers a connection's messages in order (cancel.go).
	cmu     sync.Mutex
	waiters []chan cancelAnswer
	gone    bool // closed: no answer will come
}

// next returns the next envelope: the next of the last batch, or the next
// text message (split when batched).
func (c *clientConn) next(ctx context.Context) ([]byte, error) {
	for c.nextEnv == len(c.pending) {
		typ, b, err := c.c.Read(ctx)
		if err != nil {
			return nil, readErr(err)
		}
		if typ != websocket.MessageText {
			continue
		}
		if !c.batched {
			return b, nil
		}
		clear(c.pending)
		c.nextEnv = 0
		if c.pending, err = SplitBatch(b, c.pending[:0]); err != nil {
			c.pending = c.pending[:0]
			return nil, c.malformed(err)
		}
	}
	c.nextEnv++
	return c.pending[c.nextEnv-1], nil
}

// malformed closes the connection for a message that breaks the protocol:
// a permanent error.
func (c *clientConn) malformed(err error) error {
	_ = c.c.Close(websocket.StatusPolicyViolation, "malformed frame")
	return &resume.PermanentError{Err: err}
}

// Read reads the next frame: a text message, or an element of a batch. A
// cancel_result that answers a Cancel of this connection goes to it, not
// to the reader.
func (c *clientConn) Read(ctx context.Context) (resume.Frame, error) {
	b, err := c.next(ctx)
	if err != nil {
		return resume.Frame{}, err
	}
	ev, epoch, err := DecodeFrame(b)
	if err != nil {
		return resume.Frame{}, c.malformed(err)
	}
	for ev.ID == 0 && ev.Type == TypeCancelResult && c.answer(ev.Data) {
		if b, err = c.next(ctx); err != nil {
			return resume.Frame{}, err
		}
		if ev, epoch, err = DecodeFrame(b); err != nil {
			return resume.Frame{}, c.malformed(err)
		}
	}
	f := resume.Frame{Event: ev, Epoch: epoch}
	first := c.fresh
	c.fresh = false
	if id, ok := resume.SnapshotCursor(ev); ok {
		f.Cursor = resume.FormatID(id, "") // the state's id: the events after it follow
	}
	switch {
	case ev.ID != 0:
		f.Cursor = resume.FormatID(ev.ID, "")
	case first && ev.Type == resume.TypeStreamStart:
		var d struct {
			LastEventID string `json:"lastEventId"`
			Epoch       string `json:"epoch"`
		}
		if json.Unmarshal(ev.Data, &d) == nil {
			if cur, err := resume.ParseCursor(d.LastEventID); err == nil && cur != nil {
				f.Cursor, f.Epoch = resume.FormatID(cur.ID, ""), d.Epoch
				if cur.Epoch != "" {
					f.Epoch = cur.Epoch
				}
			}
		}
		f.Start = true
	}
	return f, nil
}

// readErr sorts the end of a connection: a close code that must not be
// retried is permanent; anything else is resumed.
func readErr(err error) error {
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.Code {
	case websocket.StatusNormalClosure, websocket.StatusGoingAway, websocket.StatusTryAgainLater,
		websocket.StatusAbnormalClosure, websocket.StatusServiceRestart:
		return err
	case websocket.StatusPolicyViolation:
		if ce.Reason == ReasonSlowConsumer {
			return err
		}
	}
	return &resume.PermanentError{Err: &CloseError{Code: ce.Code, Reason: ce.Reason}}
}

// Close ends the connection at once; the cancels waiting for an answer on
// it fail.
func (c *clientConn) Close() error {
	c.t.mu.Lock()
	if c.t.cur == c {
		c.t.cur = nil
	}
	c.t.mu.Unlock()
	c.failWaiters()
	return c.c.CloseNow()
}

// DecodeFrame decodes one server text message into the event it carries
// and the epoch that came with its id ("" for a frame without one). A
// message that is not a version-1 envelope with a type is an error.
func DecodeFrame(b []byte) (eventbus.Event, string, error) {
	ev, epoch, err := resume.DecodeEnvelope(b)
	if err != nil {
		return eventbus.Event{}, "", fmt.Errorf("ws: malformed frame: %w", err)
	}
	if ev.Type == "" {
		return eventbus.Event{}, "", fmt.Errorf("ws: malformed frame: want an envelope with \"v\":%d and a type", resume.EnvelopeVersion)
	}
	return ev, epoch, nil
}

// wsURL turns an http(s) URL into ws(s); ws and wss pass through.
func wsURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("ws: %w", err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	case "ws", "wss":
	default:
		return "", fmt.Errorf("ws: URL scheme %q (want ws, wss, http or https)", u.Scheme)
	}
	return u.String(), nil
}
