package sse

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/internal/textutil"
)

// Client opens resumable SSE streams to a replaybus [Handler] (or any SSE
// endpoint): the SSE transport under the resume protocol's client loop
// ([resume.Stream]), the Go form of the seed SDK's parseSseStream plus its
// reconnect loop. The zero value is ready to use; a Client is safe for
// concurrent use and may open any number of streams. Its fields must not
// be changed while streams are open.
type Client struct {
	// HTTPClient makes the requests; nil means http.DefaultClient. Its
	// Timeout must be zero (a timeout would cut every long stream).
	HTTPClient *http.Client
	// Header holds extra request headers (authorization, say) sent on every
	// connect. Accept, Cache-Control, Last-Event-ID and X-Event-Epoch are
	// set by the stream. One no HTTP client can send (a CR or LF in a
	// value, a space in a name) stops the stream, naming it.
	Header http.Header
	// Retry is the reconnection delay until the server sends retry:;
	// zero means resume.DefaultClientRetry (3 s).
	Retry time.Duration
	// MaxBackoff caps the delay between reconnects after consecutive
	// failures; zero means resume.DefaultMaxBackoff (30 s).
	MaxBackoff time.Duration
	// RestartGrace is how long a stream retries a 404 that comes from a
	// restarted server (an X-Event-Epoch other than the one the stream
	// knew: an in-memory server has not recreated the session yet),
	// counted from the first such 404. Zero means
	// resume.DefaultRestartGrace (30 s); negative: never retry a 404.
	RestartGrace time.Duration
	// MaxFrameBytes bounds one line and one frame's data; zero means
	// resume.DefaultMaxFrameBytes (16 MiB).
	MaxFrameBytes int
	// CancelURL returns the URL [resume.Stream.Cancel] posts to for a
	// stream of streamURL. Nil: the stream's URL with its last path
	// segment "events" replaced by "cancel" and no query
	// (http://host/session/s1/events?scope=all → http://host/session/s1/cancel,
	// turns.CancelPattern); a URL of another form makes Cancel fail,
	// naming it.
	CancelURL func(streamURL string) string
}

// Stream is one logical SSE subscription that survives dropped
// connections: [resume.Stream] over SSE. Reconnection follows EventSource:
// Last-Event-ID is the id: of the last frame that carried one, the epoch
// goes in X-Event-Epoch, the server's retry: line sets the base delay; a
// 200 that is not text/event-stream and a frame over Client.MaxFrameBytes
// stop it (a [*resume.StatusError] with code invalid_content_type, and
// [ErrFrameTooLarge]). See [resume.Stream] for what is retried and what
// stops it.
type Stream = resume.Stream

// StreamOptions configure one [Client.Subscribe]: the starting cursor, its
// epoch and the session; see [resume.StreamOptions].
type StreamOptions = resume.StreamOptions

// Subscribe returns a Stream for url (for example
// "http://host/session/s1/events?scope=descendants"), with ?client= and
// ?presence=1 as opts asks ([resume.StreamURL]). It does not connect:
// the first [resume.Stream.Next] does. The stream ends when ctx ends. A url
// that is not http:// or https:// with a host stops the stream at its
// first Next, with an error naming it. Its Cancel posts to the session's
// cancel route (see [Client.CancelURL]).
func (c *Client) Subscribe(ctx context.Context, url string, opts StreamOptions) *Stream {
	b := resume.Backoff{Retry: c.Retry, MaxBackoff: c.MaxBackoff, RestartGrace: c.RestartGrace}
	url = resume.StreamURL(url, opts)
	return resume.NewStream(ctx, &transport{c: c, url: url}, url, opts, b)
}

// Subscribe is [Client.Subscribe] on a zero Client.
func Subscribe(ctx context.Context, url string, opts StreamOptions) *Stream {
	return new(Client).Subscribe(ctx, url, opts)
}

// transport is the SSE [resume.Transport]: one GET per connect.
type transport struct {
	c   *Client
	url string
}

// Connect makes one request with the cursor as Last-Event-ID and its epoch
// as X-Event-Epoch. A request no HTTP client can send — a URL that is not
// http:// or https:// with a host, a header (Client.Header, or a cursor
// or epoch from StreamOptions) with a CR, LF or other control character —
// is a *resume.PermanentError naming it: net/http refuses it before any
// network, and no retry would mend it. The cursor's grammar is the
// server's to check (a replaybus server answers 400 naming it).
func (t *transport) Connect(ctx context.Context, cursor, epoch string) (resume.Conn, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return nil, "", &resume.PermanentError{Err: fmt.Errorf("sse: %w", err)}
	}
	if u := req.URL; u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, "", &resume.PermanentError{Err: fmt.Errorf("sse: URL %q: want http:// or https:// and a host", t.url)}
	}
	if err := textutil.CheckHeader(t.c.Header); err != nil {
		return nil, "", &resume.PermanentError{Err: fmt.Errorf("sse: Client.Header: %w", err)}
	}
	if err := textutil.CheckHeader(http.Header{"Last-Event-ID": {cursor}, resume.HeaderEpoch: {epoch}}); err != nil {
		return nil, "", &resume.PermanentError{Err: fmt.Errorf("sse: StreamOptions: %w", err)}
	}
	for k, v := range t.c.Header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if cursor != "" {
		req.Header.Set("Last-Event-ID", cursor)
	}
	if epoch != "" {
		req.Header.Set(resume.HeaderEpoch, epoch)
	}
	hc := t.c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		se := resume.ReadStatusError(resp)
		_ = resp.Body.Close()
		return nil, "", se
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		_ = resp.Body.Close()
		return nil, "", &resume.PermanentError{Err: &resume.StatusError{Status: resp.StatusCode, Code: "invalid_content_type",
			Message: fmt.Sprintf("want text/event-stream, got %q", resp.Header.Get("Content-Type"))}}
	}
	dec := NewDecoder(resp.Body)
	dec.SetMaxFrameBytes(t.c.MaxFrameBytes)
	dec.setLastEventID(cursor)
	return &conn{body: resp.Body, dec: dec}, resp.Header.Get(resume.HeaderEpoch), nil
}

// conn is one SSE response being read.
type conn struct {
	body io.ReadCloser
	dec  *Decoder
}

// Read decodes the next frame; the request's context ends the body.
func (c *conn) Read(context.Context) (resume.Frame, error) {
	f, err := c.dec.Next()
	if err != nil {
		if err == ErrFrameTooLarge {
			return resume.Frame{}, &resume.PermanentError{Err: err}
		}
		return resume.Frame{}, err
	}
	var out resume.Frame
	if r, ok := c.dec.Retry(); ok && r > 0 {
		out.Retry = r
	}
	if f.HasID {
		// Only a frame with an id: line moves the cursor (and so takes
		// this connection's epoch with it); the decoder's last id
		// carries over to frames without one, and before this
		// connection's first id it is still the old server's cursor.
		out.Cursor = c.dec.LastEventID()
	}
	out.Event, _ = DecodeEvent(f)
	out.Start = out.Event.ID == 0 && out.Event.Type == resume.TypeStreamStart && f.HasID
	return out, nil
}

// Close ends the response.
func (c *conn) Close() error { return c.body.Close() }
