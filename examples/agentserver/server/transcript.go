package server

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"unicode/utf8"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// Transcript bounds, the defaults of [TranscriptOptions].
const (
	// DefaultTranscriptSessions is how many sessions' text a Transcript
	// keeps at once.
	DefaultTranscriptSessions = 256
	// DefaultTranscriptBytes is how much text a Transcript keeps per
	// session: its newest 64 KiB.
	DefaultTranscriptBytes = 64 << 10
)

// TranscriptOptions bound a [Transcript]. The zero value is valid.
type TranscriptOptions struct {
	// MaxSessions is how many sessions' text the transcript keeps at once;
	// zero means DefaultTranscriptSessions. A session that begins while
	// that many are kept has no text kept, and a snapshot whose scope
	// covers it is refused (the bus then announces the loss as usual),
	// until it closes or expires.
	MaxSessions int
	// MaxBytes is how much of each session's text is kept: beyond it the
	// oldest text goes, and the snapshot says how many bytes ("cut");
	// zero means DefaultTranscriptBytes.
	MaxBytes int
}

// Transcript keeps, for the open sessions of one session tree, the text of
// their agent_message_chunk events as the bus delivers them, and offers
// it as the bus's snapshot provider (eventbus.Options.Snapshots): a page
// whose position was lost, or that asks with ?snapshot=1, gets the
// transcript of the sessions its scope covers as of an id, and then the
// events after it. It is bounded: a session leaves when it is closed or
// expires, and TranscriptOptions caps the sessions and the text kept.
// Safe for concurrent use.
type Transcript struct {
	o TranscriptOptions

	mu       sync.Mutex
	sessions map[string]*transcriptEntry // the open sessions of the tree seen so far
	kept     int                         // entries whose text is kept (≤ MaxSessions)
	bytes    int                         // text held, all sessions
	root     string
	asOf     uint64 // the last id read: every event of the tree up to it is in sessions
	broken   bool   // a gap was announced: the transcript is no longer whole
}

// transcriptEntry is one session of the tree.
type transcriptEntry struct {
	parent string
	text   []byte // its newest text, at most MaxBytes
	cut    int64  // bytes of its oldest text left out for MaxBytes
	whole  bool   // its text is kept: it began while fewer than MaxSessions were
}

// TranscriptStats are a Transcript's figures: what it holds now.
type TranscriptStats struct {
	Sessions int `json:"sessions"` // open sessions of the tree it knows
	Kept     int `json:"kept"`     // of which it keeps the text (at most MaxSessions)
	Bytes    int `json:"bytes"`    // text held, all sessions (at most MaxSessions × MaxBytes)
}

// NewTranscript returns an empty transcript bounded by o; [Transcript.Follow]
// fills it.
func NewTranscript(o TranscriptOptions) *Transcript {
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultTranscriptSessions
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultTranscriptBytes
	}
	return &Transcript{o: o, sessions: map[string]*transcriptEntry{}}
}

// errNoTranscript makes the bus go on without a snapshot.
var errNoTranscript = errors.New("agentserver: no whole transcript for this scope")

// Follow subscribes to root's session tree (a descendants subscriber,
// root created if need be) and returns read, which reads every event of
// the tree into the transcript until ctx ends or the bus closes. Call
// Follow before anything is published to the tree, and run read on a
// goroutine of its own.
func (t *Transcript) Follow(ctx context.Context, bus *eventbus.Bus, root string) (read func() error, err error) {
	sub, err := bus.Subscribe(ctx, root, eventbus.SubscribeOptions{Scope: scope.Descendants,
		MaxQueued: 1_000_000, MaxQueuedBytes: 64 << 20, Name: "transcript"})
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.root = root
	t.mu.Unlock()
	return func() error {
		defer sub.Close()
		return t.read(ctx, bus, sub)
	}, nil
}

// read is Follow's loop.
func (t *Transcript) read(ctx context.Context, bus *eventbus.Bus, sub *eventbus.Subscription) error {
	for ev, err := range sub.All(ctx) {
		if err != nil {
			return err
		}
		t.mu.Lock()
		switch {
		case ev.ID == 0:
			if ev.Type == frame.TypeStateResyncRequired {
				t.broken = true
			}
		case ev.Type == frame.TypeSessionClosed:
			t.leave(ev.Session)
		default:
			e := t.learn(bus, ev.Session)
			if ev.Type == "agent_message_chunk" && e.whole {
				var d struct {
					Update struct {
						Content struct {
							Text string `json:"text"`
						} `json:"content"`
					} `json:"update"`
				}
				if json.Unmarshal(ev.Data, &d) == nil {
					t.add(e, d.Update.Content.Text)
				}
			}
		}
		if ev.ID != 0 {
			t.asOf = ev.ID
		}
		t.mu.Unlock()
	}
	return nil
}

