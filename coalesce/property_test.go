package coalesce_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// textKey identifies one text stream: a session's message or thought text.
type textKey struct{ session, typ string }

// client is a coalescing SSE-like client of the tree under "p": it keeps
// the last id it received and, on any announced gap, resumes from it.
type client struct {
	t       *rapid.T
	b       *eventbus.Bus
	o       eventbus.SubscribeOptions
	sub     *eventbus.Subscription
	last    uint64
	text    map[textKey]*strings.Builder
	ids     []uint64  // every id received, in order, across resumes
	texts   []textKey // parallel to ids: the stream the frame's text went to ("" typ: none)
	chunks  []string  // parallel to ids: the frame's text
	resumes int
}

func (c *client) resume() {
	if c.sub != nil {
		c.sub.Close()
	}
	o := c.o
	o.Cursor = nil
	if c.last > 0 {
		o.Cursor = eventbus.At(c.last)
	}
	sub, err := c.b.Subscribe(context.Background(), "p", o)
	if err != nil {
		c.t.Fatalf("resume from %d: %v", c.last, err)
	}
	c.sub = sub
	c.resumes++
}

// read takes up to n frames without blocking; false when it ran dry.
func (c *client) read(n int) bool {
	for range n {
		ev, ok := c.sub.TryNext()
		if !ok {
			if c.sub.Err() != nil { // evicted: resume
				c.resume()
				continue
			}
			return false
		}
		c.take(ev)
	}
	return true
}

// readUntil takes every frame that comes before deadline, waiting for
// them (a delta held in its throttle window comes when the window ends).
func (c *client) readUntil(deadline time.Time) {
	for {
		ev, err := c.sub.NextBefore(deadline)
		switch {
		case errors.Is(err, eventbus.ErrTimeout):
			return
		case err != nil: // evicted: resume
			c.resume()
		default:
			c.take(ev)
		}
	}
}

// take is the client's handling of one frame.
func (c *client) take(ev eventbus.Event) {
	if ev.ID == 0 {
		if ev.Type == frame.TypeStateResyncRequired || ev.Type == frame.TypeClientEvicted {
			c.resume() // a gap: fetch it from the replay buffer
		}
		return
	}
	if ev.ID <= c.last {
		c.t.Fatalf("id %d after %d: not strictly increasing", ev.ID, c.last)
	}
	c.last = ev.ID
	k, s := frameText(c.t, ev)
	c.ids, c.texts, c.chunks = append(c.ids, ev.ID), append(c.texts, k), append(c.chunks, s)
	if k.typ != "" {
		if c.text[k] == nil {
			c.text[k] = &strings.Builder{}
		}
		c.text[k].WriteString(s)
	}
}

func frameText(t *rapid.T, ev eventbus.Event) (textKey, string) {
	if ev.Type != "agent_message_chunk" && ev.Type != "agent_thought_chunk" {
		return textKey{}, ""
	}
	var d struct {
		Update struct{ Content struct{ Text string } }
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatalf("frame %d: %v", ev.ID, err)
	}
	return textKey{ev.Session, ev.Type}, d.Update.Content.Text
}

