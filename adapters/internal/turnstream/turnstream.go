package turnstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/replaybus/replaybus/adapters/internal/serve"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/codec"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/jsonmember"
	"github.com/replaybus/replaybus/internal/textutil"
)

// MaxQueued is the live queue of a turn stream's subscription: a turn of
// many deltas is read as fast as the client takes it; a client slower than
// that is evicted (drop_subscriber) and resumes.
const MaxQueued = 1 << 16

// Subscribe subscribes to session sessionID (which must exist) for a turn
// stream: from cursor (nil: live only, no replay).
func Subscribe(ctx context.Context, bus *eventbus.Bus, sessionID string, cursor *eventbus.Position) (*eventbus.Subscription, error) {
	o := eventbus.SubscribeOptions{Cursor: cursor, NoReplay: cursor == nil, RequireSession: true,
		MaxQueued: MaxQueued, Policy: eventbus.DropSubscriber, Name: "turnstream"}
	return bus.Subscribe(ctx, sessionID, o)
}

// Open subscribes to session sessionID from turn t's turn_start, which
// the bus must still hold whole: every event of the turn after its
// turn_start in the replay buffer (StrictCursor). A turn whose
// turn_start alone was evicted is rebuilt from t (lead: the turn_start
// event, to be read before sub's events). Errors: the bus's, and a 410
// ring_evicted *resume.StatusError naming the turn when events of it
// after its turn_start have left the buffer: half a turn would be a wrong
// message to the client.
func Open(ctx context.Context, bus *eventbus.Bus, sessionID string, t frame.TurnData) (sub *eventbus.Subscription, lead []eventbus.Event, err error) {
	sub, err = subscribeStrict(ctx, bus, sessionID, t.StartID-1)
	var lost *eventbus.PositionLostError
	if !errors.As(err, &lost) || lost.Reason != frame.ReasonRingEvicted {
		return sub, nil, err
	}
	if lost.CompleteFromID > t.StartID+1 {
		return nil, nil, turnLost(sessionID, t, lost)
	}
	// Only the turn_start itself is gone: what follows it is whole.
	sub, err = subscribeStrict(ctx, bus, sessionID, t.StartID)
	if errors.As(err, &lost) && lost.Reason == frame.ReasonRingEvicted {
		return nil, nil, turnLost(sessionID, t, lost)
	}
	if err != nil {
		return nil, nil, err
	}
	return sub, []eventbus.Event{StartEvent(sessionID, t)}, nil
}

// StartEvent is turn t's turn_start event as the bus wrote it, rebuilt
// from the turn's state.
func StartEvent(sessionID string, t frame.TurnData) eventbus.Event {
	data, _ := json.Marshal(frame.TurnData{Turn: t.Turn, Session: sessionID})
	return eventbus.Event{ID: t.StartID, Session: sessionID, Type: frame.TypeTurnStart, Data: data, Replay: true}
}

func subscribeStrict(ctx context.Context, bus *eventbus.Bus, sessionID string, after uint64) (*eventbus.Subscription, error) {
	o := eventbus.SubscribeOptions{Cursor: eventbus.At(after), StrictCursor: true, RequireSession: true,
		MaxQueued: MaxQueued, Policy: eventbus.DropSubscriber, Name: "turnstream"}
	return bus.Subscribe(ctx, sessionID, o)
}

// turnLost is the 410 ring_evicted answer to a turn whose first events
// the replay buffer no longer holds.
func turnLost(sessionID string, t frame.TurnData, lost *eventbus.PositionLostError) error {
	return &resume.StatusError{Status: http.StatusGone, Code: resume.CodeRingEvicted,
		Message: fmt.Sprintf("turn %s started at event %d; the replay buffer holds session %s only from event %d on: the turn cannot be streamed from its start",
			textutil.Quote(t.Turn, 48), t.StartID, textutil.Quote(sessionID, 48), lost.CompleteFromID)}
}