// add appends text to e's, keeping at most MaxBytes of the newest: when
// over, it cuts to three quarters (so that a long reply is not copied
// at every chunk), at a UTF-8 boundary.
func (t *Transcript) add(e *transcriptEntry, text string) {
	e.text = append(e.text, text...)
	t.bytes += len(text)
	if len(e.text) <= t.o.MaxBytes {
		return
	}
	drop := len(e.text) - t.o.MaxBytes*3/4
	for drop < len(e.text) && !utf8.RuneStart(e.text[drop]) {
		drop++
	}
	e.text = append(e.text[:0:0], e.text[drop:]...)
	e.cut += int64(drop)
	t.bytes -= drop
}

// learn returns session's entry, creating it (with its parent, from the
// bus) the first time an event of session is read. Sessions that no
// longer exist (expired) leave first, so that the cap counts open ones.
func (t *Transcript) learn(bus *eventbus.Bus, session string) *transcriptEntry {
	if e, ok := t.sessions[session]; ok {
		return e
	}
	for id := range t.sessions {
		if id != session && !bus.SessionExists(id) {
			t.leave(id) // expired (a closed one left at its session_closed)
		}
	}
	e := &transcriptEntry{whole: t.kept < t.o.MaxSessions}
	if e.whole {
		t.kept++
	}
	for _, in := range bus.Sessions() {
		if in.ID == session {
			e.parent = in.Parent
			break
		}
	}
	t.sessions[session] = e
	return e
}

// leave forgets session; its children move up to its parent, as the bus
// moves them.
func (t *Transcript) leave(session string) {
	e, ok := t.sessions[session]
	if !ok {
		return
	}
	delete(t.sessions, session)
	if e.whole {
		t.kept--
	}
	t.bytes -= len(e.text)
	for _, c := range t.sessions {
		if c.parent == session {
			c.parent = e.parent
		}
	}
}

// Stats returns what the transcript holds now.
func (t *Transcript) Stats() TranscriptStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return TranscriptStats{Sessions: len(t.sessions), Kept: t.kept, Bytes: t.bytes}
}

// transcriptState is a snapshot's state: the text of each session in
// scope, and for those whose oldest text was cut (MaxBytes), how many
// bytes went.
type transcriptState struct {
	Text map[string]string `json:"text"`
	Cut  map[string]int64  `json:"cut,omitempty"`
}

// Snapshot is the bus's snapshot provider: {"text": {session: text},
// "cut"?: {session: bytes}} for the open sessions of sc around
// session (itself; it and the sessions below it; itself, its parent
// and its siblings), as of the last id Follow read. It refuses (the bus
// then announces the loss as usual) the all scope and a session outside
// the followed tree, a scope covering a session whose text is not kept
// (MaxSessions), and any scope once a gap was announced to the
// transcript.
func (t *Transcript) Snapshot(_ context.Context, session string, sc scope.Kind) (json.RawMessage, uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.root == "" || t.broken || sc == scope.All || !t.within(session, t.root) {
		return nil, 0, errNoTranscript
	}
	st := transcriptState{Text: map[string]string{}}
	for s, e := range t.sessions {
		if !t.covers(session, sc, s, e) {
			continue
		}
		if !e.whole {
			return nil, 0, errNoTranscript
		}
		if len(e.text) > 0 {
			st.Text[s] = string(e.text)
		}
		if e.cut > 0 {
			if st.Cut == nil {
				st.Cut = map[string]int64{}
			}
			st.Cut[s] = e.cut
		}
	}
	state, err := json.Marshal(st)
	return state, t.asOf, err
}

// covers reports whether a subscription of req hears session s (entry e).
func (t *Transcript) covers(session string, sc scope.Kind, s string, e *transcriptEntry) bool {
	switch sc {
	case scope.Descendants:
		return t.within(s, session)
	case scope.Subtree:
		if s == session {
			return true
		}
		me, ok := t.sessions[session]
		return ok && me.parent != "" && (s == me.parent || e.parent == me.parent)
	}
	return s == session
}

// within reports whether s is anc or lies below it, by the parents
// recorded when each session's first event was read.
func (t *Transcript) within(s, anc string) bool {
	for range 64 { // the bus's depth bound
		if s == anc {
			return true
		}
		e, ok := t.sessions[s]
		if !ok || e.parent == "" {
			return false
		}
		s = e.parent
	}
	return false
}
