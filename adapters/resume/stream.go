package resume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/backoff"
)

// Client defaults, the same for every transport.
const (
	// DefaultClientRetry is the reconnection delay before the server said
	// another (an SSE retry: line); 3 s, as the handlers announce.
	DefaultClientRetry = 3 * time.Second
	// DefaultMaxBackoff caps the delay between failed reconnects.
	DefaultMaxBackoff = 30 * time.Second
	// DefaultRestartGrace is how long a stream keeps retrying 404
	// session_not_found answers from a restarted server (see [Stream]).
	DefaultRestartGrace = 30 * time.Second
	// DefaultMaxFrameBytes bounds one frame a client reads (16 MiB).
	DefaultMaxFrameBytes = 16 << 20
)

// ErrStreamClosed is returned by [Stream.Next] after [Stream.Close].
var ErrStreamClosed = errors.New("resume: stream closed")

// Transport is how a [Stream] reaches a subscribe endpoint: the SSE and
// WebSocket clients each implement it (as centrifuge's Transport), and the
// Stream runs the resume protocol — cursor, epoch, backoff, which answers
// to retry — over it.
type Transport interface {
	// Connect makes one attempt to open the stream, resuming after cursor
	// (in the server's form; "" for none) of epoch ("" when unknown). It
	// returns the connection and the epoch the server announced
	// (X-Event-Epoch), or the reason it failed: a [*StatusError] for a
	// refused request (with the answer's epoch), a [*PermanentError] for
	// what no retry can mend, anything else for a network error. It must
	// return when ctx ends.
	Connect(ctx context.Context, cursor, epoch string) (conn Conn, serverEpoch string, err error)
}

// Conn is one open connection of a [Transport], read by one goroutine.
type Conn interface {
	// Read blocks until the next frame arrives, the connection ends (an
	// error; a [*PermanentError] when the stream must stop), or ctx ends.
	Read(ctx context.Context) (Frame, error)
	// Close ends the connection at once.
	Close() error
}

// Frame is one frame a [Conn] read.
type Frame struct {
	// Event is the frame as an event: a published one (ID > 0) or a
	// synthetic or targeted frame (ID 0).
	Event eventbus.Event
	// Cursor is the cursor the frame moves the stream to, in the server's
	// form ("42" or "<epoch>-42"); "" leaves it where it was (synthetic
	// frames).
	Cursor string
	// Epoch is the epoch of Cursor when the frame says it; "" means the
	// epoch the connection announced.
	Epoch string
	// Retry is a new base reconnection delay the server asked for (an SSE
	// retry: line); 0 for none.
	Retry time.Duration
	// Start marks a [TypeStreamStart] frame: the stream takes its Cursor
	// and does not return it.
	Start bool
}

// PermanentError wraps what a [Transport] or [Conn] met that no retry can
// mend (a malformed URL, an answer that is not a stream, a frame over the
// size limit, a close code the server means for good): the stream stops
// and [Stream.Next] returns Err.
type PermanentError struct {
	Err error // what stopped the stream
}

// Error is Err's text.
func (e *PermanentError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *PermanentError) Unwrap() error { return e.Err }

// StreamOptions configure one stream of a client.
type StreamOptions struct {
	// LastEventID is the cursor to resume from on the first connect: a
	// decimal id or "<epoch>-<seq>" ([ParseCursor]'s grammar). Empty: none
	// (the server then replays its buffer, or not, per ?replay=). A
	// malformed one stops the stream: Next returns an error naming it.
	LastEventID string
	// Epoch is the bus epoch the cursor came from ([ParseEpoch]'s
	// grammar; a malformed one stops the stream as LastEventID does).
	// Afterwards the stream sends the epoch of the last id it received.
	Epoch string
	// Session is the session the URL subscribes to: a live session_closed
	// event of this session ends the stream (a replayed one, from before
	// the session was reopened, does not). Empty: taken from a URL path
	// ending in /session/{id}/events or /session/{id}/ws.
	Session string
	// Client is the client id the stream attaches as, for presence
	// (?client=): its reconnects within the server's presence grace show
	// no leave and join. Empty: anonymous. [StreamURL] puts it on the URL.
	Client string
	// Presence asks for presence frames (?presence=1): they arrive from
	// Next as events of type frame.TypePresence (no id), and
	// [Stream.Presence] holds the last.
	Presence bool
}