// Reader reads the events of one turn from a subscription: nothing before
// the turn's turn_start (unless Started), the turn's events, and its
// turn_end last. The bus's own frames and turn_cancel records are
// skipped (the turn_end says the cancel).
type Reader struct {
	Sub *eventbus.Subscription
	// Turn is the turn read; "" takes the first turn_start seen.
	Turn string
	// Started: the subscription starts inside the turn.
	Started bool
	// Lead is read before Sub's events (Open's rebuilt turn_start).
	Lead    []eventbus.Event
	ended   bool
	pending []eventbus.Event
}

// ErrEvicted is the error of a turn stream whose subscription ended before
// the turn did (evicted as too slow, the session closed, the bus closed).
var ErrEvicted = errors.New("the stream's subscription ended before its turn")

// Next returns the turn's next events, at least one, waiting for the
// first: what is queued, up to 256. Once the turn_end has been returned
// it returns done true and nothing. Errors: ctx's, ErrEvicted wrapping
// the subscription's reason.
func (r *Reader) Next(ctx context.Context) (evs []eventbus.Event, done bool, err error) {
	r.pending = r.pending[:0]
	for len(r.pending) == 0 {
		if r.ended {
			return nil, true, nil
		}
		if len(r.Lead) > 0 {
			for _, ev := range r.Lead {
				r.take(ev)
			}
			r.Lead = nil
			continue
		}
		ev, err := r.Sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			return nil, false, fmt.Errorf("%w: %w", ErrEvicted, err)
		}
		r.take(ev)
		for len(r.pending) < 256 && !r.ended {
			ev, ok := r.Sub.TryNext()
			if !ok {
				break
			}
			r.take(ev)
		}
	}
	return r.pending, false, nil
}

func (r *Reader) take(ev eventbus.Event) {
	if ev.ID == 0 || r.ended || ev.Type == frame.TypeTurnCancel {
		return
	}
	if !r.Started {
		if ev.Type != frame.TypeTurnStart {
			return
		}
		t, ok := turnOf(ev)
		if !ok || r.Turn != "" && t != r.Turn {
			return
		}
		r.Turn, r.Started = t, true
	}
	if ev.Type == frame.TypeTurnEnd {
		if t, ok := turnOf(ev); ok && t == r.Turn {
			r.ended = true
		}
	}
	r.pending = append(r.pending, ev)
}

// turnOf returns the turn a turn_start or turn_end names.
func turnOf(ev eventbus.Event) (string, bool) {
	ps, ok := codec.Turns.Decode(nil, ev)
	if !ok || len(ps) == 0 {
		return "", false
	}
	return ps[0].Turn, true
}

// Cursor is a parsed frame id of package evframe: "<epoch>-<N>" (after
// event N) or "<epoch>-<N>:<k>" (after frame k of event N's).
type Cursor struct {
	Seq   uint64
	K     int
	Mid   bool
	Epoch string
}

// ParseCursor parses a Last-Event-ID of the frontend streams: "" is no
// cursor (ok false); a malformed one is 400 invalid_last_event_id naming
// it. An epoch other than the bus's, or a seq of 0, is no position here:
// ok false (the stream starts as a join).
func ParseCursor(s, epoch string) (c Cursor, ok bool, err error) {
	if s == "" {
		return c, false, nil
	}
	base, k, mid := strings.Cut(s, ":")
	if mid {
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 || n > 1<<20 || strconv.Itoa(n) != k {
			return c, false, badCursor(s, "the frame index after ':' is not a small decimal number")
		}
		c.K, c.Mid = n, true
	}
	p, err := resume.ParseCursor(base)
	if err != nil {
		why := strings.TrimPrefix(err.Error(), "resume: ")
		if ce := (*resume.CursorError)(nil); errors.As(err, &ce) {
			why = ce.Reason // the value is named once, by badCursor
		}
		return c, false, badCursor(s, why)
	}
	c.Seq, c.Epoch = p.ID, p.Epoch
	if p.Epoch != "" && p.Epoch != epoch || p.ID == 0 {
		return c, false, nil
	}
	return c, true, nil
}