// TestPropertyCoalescedTextEqualsPublished: for random interleavings of
// sessions (a parent, a child, a grandchild, read with a descendants
// scope), types (text, thought, passthrough, plan), reads, resumes and
// drops (tiny live queues under every overflow policy), with and without a
// throttle (a resume drops what the consumer held; the replay brings it
// back), the text a
// coalescing client receives per session and type is exactly the text
// published; ids strictly increase across resumes; and resuming from any
// id it received never repeats text (what it held up to that id plus what
// the resume brings is, again, exactly what was published).
func TestPropertyCoalescedTextEqualsPublished(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		b, err := eventbus.New(eventbus.Options{ReplayBufferSize: 100_000})
		require.NoError(rt, err)
		defer b.Close()
		require.NoError(rt, b.CreateSession("p", ""))
		require.NoError(rt, b.CreateSession("c", "p"))
		require.NoError(rt, b.CreateSession("g", "c"))

		set := rapid.SampledFrom([]*coalesce.Set{coalesce.ACP, coalesce.AgentPool}).Draw(rt, "rules")
		o := eventbus.SubscribeOptions{Scope: scope.Descendants, Coalesce: set,
			MaxQueued:         rapid.IntRange(1, 8).Draw(rt, "maxQueued"),
			Policy:            rapid.SampledFrom([]eventbus.OverflowPolicy{eventbus.DropNewest, eventbus.DropOldest, eventbus.DropSubscriber}).Draw(rt, "policy"),
			SlowClientWarning: new(rapid.Bool().Draw(rt, "warn")),
			Throttle:          rapid.SampledFrom([]time.Duration{0, 0, time.Millisecond}).Draw(rt, "throttle"),
		}
		c := &client{t: rt, b: b, o: o, text: map[textKey]*strings.Builder{}}
		c.resume()
		defer func() { c.sub.Close() }()

		published := map[textKey]*strings.Builder{}
		sessions := []string{"p", "c", "g"}
		steps := rapid.IntRange(1, 80).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 9).Draw(rt, "action") {
			case 0, 1, 2, 3, 4: // publish
				s := rapid.SampledFrom(sessions).Draw(rt, "session")
				typ := rapid.SampledFrom([]string{"agent_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call", "plan"}).Draw(rt, "type")
				txt := rapid.StringMatching(`[a-z ]{0,4}`).Draw(rt, "text")
				u := map[string]any{"sessionUpdate": typ}
				switch typ {
				case "agent_message_chunk", "agent_thought_chunk":
					u["content"] = map[string]any{"type": "text", "text": txt}
				case "plan":
					u["entries"] = []any{map[string]any{"content": txt}}
				default:
					u["toolCallId"] = "t" + txt
				}
				_, err := b.Publish(s, typ, map[string]any{"sessionId": s, "update": u})
				require.NoError(rt, err)
				if typ == "agent_message_chunk" || typ == "agent_thought_chunk" {
					k := textKey{s, typ}
					if published[k] == nil {
						published[k] = &strings.Builder{}
					}
					published[k].WriteString(txt)
				}
			case 5, 6, 7: // read some
				c.read(rapid.IntRange(1, 5).Draw(rt, "n"))
			case 8: // the connection drops: resume from the last id
				c.resume()
			case 9: // the reader catches up
				for c.read(64) {
				}
			}
		}
		for c.read(64) {
		}
		if o.Throttle > 0 { // what is still held in its window comes when the window ends
			c.readUntil(time.Now().Add(2 * o.Throttle))
		}
		for k, want := range published {
			got := ""
			if c.text[k] != nil {
				got = c.text[k].String()
			}
			if got != want.String() {
				rt.Fatalf("%v: received %q, published %q", k, got, want.String())
			}
		}
		for k, got := range c.text {
			if published[k] == nil && got.Len() > 0 {
				rt.Fatalf("%v: received %q, published nothing", k, got.String())
			}
		}

		// Resume from a received id: held text + resumed text == published.
		if len(c.ids) == 0 {
			return
		}
		at := rapid.IntRange(0, len(c.ids)-1).Draw(rt, "resumeAt")
		held := map[textKey]string{}
		for i := 0; i <= at; i++ {
			if c.texts[i].typ != "" {
				held[c.texts[i]] += c.chunks[i]
			}
		}
		r := &client{t: rt, b: b, o: eventbus.SubscribeOptions{Scope: scope.Descendants, Coalesce: set},
			last: c.ids[at], text: map[textKey]*strings.Builder{}}
		r.resume()
		defer r.sub.Close()
		for r.read(64) {
		}
		for k, want := range published {
			got := held[k]
			if r.text[k] != nil {
				got += r.text[k].String()
			}
			if got != want.String() {
				rt.Fatalf("resume from %d: %v: held+resumed %q, published %q", c.ids[at], k, got, want.String())
			}
		}
	})
}