// StreamURL returns rawURL with the query parameters o asks for — client
// (o.Client) and presence=1 (o.Presence) — set, replacing those rawURL
// has; rawURL as is when o asks for neither or does not parse. The SSE and
// WebSocket clients connect to it.
func StreamURL(rawURL string, o StreamOptions) string {
	if o.Client == "" && !o.Presence {
		return rawURL
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	q := u.Query()
	if o.Client != "" {
		q.Set("client", o.Client)
	}
	if o.Presence {
		q.Set("presence", "1")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Canceller is a [Transport] that can send a cancel for its stream's
// session: [Stream.Cancel] uses it. The SSE client posts to the cancel
// route, the WebSocket client sends the cancel message on its connection.
type Canceller interface {
	// Cancel sends c and returns the server's answer: the turns cancelled
	// and held, or a [*StatusError] (404, 409 turn_ended, 403, …).
	Cancel(ctx context.Context, c CancelRequest) (eventbus.CancelResult, error)
}

// Backoff is when a [Stream] retries.
type Backoff struct {
	// Retry is the reconnection delay until the server says another; zero
	// means DefaultClientRetry (3 s).
	Retry time.Duration
	// MaxBackoff caps the delay after consecutive failures; zero means
	// DefaultMaxBackoff (30 s).
	MaxBackoff time.Duration
	// RestartGrace is how long a 404 from a restarted server is retried,
	// counted from the first such 404 (the last retry is at its end);
	// zero means DefaultRestartGrace (30 s), negative never.
	RestartGrace time.Duration
}

// Stream is one logical subscription that survives dropped connections,
// the same over SSE and WebSocket. Create it with sse.Client.Subscribe or
// ws.Client.Subscribe (or [NewStream]); read it with [Stream.Next] from one
// goroutine; end it with [Stream.Close] or by cancelling its context.
//
// Each connect resumes with the cursor of the last frame that carried one
// — synthetic and targeted frames never move it; the [TypeStreamStart]
// frame of a live-only stream sets it — and the epoch that came with it,
// so the server replays exactly what was missed, or answers
// state_resync_required{epoch_reset} after a restart. After a dropped
// connection (network error, end of the response, client_evicted and the
// server's close, WebSocket 1001, 1008 "slow consumer", 1013) it waits
// and reconnects: the retry delay (the server's, or Backoff.Retry) doubled
// per consecutive failure up to Backoff.MaxBackoff, drawn uniformly from
// [d/2, d]; failures reset once a connection delivers a frame.
//
// Answers that are retried (transient): any 5xx, 408, 429, and a 404 from
// a restarted server (its X-Event-Epoch differs from the one the stream
// knew) for up to Backoff.RestartGrace — no wait runs past the grace, so a
// session that does not come back stops the stream with the 404 within
// RestartGrace of the first one (plus one request). A Retry-After on any of them is a
// floor: the wait is drawn uniformly from [Retry-After, Retry-After +
// max(d, Retry-After)/2], so clients told the same Retry-After do not come
// back in the same instant.
//
// The stream stops for good, and Next returns the reason from then on:
// [eventbus.ErrSessionClosed] after the live session_closed event of its
// own session (the event itself is returned first; a replayed one — a
// session closed and reopened with CreateSession keeps it in its buffer —
// passes like any event), a [*StatusError] for any other refused connect
// (400, 401, 403, 404 from a server that did not restart, 405, 410, …),
// the Err of a [*PermanentError], the context's error, or
// [ErrStreamClosed].
type Stream struct {
	t       Transport
	b       Backoff
	ctx     context.Context
	cancel  context.CancelFunc
	session string

	conn      Conn // nil while disconnected
	lastID    string
	epoch     string // the epoch of lastID
	connEpoch string // the epoch the current connection announced
	retry     time.Duration
	failures  int
	minWait   time.Duration // Retry-After from the last failure
	waitNext  bool          // a reconnect must wait first
	since404  time.Time     // first 404 of a restarted server in a row; zero: none
	graceEnd  time.Time     // since404 + RestartGrace: no wait runs past it
	err       error         // terminal

	mu       sync.Mutex
	closed   bool
	connects int
	presence *frame.PresenceData // the last presence frame; nil before any
}

// NewStream returns a Stream over t for the subscribe URL rawURL (used
// only to find the session when o.Session is empty). It does not connect:
// the first [Stream.Next] does. The stream ends when ctx ends.
func NewStream(ctx context.Context, t Transport, rawURL string, o StreamOptions, b Backoff) *Stream {
	ctx, cancel := context.WithCancel(ctx)
	s := &Stream{t: t, b: b, ctx: ctx, cancel: cancel, lastID: o.LastEventID, epoch: o.Epoch, session: o.Session, retry: b.Retry}
	if s.retry <= 0 {
		s.retry = DefaultClientRetry
	}
	if s.session == "" {
		s.session = sessionFromURL(rawURL)
	}
	return s
}

// Next returns the next frame as an eventbus.Event: published events
// (ID > 0, Replay set for replayed ones) and synthetic and targeted frames
// (ID 0) alike, in stream order. It blocks until a frame arrives,
// reconnecting as often as needed, or until the stream stops; then it
// returns the reason (see [Stream]). Next must not be called concurrently
// with itself.
func (s *Stream) Next() (eventbus.Event, error) {
	for {
		if s.err != nil {
			return eventbus.Event{}, s.err
		}
		if s.conn == nil {
			s.connect()
			continue
		}
		f, err := s.conn.Read(s.ctx)
		if err != nil {
			s.disconnect()
			s.stopFor(err)
			continue
		}
		if f.Retry > 0 {
			s.retry = f.Retry
		}
		if f.Cursor != "" {
			// The epoch is taken with every cursor, even one whose text
			// the stream already had: after a restart the new history's
			// ids start again at 1, and its "3" is not the old one's.
			s.lastID = f.Cursor
			if f.Epoch != "" {
				s.epoch = f.Epoch
			} else if s.connEpoch != "" {
				s.epoch = s.connEpoch
			}
		}
		s.failures = 0
		if f.Start {
			continue // where a live-only stream starts: not an event
		}
		ev := f.Event
		if ep, ok := epochReset(ev); ok {
			// The server restarted: the old cursor means nothing in its
			// history. The stream is at the start of the new epoch (id
			// 0, so that a resume before the next id replays all of it,
			// never skipping its first ids), and Epoch says so already.
			s.lastID, s.epoch = "0", ep
		}
		if ev.Type == frame.TypePresence && ev.ID == 0 {
			var p frame.PresenceData
			if json.Unmarshal(ev.Data, &p) == nil {
				s.mu.Lock()
				s.presence = &p
				s.mu.Unlock()
			}
		}
		if ev.Type == frame.TypeSessionClosed && ev.ID != 0 && !ev.Replay && s.session != "" && ev.Session == s.session {
			s.disconnect()
			s.fail(eventbus.ErrSessionClosed)
		}
		return ev, nil
	}
}

// LastEventID returns the cursor the stream resumes from: the cursor of
// the last frame that carried one, in the server's form (possibly
// epoch-qualified), "0" from a state_resync_required{epoch_reset} frame
// until the next one (the start of the new epoch), or
// StreamOptions.LastEventID before any. Call it from the goroutine that
// calls Next.
func (s *Stream) LastEventID() string { return s.lastID }

// Epoch returns the bus epoch of [Stream.LastEventID]: the one its frame
// or connection announced — the new one as soon as Next has handed out a
// state_resync_required{epoch_reset} frame — or StreamOptions.Epoch before
// any. Call it from the goroutine that calls Next.
func (s *Stream) Epoch() string { return s.epoch }

// epochReset reports whether ev is a state_resync_required{epoch_reset}
// frame, and the new epoch it names.
func epochReset(ev eventbus.Event) (string, bool) {
	if ev.ID != 0 || ev.Type != frame.TypeStateResyncRequired {
		return "", false
	}
	var d frame.ResyncData
	if json.Unmarshal(ev.Data, &d) != nil || d.Reason != frame.ReasonEpochReset || d.Epoch == "" {
		return "", false
	}
	return d.Epoch, true
}

// Presence returns the session's presence as the last presence frame Next
// read said it (the clients attached, the agent status, the active turn),
// and false before the first: the stream asks for them with
// StreamOptions.Presence, and each connect brings one first. Safe for
// concurrent use.
func (s *Stream) Presence() (frame.PresenceData, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.presence == nil {
		return frame.PresenceData{}, false
	}
	return *s.presence, true
}

// Cancel asks the server to cancel turns of the stream's session: c.Turn
// ("" every active turn), with c.Cascade those of its descendants too. It
// returns the turns cancelled and held, or the refusal as a
// [*StatusError] (errors.Is matches eventbus.ErrTurnEnded,
// ErrSessionNotFound, ErrSessionClosed); each transport says how it
// sends it (sse.Client: a POST to the cancel route; ws.Client: the cancel
// message on the open connection); it returns errors.ErrUnsupported when the
// transport cannot. Safe for concurrent use, also with Next.
func (s *Stream) Cancel(ctx context.Context, c CancelRequest) (eventbus.CancelResult, error) {
	cc, ok := s.t.(Canceller)
	if !ok {
		return eventbus.CancelResult{}, fmt.Errorf("resume: the stream's transport cannot cancel: %w", errors.ErrUnsupported)
	}
	return cc.Cancel(ctx, c)
}

// Connects returns how many connects succeeded. Safe for concurrent use.
func (s *Stream) Connects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connects
}

// Close stops the stream: it cancels the connection in flight (unblocking
// a Next in another goroutine) and makes Next return [ErrStreamClosed].
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

// stopFor stops the stream when err (or the stream's context) says it
// must stop: the context's end, or a [*PermanentError]. It reports whether
// it did.
func (s *Stream) stopFor(err error) bool {
	var pe *PermanentError
	switch {
	case s.ctx.Err() != nil:
		s.fail(s.stopErr())
	case errors.As(err, &pe):
		s.fail(pe.Err)
	default:
		return false
	}
	return true
}

func (s *Stream) fail(err error) {
	if s.err == nil {
		s.err = err
		s.cancel()
	}
}

func (s *Stream) disconnect() {
	if s.conn != nil {
		_ = s.conn.Close()
		s.conn = nil
	}
	s.waitNext = true
}

// connect waits if a reconnect is due, then makes one attempt. It leaves
// s.conn set on success, s.err set when the stream must stop, and neither
// when it should try again.
func (s *Stream) connect() {
	if s.ctx.Err() != nil {
		s.fail(s.stopErr())
		return
	}
	if s.waitNext && !s.sleep(s.backoff()) {
		s.fail(s.stopErr())
		return
	}
	s.waitNext = true // every later attempt waits
	s.minWait = 0
	conn, epoch, err := s.t.Connect(s.ctx, s.lastID, s.epoch)
	if err != nil {
		var se *StatusError
		switch {
		case s.stopFor(err):
		case errors.As(err, &se) && !s.transient(se):
			s.fail(se)
		case se != nil:
			s.failures++
			s.minWait = se.RetryAfter
		default:
			s.failures++
		}
		return
	}
	s.since404, s.graceEnd = time.Time{}, time.Time{}
	// The epoch goes with the cursor: it is adopted only when a frame with
	// a cursor arrives on this connection (see Next). Adopting it at once
	// would pair a new server's epoch with the old server's cursor should
	// the connection drop before its first id, and the next resume would
	// then skip the new server's first events without an epoch_reset.
	s.connEpoch = epoch
	s.mu.Lock()
	s.connects++
	s.mu.Unlock()
	s.failures++ // undone by the first frame
	s.conn = conn
}

// transient reports whether a refused connect is worth another attempt
// (see [Stream]).
func (s *Stream) transient(se *StatusError) bool {
	switch code := se.Status; {
	case code >= 500, code == http.StatusTooManyRequests, code == http.StatusRequestTimeout:
		return true
	case code != http.StatusNotFound:
		return false
	}
	grace := s.b.RestartGrace
	if grace == 0 {
		grace = DefaultRestartGrace
	}
	known := s.connEpoch
	if known == "" {
		known = s.epoch
	}
	if grace < 0 || known == "" || se.Epoch == "" || se.Epoch == known {
		return false // no restart: the session really is not there
	}
	if s.since404.IsZero() {
		s.since404 = time.Now()
		s.graceEnd = s.since404.Add(grace)
	}
	return time.Now().Before(s.graceEnd)
}

// backoff returns the jittered wait before the next connect. While a
// restarted server's 404s are being retried, the wait ends at the latest
// when the grace does: the last attempt is made at its end, so the stream
// stops within RestartGrace (plus one request) of the first 404 rather
// than a whole backoff step later.
func (s *Stream) backoff() time.Duration {
	maxB := s.b.MaxBackoff
	if maxB <= 0 {
		maxB = DefaultMaxBackoff
	}
	d := backoff.Delay(s.retry, maxB, s.failures, s.minWait)
	if !s.since404.IsZero() {
		d = min(d, max(time.Until(s.graceEnd), 0))
	}
	return d
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

// sessionFromURL returns {id} from a path ending in /session/{id}/events
// or /session/{id}/ws.
func sessionFromURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	segs := strings.Split(strings.TrimSuffix(u.EscapedPath(), "/"), "/")
	n := len(segs)
	if n < 3 || segs[n-1] != "events" && segs[n-1] != "ws" || segs[n-3] != "session" {
		return ""
	}
	id, err := url.PathUnescape(segs[n-2])
	if err != nil {
		return ""
	}
	return id
}