func badCursor(s, why string) error {
	return &resume.StatusError{Status: http.StatusBadRequest, Code: resume.CodeInvalidLastEventID,
		Message: fmt.Sprintf("invalid Last-Event-ID %.64q: %s", s, why)}
}

// Locate returns the turn of session sessionID that event seq falls in:
// the active turn when it started at or before seq, else the last turn
// that started at or before seq, found in the session's replay buffer.
// ok false: no such turn.
func Locate(ctx context.Context, bus *eventbus.Bus, sessionID string, seq uint64) (frame.TurnData, bool, error) {
	if t, ok := bus.Turn(sessionID, ""); ok && t.StartID <= seq {
		return t, true, nil
	}
	sub, err := Subscribe(ctx, bus, sessionID, eventbus.At(0))
	if err != nil {
		return frame.TurnData{}, false, err
	}
	defer sub.Close()
	var found frame.TurnData
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			return frame.TurnData{}, false, err
		}
		if ev.ID == 0 {
			if ev.Type == frame.TypeReplayComplete {
				break
			}
			continue
		}
		if ev.ID > seq {
			if found.Turn == "" {
				// No turn_start held at or before seq: seq may still be
				// inside a turn whose start was evicted, which the first
				// turn boundary after it tells (a turn_end: inside it).
				return lostStart(ctx, bus, sessionID, sub, ev)
			}
			break
		}
		switch ev.Type {
		case frame.TypeTurnStart:
			if t, ok := turnOf(ev); ok {
				found = frame.TurnData{Turn: t, Session: sessionID, StartID: ev.ID}
			}
		case frame.TypeTurnEnd:
			if t, ok := turnOf(ev); ok && t == found.Turn {
				found.EndID = ev.ID
			}
		}
	}
	if found.Turn == "" {
		return found, false, nil
	}
	if full, ok := bus.Turn(sessionID, found.Turn); ok {
		return full, true, nil
	}
	return found, true, nil
}

// lostStart reads sub from ev (the first event after the cursor) to the
// first turn boundary: a turn_end is of a turn the cursor is inside,
// whose turn_start the replay buffer no longer holds — found, with the
// bus's record of it (its StartID) when it has one, so that Resume
// refuses it (410 ring_evicted) instead of a 204 that would leave the
// client with half a turn; a turn_start, or none, is no turn.
func lostStart(ctx context.Context, bus *eventbus.Bus, sessionID string, sub *eventbus.Subscription, ev eventbus.Event) (frame.TurnData, bool, error) {
	for {
		if ev.ID != 0 {
			switch ev.Type {
			case frame.TypeTurnStart:
				return frame.TurnData{}, false, nil
			case frame.TypeTurnEnd:
				t, ok := turnOf(ev)
				if !ok {
					return frame.TurnData{}, false, nil
				}
				if full, ok := bus.Turn(sessionID, t); ok {
					return full, true, nil
				}
				return frame.TurnData{Turn: t, Session: sessionID, StartID: 1, EndID: ev.ID}, true, nil
			}
		} else if ev.Type == frame.TypeReplayComplete {
			return frame.TurnData{}, false, nil
		}
		var err error
		if ev, err = sub.Next(ctx); err != nil {
			return frame.TurnData{}, false, err
		}
	}
}

// Encoder is what Resume primes: agui.Encoder and a2a.Encoder.
type Encoder interface {
	Skip(n int)
	Append(dst []byte, parts ...codec.Part) []byte
}

