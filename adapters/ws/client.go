package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/backoff"
)

// Client defaults.
const (
	// DefaultClientRetry is the first reconnection delay (as the SSE
	// client's).
	DefaultClientRetry = 3 * time.Second
	// DefaultMaxBackoff caps the delay between failed reconnects.
	DefaultMaxBackoff = 30 * time.Second
)

// ErrStreamClosed is returned by [Stream.Next] after [Stream.Close].
var ErrStreamClosed = errors.New("ws: stream closed")

// CloseError is why the server closed a connection for good: a close code
// the client must not retry (1003, 1008 other than "slow consumer", 1009,
// 1011), as [Stream.Next] returns it.
type CloseError struct {
	Code   websocket.StatusCode // e.g. 1008
	Reason string               // the server's reason, e.g. `invalid message: unknown message "hello"`
}

// Error reads "ws: closed <code>: <reason>".
func (e *CloseError) Error() string {
	return fmt.Sprintf("ws: closed %d (%s): %s", int(e.Code), e.Code, e.Reason)
}

// Client opens resumable WebSocket streams to a replaybus [Handler]. The
// zero value is ready to use; a Client is safe for concurrent use and may
// open any number of streams. Its fields must not change while streams are
// open.
type Client struct {
	// HTTPClient makes the handshakes; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Header holds extra handshake headers (authorization, say).
	Header http.Header
	// Retry is the base reconnection delay; zero means DefaultClientRetry.
	Retry time.Duration
	// MaxBackoff caps the delay after consecutive failures; zero means
	// DefaultMaxBackoff.
	MaxBackoff time.Duration
	// MaxFrameBytes bounds one frame (message) read; zero means
	// sse.DefaultMaxFrameBytes (16 MiB).
	MaxFrameBytes int64
	// RestartGrace is how long a stream retries a 404 from a restarted
	// server (a handshake answer whose X-Event-Epoch differs from the
	// epoch the stream knew: an in-memory server has not recreated the
	// session yet), counted from the first such 404; as sse.Client's.
	// Zero means sse.DefaultRestartGrace (30 s); negative: never.
	RestartGrace time.Duration
}

// StreamOptions configure one [Client.Subscribe].
type StreamOptions struct {
	// LastEventID is the cursor to resume from on the first connect: a
	// decimal id or "<epoch>-<seq>"; empty for none.
	LastEventID string
	// Epoch is the bus epoch the cursor came from. Afterwards the stream
	// sends the epoch that came with the last id it received.
	Epoch string
	// Session is the session subscribed to: its session_closed event ends
	// the stream. Empty: taken from a URL path ending in /session/{id}/ws.
	Session string
}

// Stream is one logical WebSocket subscription that survives dropped
// connections, with the resume behaviour of the SSE client (sse.Stream):
// on every connect it sends {"resume": {"lastEventId", "epoch"}} as its
// first message, with the id of the last frame that carried one (synthetic
// and targeted frames never move it) and the epoch that came with that id,
// so that the server replays exactly what was missed, or answers
// state_resync_required{epoch_reset} after a restart. After a dropped
// connection (network error, 1001, 1008 "slow consumer" after
// client_evicted, 1013, a 408, 429 or 5xx answer, a 404 from a restarted
// server within RestartGrace) it waits — Retry doubled per consecutive
// failure up to MaxBackoff, jittered in [d/2, d]; a Retry-After is a floor
// with the jitter above it — and reconnects; failures reset once a
// connection delivers a frame. These are the SSE client's rules.
//
// It stops for good, and Next returns the reason from then on:
// [eventbus.ErrSessionClosed] after its own session's session_closed (the
// event itself is returned first), a [*StatusError] for a 4xx answer to the
// handshake, a [*CloseError] for a close code that must not be retried
// (1003, 1008 other than slow consumer, 1009, 1011), the context's error,
// or [ErrStreamClosed]. Read it with Next from one goroutine.
type Stream struct {
	c       *Client
	ctx     context.Context
	cancel  context.CancelFunc
	url     string
	session string

	conn      *websocket.Conn // nil while disconnected
	lastID    uint64
	hasID     bool
	epoch     string
	failures  int
	minWait   time.Duration
	connEpoch string    // X-Event-Epoch of the last handshake answer
	since404  time.Time // first 404 of a restarted server
	waitNext  bool
	err       error

	mu       sync.Mutex
	closed   bool
	connects int
}

// Subscribe returns a Stream for url (for example
// "ws://host/session/s1/ws?scope=descendants"; http and https URLs are
// accepted too). It does not connect: the first [Stream.Next] does. A
// lastEventId / last_event_id in the URL is taken out of it and used as the
// starting cursor when opts.LastEventID is empty: the stream sends every
// cursor in its resume message. The stream ends when ctx ends.
func (c *Client) Subscribe(ctx context.Context, rawURL string, opts StreamOptions) *Stream {
	ctx, cancel := context.WithCancel(ctx)
	// A cursor in the URL is the starting cursor, sent in the resume
	// message like every later one (the URL would repeat a stale one).
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
	s := &Stream{c: c, ctx: ctx, cancel: cancel, url: rawURL, session: opts.Session, epoch: opts.Epoch}
	if opts.LastEventID != "" {
		if cur, err := sse.ParseCursor(opts.LastEventID); err != nil {
			s.err = fmt.Errorf("ws: StreamOptions.LastEventID: %w", err)
		} else if cur != nil {
			s.lastID, s.hasID = cur.ID, true
			if cur.Epoch != "" {
				s.epoch = cur.Epoch
			}
		}
	}
	if s.session == "" {
		s.session = sessionFromURL(rawURL)
	}
	return s
}

