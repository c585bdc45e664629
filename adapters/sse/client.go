package sse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/backoff"
)

// Client defaults.
const (
	// DefaultClientRetry is the reconnection delay before a server sent
	// retry: (the WHATWG default is implementation-defined; 3 s matches
	// [DefaultRetry]).
	DefaultClientRetry = 3 * time.Second
	// DefaultMaxBackoff caps the delay between failed reconnects.
	DefaultMaxBackoff = 30 * time.Second
	// DefaultRestartGrace is how long a stream keeps retrying 404
	// session_not_found answers from a restarted server (see [Stream]).
	DefaultRestartGrace = 30 * time.Second
)

// ErrStreamClosed is returned by [Stream.Next] after [Stream.Close].
var ErrStreamClosed = errors.New("sse: stream closed")

// Client opens resumable SSE streams to a replaybus [Handler] (or any SSE
// endpoint). It is the Go form of the seed SDK's parseSseStream plus its
// reconnect loop. The zero value is ready to use; a Client is safe for
// concurrent use and may open any number of streams. Its fields must not be
// changed while streams are open.
type Client struct {
	// HTTPClient makes the requests; nil means http.DefaultClient. Its
	// Timeout must be zero (a timeout would cut every long stream).
	HTTPClient *http.Client
	// Header holds extra request headers (authorization, say) sent on every
	// connect. Accept, Cache-Control, Last-Event-ID and X-Event-Epoch are
	// set by the stream.
	Header http.Header
	// Retry is the reconnection delay until the server sends retry:;
	// zero means DefaultClientRetry.
	Retry time.Duration
	// MaxBackoff caps the delay between reconnects after consecutive
	// failures; zero means DefaultMaxBackoff.
	MaxBackoff time.Duration
	// MaxFrameBytes bounds one line and one frame's data; zero means
	// DefaultMaxFrameBytes.
	MaxFrameBytes int
	// RestartGrace is how long a stream retries a 404 that comes from a
	// restarted server (an X-Event-Epoch other than the one the stream
	// knew: an in-memory server has not recreated the session yet),
	// counted from the first such 404. Zero means DefaultRestartGrace;
	// negative: never retry a 404.
	RestartGrace time.Duration
}

// StreamOptions configure one [Client.Subscribe].
type StreamOptions struct {
	// LastEventID is the cursor to resume from, sent as the Last-Event-ID
	// header on the first connect: a decimal id or "<epoch>-<seq>". Empty:
	// none (the server then replays its buffer, or not, per ?replay=).
	LastEventID string
	// Epoch is the bus epoch the cursor came from, sent as X-Event-Epoch.
	// Afterwards the stream sends the epoch of the last id it received.
	Epoch string
	// Session is the session the URL subscribes to: a session_closed event
	// of this session ends the stream. Empty: taken from a URL path ending
	// in /session/{id}/events.
	Session string
}

// Stream is one logical SSE subscription that survives dropped
// connections. Create it with [Client.Subscribe]; read it with [Stream.Next]
// from one goroutine; end it with [Stream.Close] or by cancelling the
// context given to Subscribe.
//
// Reconnection follows EventSource: after a dropped connection (network
// error, end of response, a client_evicted frame followed by the server
// ending the response, a 5xx) the stream waits and reconnects with
// Last-Event-ID set to the id of the last frame that carried one — synthetic
// frames never move it — so the server replays exactly what was missed. The
// wait is the server's retry: value (or Client.Retry) doubled per
// consecutive failure up to Client.MaxBackoff, with jitter: a uniformly
// random delay in [d/2, d]. Failures reset once a connection delivers a
// frame.
//
// Answers that are retried (transient): any 5xx, 408, 429, and a 404 from
// a restarted server (its X-Event-Epoch differs from the one the stream
// knew) for up to Client.RestartGrace. A Retry-After on any of them is a
// floor: the wait is drawn uniformly from [Retry-After, Retry-After +
// max(d, Retry-After)/2], so clients told the same Retry-After do not come
// back in the same instant.
//
// The stream stops for good, and Next returns the reason from then on:
// [eventbus.ErrSessionClosed] after the session_closed event of its own
// session (the event itself is returned first), a [*StatusError] for any
// other non-200 answer (400, 401, 403, 404 from a server that did not
// restart, 405, 410, …) or a 200 that is not text/event-stream, the
// context's error, or [ErrStreamClosed].
type Stream struct {
	c       *Client
	ctx     context.Context
	cancel  context.CancelFunc
	url     string
	session string

	dec       *Decoder // nil while disconnected
	body      io.ReadCloser
	lastID    string
	epoch     string // the epoch of lastID, sent as X-Event-Epoch
	connEpoch string // the epoch the current connection announced
	retry     time.Duration
	failures  int
	minWait   time.Duration // Retry-After from the last failure
	waitNext  bool          // a reconnect must wait first
	since404  time.Time     // first 404 of a restarted server in a row; zero: none
	err       error         // terminal

	mu       sync.Mutex
	closed   bool
	connects int
}