// Prime reads sub's replay up to its replay_complete and appends, with
// enc skipping every frame, the events of the turn whose first event is
// at or before limit (0: every one), lead's first (Open's). It returns
// the last event id read.
func Prime(ctx context.Context, sub *eventbus.Subscription, dec *codec.Set, enc Encoder, limit uint64, lead ...eventbus.Event) (uint64, error) {
	enc.Skip(-1)
	defer enc.Skip(0)
	var last uint64
	var parts []codec.Part
	for _, ev := range lead {
		last = ev.ID
		enc.Append(nil, dec.Decode(parts[:0], ev)...)
	}
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			return last, fmt.Errorf("%w: %w", ErrEvicted, err)
		}
		if ev.ID == 0 {
			if ev.Type == frame.TypeReplayComplete {
				return last, nil
			}
			continue
		}
		if ev.Type == frame.TypeTurnCancel || limit != 0 && first(ev) > limit {
			continue
		}
		last = ev.ID
		parts = dec.Decode(parts[:0], ev)
		enc.Append(nil, parts...)
	}
}

func first(ev eventbus.Event) uint64 {
	if ev.FirstID != 0 {
		return ev.FirstID
	}
	return ev.ID
}

// Resume prepares enc to continue turn t after cursor c: it subscribes
// the tail (the events after c, compacted, then live; a c after the bus's
// last id is an *eventbus.PositionLostError, epoch_reset; events after c
// evicted from the replay buffer, or the turn's first ones, are a 410
// ring_evicted *resume.StatusError: see Open), primes enc with
// the turn up to c from a second read of the replay buffer, and sets the
// skip of a cursor inside an event's frames. The caller writes the
// prologue, then reads the tail with a Reader{Turn: t.Turn, Started:
// true}.
func Resume(ctx context.Context, bus *eventbus.Bus, sessionID string, dec *codec.Set, enc Encoder, t frame.TurnData, c Cursor) (*eventbus.Subscription, error) {
	from := c.Seq
	if c.Mid {
		from--
	}
	// A cursor at or after the bus's next id (forged) is an epoch_reset
	// PositionLostError of the strict subscribe (after it waited for a
	// backend's feed to catch up with it).
	tail, err := subscribeStrict(ctx, bus, sessionID, from)
	var lost *eventbus.PositionLostError
	if errors.As(err, &lost) && lost.Reason == frame.ReasonRingEvicted {
		// Events after the cursor are gone: the rest of the turn would
		// have a hole.
		return nil, &resume.StatusError{Status: http.StatusGone, Code: resume.CodeRingEvicted,
			Message: fmt.Sprintf("the events after cursor %d have left the replay buffer (it holds session %s from event %d on): turn %s cannot be continued there",
				from, textutil.Quote(sessionID, 48), lost.CompleteFromID, textutil.Quote(t.Turn, 48))}
	}
	if err != nil {
		return nil, err
	}
	prime, lead, err := Open(ctx, bus, sessionID, t)
	if err != nil {
		tail.Close()
		return nil, err
	}
	_, err = Prime(ctx, prime, dec, enc, from, lead...)
	prime.Close()
	if err != nil {
		tail.Close()
		return nil, err
	}
	// The tail's replay_complete and any frame before it are skipped by
	// the Reader.
	if c.Mid {
		enc.Skip(c.K + 1)
	}
	return tail, nil
}

// Writer writes a stream's bytes, each write bounded and flushed.
type Writer struct {
	W       http.ResponseWriter
	Timeout time.Duration
	rc      *http.ResponseController
}

// Write writes b and flushes it.
func (w *Writer) Write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if w.rc == nil {
		w.rc = http.NewResponseController(w.W)
	}
	if w.Timeout > 0 {
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.Timeout))
	}
	if _, err := w.W.Write(b); err != nil {
		return err
	}
	return w.rc.Flush()
}

// DefaultMaxBodyBytes bounds a request body of the frontend routes: a
// chat's whole history travels with each of its messages.
const DefaultMaxBodyBytes = 4 << 20