// Subscribe is [Client.Subscribe] on a zero Client.
func Subscribe(ctx context.Context, rawURL string, opts StreamOptions) *Stream {
	return new(Client).Subscribe(ctx, rawURL, opts)
}

// Next returns the next frame: published events (ID > 0, Replay set for
// replayed ones), synthetic frames and targeted frames (ID 0), in stream
// order, reconnecting as often as needed. It blocks until a frame arrives or
// the stream stops (see [Stream]); not for concurrent use.
func (s *Stream) Next() (eventbus.Event, error) {
	for {
		if s.err != nil {
			return eventbus.Event{}, s.err
		}
		if s.conn == nil {
			s.connect()
			continue
		}
		typ, b, err := s.conn.Read(s.ctx)
		if err != nil {
			s.readFailed(err)
			continue
		}
		if typ != websocket.MessageText {
			continue
		}
		ev, epoch, err := DecodeFrame(b)
		if err != nil {
			s.disconnect(websocket.StatusPolicyViolation, "malformed frame")
			s.fail(err)
			continue
		}
		s.failures = 0
		if ev.ID != 0 {
			s.lastID, s.hasID = ev.ID, true
			s.epoch = epoch
		}
		if ev.Type == frame.TypeSessionClosed && ev.ID != 0 && s.session != "" && ev.Session == s.session {
			s.disconnect(websocket.StatusNormalClosure, "")
			s.fail(eventbus.ErrSessionClosed)
		}
		return ev, nil
	}
}

// readFailed handles the end of a connection: retry, or stop for good.
func (s *Stream) readFailed(err error) {
	s.disconnect(websocket.StatusNormalClosure, "")
	if s.ctx.Err() != nil {
		s.fail(s.stopErr())
		return
	}
	switch code := websocket.CloseStatus(err); code {
	case -1, websocket.StatusNormalClosure, websocket.StatusGoingAway, websocket.StatusTryAgainLater,
		websocket.StatusAbnormalClosure, websocket.StatusServiceRestart:
		s.failures++
	case websocket.StatusPolicyViolation:
		var ce websocket.CloseError
		if errors.As(err, &ce) && ce.Reason == ReasonSlowConsumer {
			s.failures++
			return
		}
		s.fail(closeErr(err))
	default:
		s.fail(closeErr(err))
	}
}

func closeErr(err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return &CloseError{Code: ce.Code, Reason: ce.Reason}
	}
	return err
}

// LastEventID returns the cursor the stream resumes from: the id of the last
// frame that carried one, or StreamOptions.LastEventID's before any; "" when
// none. Call it from the goroutine that calls Next.
func (s *Stream) LastEventID() string {
	if !s.hasID {
		return ""
	}
	return sse.FormatID(s.lastID, "")
}

// Epoch returns the bus epoch that came with [Stream.LastEventID]. Call it
// from the goroutine that calls Next.
func (s *Stream) Epoch() string { return s.epoch }

// Connects returns how many handshakes succeeded. Safe for concurrent use.
func (s *Stream) Connects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connects
}

// Close stops the stream (unblocking a Next in another goroutine); Next
// then returns [ErrStreamClosed]. Idempotent; safe for concurrent use; nil.
func (s *Stream) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	return nil
}

func (s *Stream) stopErr() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrStreamClosed
	}
	return context.Cause(s.ctx)
}

func (s *Stream) fail(err error) {
	if s.err == nil {
		s.err = err
		s.cancel()
	}
}

func (s *Stream) disconnect(code websocket.StatusCode, reason string) {
	if s.conn != nil {
		if s.ctx.Err() != nil || code == websocket.StatusNormalClosure && reason == "" {
			_ = s.conn.CloseNow()
		} else {
			_ = s.conn.Close(code, reason)
		}
		s.conn = nil
	}
	s.waitNext = true
}

// resumeMessage is what the stream sends first on every connection.
func (s *Stream) resumeMessage() []byte {
	type resume struct {
		LastEventID string `json:"lastEventId,omitempty"`
		Epoch       string `json:"epoch,omitempty"`
	}
	var r resume
	if s.hasID {
		r.LastEventID = sse.FormatID(s.lastID, "")
		r.Epoch = s.epoch
	}
	b, _ := json.Marshal(struct {
		Resume resume `json:"resume"`
	}{r})
	return b
}