// Subscribe returns a Stream for url (for example
// "http://host/session/s1/events?scope=descendants"). It does not connect:
// the first [Stream.Next] does. The stream ends when ctx ends.
func (c *Client) Subscribe(ctx context.Context, url string, opts StreamOptions) *Stream {
	ctx, cancel := context.WithCancel(ctx)
	s := &Stream{c: c, ctx: ctx, cancel: cancel, url: url, lastID: opts.LastEventID, epoch: opts.Epoch,
		session: opts.Session, retry: c.Retry}
	if s.retry <= 0 {
		s.retry = DefaultClientRetry
	}
	if s.session == "" {
		s.session = sessionFromURL(url)
	}
	return s
}

// Subscribe is [Client.Subscribe] on a zero Client.
func Subscribe(ctx context.Context, url string, opts StreamOptions) *Stream {
	return new(Client).Subscribe(ctx, url, opts)
}

// Next returns the next frame as an eventbus.Event: published events
// (ID > 0, Replay set for replayed ones) and synthetic frames (ID 0:
// state_resync_required, replay_complete, slow_client_warning,
// client_evicted) alike, in stream order. It blocks until a frame arrives,
// reconnecting as often as needed, or until the stream stops; then it
// returns the reason (see [Stream]). Frames that are not replaybus
// envelopes are returned as [DecodeEvent] makes them. Next must not be called
// concurrently with itself.
func (s *Stream) Next() (eventbus.Event, error) {
	for {
		if s.err != nil {
			return eventbus.Event{}, s.err
		}
		if s.dec == nil {
			s.connect()
			continue
		}
		f, err := s.dec.Next()
		if err != nil {
			s.disconnect()
			if errors.Is(err, ErrFrameTooLarge) {
				s.fail(err)
			}
			continue
		}
		if r, ok := s.dec.Retry(); ok && r > 0 {
			s.retry = r
		}
		if id := s.dec.LastEventID(); id != s.lastID {
			s.lastID = id
			if s.connEpoch != "" {
				s.epoch = s.connEpoch
			}
		}
		s.failures = 0
		ev, _ := DecodeEvent(f)
		if ev.Type == frame.TypeSessionClosed && ev.ID != 0 && s.session != "" && ev.Session == s.session {
			s.disconnect()
			s.fail(eventbus.ErrSessionClosed)
		}
		return ev, nil
	}
}

// LastEventID returns the cursor the stream resumes from: the id: of the
// last frame that carried one (in the server's form, possibly
// epoch-qualified), or StreamOptions.LastEventID before any. Call it from
// the goroutine that calls Next.
func (s *Stream) LastEventID() string { return s.lastID }

// Epoch returns the bus epoch of [Stream.LastEventID]: the X-Event-Epoch of
// the connection that delivered the last frame with an id (or
// StreamOptions.Epoch before any). Call it from the goroutine that calls
// Next.
func (s *Stream) Epoch() string { return s.epoch }

// Connects returns how many times the stream got a 200 text/event-stream
// response. Safe for concurrent use.
func (s *Stream) Connects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connects
}