// DefaultBodyTimeout bounds how long a request body of the frontend
// routes may take to arrive, as the cancel route's does.
const DefaultBodyTimeout = 10 * time.Second

// Object is an object of a request body that a route decodes: see
// jsonmember.Object.
type Object = jsonmember.Object

// twiceError is jsonmember.Find's finding as a 400 invalid_json, or nil.
func twiceError(b []byte, read []Object) error {
	f, ok := jsonmember.Find(b, read)
	switch {
	case !ok:
		return nil
	case f.Lone:
		return BadJSON("invalid JSON at byte %d: member %s (member names are case-sensitive: want %s)",
			f.At, textutil.Quote(f.Name, 48), textutil.Quote(f.First, 48))
	case f.Name != f.First:
		return BadJSON("invalid JSON at byte %d: member %s given twice (as %s: member names are matched regardless of case)",
			f.At, textutil.Quote(f.Name, 48), textutil.Quote(f.First, 48))
	}
	return BadJSON("invalid JSON at byte %d: member %s given twice", f.At, textutil.Quote(f.Name, 48))
}

// readAll reads r's body, at most max bytes, within timeout (> 0: a read
// deadline on the connection, cleared after a whole body; a body it cut
// leaves the connection to be closed), after serve.CheckJSONMedia.
func readAll(w http.ResponseWriter, r *http.Request, max int64, timeout time.Duration) ([]byte, error) {
	if err := serve.CheckJSONMedia(r); err != nil {
		return nil, err
	}
	rc := http.NewResponseController(w)
	if timeout > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(timeout)) // ErrNotSupported: nothing to bound
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err == nil && timeout > 0 {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return b, err
}

// ReadBody reads r's body, at most max bytes, within timeout (> 0): 415
// for a Content-Encoding or a body's Content-Type it cannot read (see
// serve.CheckJSONMedia), 413 body_too_large past max, 408 request_timeout for a
// body the deadline (or the server's own) cut, 400 invalid_json for a
// body that is not valid UTF-8 JSON or gives a member twice in one object
// (in another case too in the objects at the paths read, those the route
// decodes: see twice).
func ReadBody(w http.ResponseWriter, r *http.Request, max int64, timeout time.Duration, read ...Object) ([]byte, error) {
	b, err := readAll(w, r, max, timeout)
	if err != nil {
		return nil, bodyError(err, len(b), max)
	}
	if !json.Valid(b) {
		return nil, BadJSON("the body is not JSON: %s", textutil.Quote(string(b), 48))
	}
	if err := twiceError(b, read); err != nil {
		return nil, err
	}
	return b, nil
}

// BadJSON is a 400 invalid_json with the message format names.
func BadJSON(format string, args ...any) error {
	return &resume.StatusError{Status: http.StatusBadRequest, Code: resume.CodeInvalidJSON, Message: fmt.Sprintf(format, args...)}
}

// CheckSession refuses an id the bus would: 400 invalid_session_id
// naming it, what being the field it came from.
func CheckSession(what, id string) error {
	if err := frame.CheckName(what, id); err != nil {
		return &resume.StatusError{Status: http.StatusBadRequest, Code: resume.CodeInvalidSessionID, Message: "invalid argument: " + err.Error()}
	}
	return nil
}

// CheckSegment is CheckSession for an id that a resume route puts in a URL
// path segment ({api}/{chatId}/stream, {path}/{threadId}/stream): "." and
// ".." are refused too, since a client's URL parser removes them (a chat
// "." would be resumed at {api}/stream).
func CheckSegment(what, id string) error {
	if err := CheckSession(what, id); err != nil {
		return err
	}
	if id == "." || id == ".." {
		return &resume.StatusError{Status: http.StatusBadRequest, Code: resume.CodeInvalidSessionID,
			Message: fmt.Sprintf("%s %q is a dot segment: the resume URL could not carry it", what, id)}
	}
	return nil
}