// connect waits when a reconnect is due, then dials once.
func (s *Stream) connect() {
	if s.ctx.Err() != nil {
		s.fail(s.stopErr())
		return
	}
	if s.waitNext && !s.sleep(s.backoff()) {
		s.fail(s.stopErr())
		return
	}
	s.waitNext = true
	s.minWait = 0
	u, err := wsURL(s.url)
	if err != nil {
		s.fail(err)
		return
	}
	c, resp, err := websocket.Dial(s.ctx, u, &websocket.DialOptions{HTTPClient: s.c.HTTPClient, HTTPHeader: s.c.Header})
	if err != nil {
		if s.ctx.Err() != nil {
			s.fail(s.stopErr())
			return
		}
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			se := statusErrorOf(resp)
			if s.transient(resp) {
				s.failures++
				s.minWait = se.RetryAfter
				return
			}
			s.fail(se)
			return
		}
		s.failures++
		return
	}
	s.since404 = time.Time{}
	s.connEpoch = resp.Header.Get(sse.HeaderEpoch)
	limit := s.c.MaxFrameBytes
	if limit <= 0 {
		limit = sse.DefaultMaxFrameBytes
	}
	c.SetReadLimit(limit)
	wctx, cancel := context.WithTimeout(s.ctx, DefaultWriteTimeout)
	err = c.Write(wctx, websocket.MessageText, s.resumeMessage())
	cancel()
	if err != nil {
		_ = c.CloseNow()
		s.failures++
		return
	}
	s.mu.Lock()
	s.connects++
	s.mu.Unlock()
	s.failures++ // undone by the first frame
	s.conn = c
}

// statusErrorOf reads the JSON error of a refused handshake (the library
// keeps the first 1 KiB of the body).
func statusErrorOf(resp *http.Response) *StatusError {
	e := &StatusError{Status: resp.StatusCode, Code: http.StatusText(resp.StatusCode)}
	if resp.Body != nil {
		b, _ := io.ReadAll(resp.Body)
		var body struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(b, &body) == nil && body.Code != "" {
			e.Code, e.Message = body.Code, body.Message
		} else {
			e.Message = string(b)
		}
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		var secs int
		if _, err := fmt.Sscanf(ra, "%d", &secs); err == nil && secs > 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
	}
	return e
}

func (s *Stream) backoff() time.Duration {
	base := s.c.Retry
	if base <= 0 {
		base = DefaultClientRetry
	}
	maxB := s.c.MaxBackoff
	if maxB <= 0 {
		maxB = DefaultMaxBackoff
	}
	return backoff.Delay(base, maxB, s.failures-1, s.minWait)
}

// transient reports whether a refused handshake is worth another attempt:
// 408, 429, 5xx, and a 404 from a restarted server within RestartGrace.
func (s *Stream) transient(resp *http.Response) bool {
	switch code := resp.StatusCode; {
	case code >= 500, code == http.StatusTooManyRequests, code == http.StatusRequestTimeout:
		return true
	case code != http.StatusNotFound:
		return false
	}
	grace := s.c.RestartGrace
	if grace == 0 {
		grace = sse.DefaultRestartGrace
	}
	known := s.connEpoch
	if known == "" {
		known = s.epoch
	}
	got := resp.Header.Get(sse.HeaderEpoch)
	if grace < 0 || known == "" || got == "" || got == known {
		return false // no restart: the session really is not there
	}
	if s.since404.IsZero() {
		s.since404 = time.Now()
	}
	return time.Since(s.since404) < grace
}

func (s *Stream) sleep(d time.Duration) bool {
	if d <= 0 {
		return s.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// frameJSON is the envelope of a frame as the handler writes it.
type frameJSON struct {
	V       int             `json:"v"`
	ID      uint64          `json:"id"`
	Epoch   string          `json:"epoch"`
	Type    string          `json:"type"`
	Session string          `json:"session"`
	Data    json.RawMessage `json:"data"`
	Replay  bool            `json:"replay"`
	Origin  string          `json:"origin"`
	Count   int             `json:"count"`
	FirstID uint64          `json:"firstId"`
}

// DecodeFrame decodes one server text message into the event it carries
// and the epoch that came with its id ("" for a frame without one). A
// message that is not a version-1 envelope with a type is an error.
func DecodeFrame(b []byte) (eventbus.Event, string, error) {
	var f frameJSON
	if err := json.Unmarshal(b, &f); err != nil {
		return eventbus.Event{}, "", fmt.Errorf("ws: malformed frame: %w", err)
	}
	if f.V != sse.EnvelopeVersion || f.Type == "" {
		return eventbus.Event{}, "", fmt.Errorf("ws: malformed frame: want an envelope with \"v\":%d and a type", sse.EnvelopeVersion)
	}
	return eventbus.Event{ID: f.ID, Session: f.Session, Type: f.Type, Data: f.Data, Replay: f.Replay, Origin: f.Origin,
		Count: f.Count, FirstID: f.FirstID}, f.Epoch, nil
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

// sessionFromURL returns {id} from a path ending in /session/{id}/ws.
func sessionFromURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	segs := strings.Split(strings.TrimSuffix(u.EscapedPath(), "/"), "/")
	n := len(segs)
	if n < 3 || segs[n-1] != "ws" || segs[n-3] != "session" {
		return ""
	}
	id, err := url.PathUnescape(segs[n-2])
	if err != nil {
		return ""
	}
	return id
}
