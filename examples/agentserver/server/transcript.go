package server

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/scope"
)

// Transcript keeps, for every session of one session tree, the text of its
// agent_message_chunk events as the bus delivers them, and offers it as
// the bus's snapshot provider (eventbus.Options.Snapshots): a page whose
// position was lost, or that asks with ?snapshot=1, gets the transcript as
// of an id and then the events after it. Safe for concurrent use.
type Transcript struct {
	mu     sync.Mutex
	text   map[string]string // session → its chunks' text
	parent map[string]string // session → parent, learnt at its first event
	root   string
	asOf   uint64 // the last id read: every event of the tree up to it is in text
	broken bool   // a gap was announced: the transcript is no longer whole
}

// NewTranscript returns an empty transcript; [Transcript.Follow] fills it.
func NewTranscript() *Transcript {
	return &Transcript{text: map[string]string{}, parent: map[string]string{}}
}

// errNoTranscript makes the bus go on without a snapshot.
var errNoTranscript = errors.New("agentserver: no whole transcript for this session")

// Follow subscribes to root's session tree (a descendants subscriber,
// root created if need be) and returns read, which reads every event of
// the tree into the transcript until ctx ends or the bus closes. Call
// Follow before anything is published to the tree, and run read on a
// goroutine of its own.
func (t *Transcript) Follow(ctx context.Context, bus *eventbus.Bus, root string) (read func() error, err error) {
	sub, err := bus.Subscribe(ctx, root, eventbus.SubscribeOptions{Scope: scope.Descendants, MaxQueued: 1_000_000, Name: "transcript"})
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
			if ev.Type == "state_resync_required" {
				t.broken = true
			}
		case ev.Type == "agent_message_chunk":
			var d struct {
				Update struct {
					Content struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"update"`
			}
			if json.Unmarshal(ev.Data, &d) == nil {
				t.text[ev.Session] += d.Update.Content.Text
			}
		}
		if ev.ID != 0 {
			t.learn(bus, ev.Session)
			t.asOf = ev.ID
		}
		t.mu.Unlock()
	}
	return nil
}

// Snapshot is the bus's snapshot provider: {"text": {session: text}} for
// session and every session below it that has text, as of the last id
// Follow read. A session outside the followed tree, or a transcript with
// a gap, has none (the bus then announces the loss as usual).
func (t *Transcript) Snapshot(_ context.Context, session string) (json.RawMessage, uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.root == "" || t.broken || !t.within(session, t.root) {
		return nil, 0, errNoTranscript
	}
	text := map[string]string{}
	for s, tx := range t.text {
		if t.within(s, session) {
			text[s] = tx
		}
	}
	state, err := json.Marshal(map[string]any{"text": text})
	return state, t.asOf, err
}

// within reports whether s is anc or lies below it, by the parents
// recorded when each session's first event was read.
func (t *Transcript) within(s, anc string) bool {
	for range 64 { // the bus's depth bound
		if s == anc {
			return true
		}
		p, ok := t.parent[s]
		if !ok || p == "" {
			return false
		}
		s = p
	}
	return false
}

// learn records the parent of a session seen for the first time.
func (t *Transcript) learn(bus *eventbus.Bus, session string) {
	if _, ok := t.parent[session]; ok {
		return
	}
	t.parent[session] = ""
	for _, in := range bus.Sessions() {
		if in.ID == session {
			t.parent[session] = in.Parent
		}
	}
}