// CheckOrigin refuses a request a browser page of another origin sent
// (403 forbidden_origin), as the cancel route does.
func CheckOrigin(co *http.CrossOriginProtection, r *http.Request) error {
	if err := co.Check(r); err != nil {
		return &resume.StatusError{Status: http.StatusForbidden, Code: resume.CodeForbiddenOrigin,
			Message: "cross-origin request refused: " + textutil.PublicMessage(err)}
	}
	return nil
}

// Ensure makes sure session id exists, creating it when the bus has
// never seen it (a chat id a client made up). A closed session stays
// closed: 410.
func Ensure(bus *eventbus.Bus, id string) error {
	if bus.SessionExists(id) {
		return nil
	}
	if bus.SessionClosed(id) {
		return resume.StatusFor(eventbus.ErrSessionClosed, id)
	}
	if err := bus.CreateSession(id, ""); err != nil {
		return resume.StatusFor(err, id)
	}
	return nil
}

// NoTurn answers 204: no turn to stream.
func NoTurn(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// ReadBodyOrEmpty is ReadBody that takes an empty body too (nil); a body
// whose read failed is its error (bodyError), not an empty one.
func ReadBodyOrEmpty(w http.ResponseWriter, r *http.Request, max int64, timeout time.Duration, read ...Object) ([]byte, error) {
	b, err := readAll(w, r, max, timeout)
	if err != nil {
		return nil, bodyError(err, len(b), max) // a cut body is not an empty one
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	if err := twiceError(b, read); err != nil {
		return nil, err
	}
	return b, nil
}

// bodyError is the answer to a body whose read failed with err after n
// bytes: 413 body_too_large past max; 408 request_timeout (Connection:
// close) when the server's read deadline cut it (a body that never
// finishes), as every body route answers it; else 400 invalid_json.
func bodyError(err error, n int, max int64) error {
	var mbe *http.MaxBytesError
	var se *resume.StatusError
	switch {
	case errors.As(err, &se): // serve.CheckJSONMedia's
		return se
	case errors.As(err, &mbe):
		return &resume.StatusError{Status: http.StatusRequestEntityTooLarge, Code: resume.CodeBodyTooLarge,
			Message: fmt.Sprintf("the body is over %d bytes", max)}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &resume.StatusError{Status: http.StatusRequestTimeout, Code: resume.CodeRequestTimeout,
			Message: fmt.Sprintf("the body did not arrive in time (%d bytes arrived)", n),
			Header:  http.Header{"Connection": {"close"}}}
	}
	return &resume.StatusError{Status: http.StatusBadRequest, Code: resume.CodeInvalidJSON,
		Message: "the body could not be read: " + textutil.PublicMessage(err)}
}

// Options is what every frontend handler resolves from its options' zero
// values: the codec (nil: codec.Default), the cross-origin check (nil: same
// origin only), the body bound (≤ 0: DefaultMaxBodyBytes), each write's
// deadline (0: 30 s, negative: none) and the body's (0:
// DefaultBodyTimeout, negative: none).
type Options struct {
	Codec        *codec.Set
	CrossOrigin  *http.CrossOriginProtection
	MaxBodyBytes int64
	WriteTimeout time.Duration
	BodyTimeout  time.Duration
}

// Resolve fills the zero values of a handler's options with the defaults
// Options names.
func Resolve(dec *codec.Set, co *http.CrossOriginProtection, max int64, wt, bt time.Duration) Options {
	if dec == nil {
		dec = codec.Default
	}
	if co == nil {
		co = http.NewCrossOriginProtection()
	}
	if max <= 0 {
		max = DefaultMaxBodyBytes
	}
	return Options{Codec: dec, CrossOrigin: co, MaxBodyBytes: max, WriteTimeout: serve.DurationOr(wt, 30*time.Second),
		BodyTimeout: serve.DurationOr(bt, DefaultBodyTimeout)}
}