// Close stops the stream: it cancels the request in flight (unblocking a
// Next in another goroutine) and makes Next return [ErrStreamClosed].
// Idempotent; safe for concurrent use; always returns nil.
func (s *Stream) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	return nil
}

// stopErr returns the error that ends the stream when its context is done.
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

func (s *Stream) disconnect() {
	if s.body != nil {
		_ = s.body.Close()
		s.body = nil
	}
	s.dec = nil
	s.waitNext = true
}

// connect waits if a reconnect is due, then makes one request. It leaves
// s.dec set on success, s.err set when the stream must stop, and neither
// when it should try again.
func (s *Stream) connect() {
	if s.ctx.Err() != nil {
		s.fail(s.stopErr())
		return
	}
	if s.waitNext {
		if !s.sleep(s.backoff()) {
			s.fail(s.stopErr())
			return
		}
	}
	s.waitNext = true // every later attempt waits
	s.minWait = 0
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, s.url, nil)
	if err != nil {
		s.fail(fmt.Errorf("sse: %w", err))
		return
	}
	for k, v := range s.c.Header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if s.lastID != "" {
		req.Header.Set("Last-Event-ID", s.lastID)
	}
	if s.epoch != "" {
		req.Header.Set(HeaderEpoch, s.epoch)
	}
	hc := s.c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if s.ctx.Err() != nil {
			s.fail(s.stopErr())
			return
		}
		s.failures++
		return
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		se := readStatusError(resp, body)
		if s.transient(resp) {
			s.failures++
			s.minWait = se.RetryAfter
			return
		}
		s.fail(se)
		return
	}
	s.since404 = time.Time{}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		_ = resp.Body.Close()
		s.fail(&StatusError{Status: resp.StatusCode, Code: "invalid_content_type",
			Message: fmt.Sprintf("want text/event-stream, got %q", resp.Header.Get("Content-Type"))})
		return
	}
	// The epoch goes with the cursor: it is adopted only when a frame with
	// an id arrives on this connection (see Next). Adopting it at once would
	// pair a new server's epoch with the old server's cursor should the
	// connection drop before its first id, and the next resume would then
	// skip the new server's first events without an epoch_reset.
	s.connEpoch = resp.Header.Get(HeaderEpoch)
	s.mu.Lock()
	s.connects++
	s.mu.Unlock()
	s.failures++ // undone by the first frame
	s.body = resp.Body
	s.dec = NewDecoder(resp.Body)
	s.dec.SetMaxFrameBytes(s.c.MaxFrameBytes)
	s.dec.SetLastEventID(s.lastID)
}

// transient reports whether a non-200 answer is worth another attempt (see
// [Stream]).
func (s *Stream) transient(resp *http.Response) bool {
	switch code := resp.StatusCode; {
	case code >= 500, code == http.StatusTooManyRequests, code == http.StatusRequestTimeout:
		return true
	case code != http.StatusNotFound:
		return false
	}
	grace := s.c.RestartGrace
	if grace == 0 {
		grace = DefaultRestartGrace
	}
	known := s.connEpoch
	if known == "" {
		known = s.epoch
	}
	got := resp.Header.Get(HeaderEpoch)
	if grace < 0 || known == "" || got == "" || got == known {
		return false // no restart: the session really is not there
	}
	if s.since404.IsZero() {
		s.since404 = time.Now()
	}
	return time.Since(s.since404) < grace
}

// backoff returns the jittered wait before the next connect.
func (s *Stream) backoff() time.Duration {
	maxB := s.c.MaxBackoff
	if maxB <= 0 {
		maxB = DefaultMaxBackoff
	}
	return backoff.Delay(s.retry, maxB, s.failures, s.minWait)
}

// sleep waits d or until the stream's context ends; it reports whether the
// full wait passed.
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

// sessionFromURL returns {id} from a path ending in /session/{id}/events.
func sessionFromURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	segs := strings.Split(strings.TrimSuffix(u.EscapedPath(), "/"), "/")
	n := len(segs)
	if n < 3 || segs[n-1] != "events" || segs[n-3] != "session" {
		return ""
	}
	id, err := url.PathUnescape(segs[n-2])
	if err != nil {
		return ""
	}
	return id
}
