package coalesce_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/testkit"
)

const waitFor = testkit.WaitFor

// AgentPool shapes, as its events serialise (event_kind is the type).

func text(idx int, s string) payload {
	return payload{"part_delta", map[string]any{"index": idx, "delta": map[string]any{"part_delta_kind": "text", "content_delta": s}}}
}

func thinking(idx int, s string) payload {
	return payload{"part_delta", map[string]any{"index": idx, "delta": map[string]any{"part_delta_kind": "thinking", "content_delta": s}}}
}

func toolDelta(idx int, args any, id string) payload {
	return payload{"part_delta", map[string]any{"index": idx, "delta": map[string]any{"part_delta_kind": "tool_call", "args_delta": args, "tool_call_id": id}}}
}

func nullDelta() payload { return payload{"part_delta", map[string]any{"index": 0, "delta": nil}} }

func progress(id, status, title string, items ...any) payload {
	if items == nil {
		items = []any{}
	}
	return payload{"tool_call_progress", map[string]any{"tool_call_id": id, "status": status, "title": title, "items": items}}
}

func terminal(id string) any { return map[string]any{"type": "terminal", "terminal_id": id} }
func textItem(s string) any  { return map[string]any{"type": "text", "text": s} }

func plan(n int) payload {
	return payload{"plan_update", map[string]any{"entries": []any{map[string]any{"content": "step", "n": n}}}}
}
func lifecycle(typ string) payload { return payload{typ, map[string]any{"session_id": "s"}} }
func subagent() payload {
	return payload{"subagent", map[string]any{"source_name": "agent", "source_type": "agent", "event": map[string]any{"event_kind": "run_started"}}}
}
func custom() payload { return payload{"custom", map[string]any{"event_data": "test"}} }
func toolResultMetadata() payload {
	return payload{"tool_result_metadata", map[string]any{"tool_call_id": "tc1", "metadata": map[string]any{}}}
}

// mk is one event of a batch: session, type and payload.
type mk struct {
	session string
	typ     string
	data    any
}

// payload is an event type and its data.
type payload struct {
	typ  string
	data any
}

func in(session string, p payload) mk { return mk{session, p.typ, p.data} }

// events builds a batch with ids 1, 2, 3, … as a subscriber would get it.
func events(t testing.TB, ms ...mk) []eventbus.Event {
	t.Helper()
	out := make([]eventbus.Event, len(ms))
	for i, m := range ms {
		b, err := json.Marshal(m.data)
		require.NoError(t, err)
		out[i] = eventbus.Event{ID: uint64(i + 1), Session: m.session, Type: m.typ, Data: b}
	}
	return out
}

// field reads a dot path out of an event's payload as a Go value.
func field(t testing.TB, ev eventbus.Event, path ...string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(ev.Data, &v), "data %s", ev.Data)
	for _, p := range path {
		m, ok := v.(map[string]any)
		require.True(t, ok, "no object at %s in %s", p, ev.Data)
		v = m[p]
	}
	return v
}

// delta returns a part delta's content_delta (text or thinking).
func delta(t testing.TB, ev eventbus.Event) string {
	t.Helper()
	s, _ := field(t, ev, "delta", "content_delta").(string)
	return s
}

// newBus, subscribe and next are the eventbus tests' helpers: a bus and a
// subscription closed at the end of the test, one read bounded by waitFor.
var (
	newBus    = testkit.NewBus
	subscribe = testkit.Subscribe
	next      = testkit.Next
)

func pub(t testing.TB, b *eventbus.Bus, session string, typ string, data any) eventbus.Event {
	t.Helper()
	ev, err := b.Publish(session, typ, data)
	require.NoError(t, err)
	return ev
}

// drain reads s with the range-over-func iterator until it ends (as
// AgentPool's tests do with `async for env in drain_and_merge(stream)`) and
// returns what it got and why it ended.
func drain(t testing.TB, s *eventbus.Subscription) ([]eventbus.Event, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var out []eventbus.Event
	for ev, err := range s.All(ctx) {
		if err != nil {
			require.False(t, errors.Is(err, context.DeadlineExceeded), "the subscription did not end")
			return out, err
		}
		out = append(out, ev)
	}
	t.Fatal("All stopped without an error")
	return nil, nil
}

// withoutClosed drops a trailing session_closed: AgentPool's close_session
// ends the stream without an event, ours publishes one.
func withoutClosed(t testing.TB, evs []eventbus.Event) []eventbus.Event {
	t.Helper()
	require.NotEmpty(t, evs)
	require.Equal(t, frame.TypeSessionClosed, evs[len(evs)-1].Type)
	return evs[:len(evs)-1]
}

// resumeText subscribes from cursor and returns the text of the part deltas
// replayed after it.
func resumeText(t *testing.T, b *eventbus.Bus, session string, cursor uint64) string {
	t.Helper()
	sub := subscribe(t, b, session, eventbus.SubscribeOptions{Cursor: eventbus.At(cursor)})
	var s strings.Builder
	for {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		ev, err := sub.Next(ctx)
		cancel()
		require.NoError(t, err)
		if ev.Type == frame.TypeReplayComplete {
			return s.String()
		}
		if ev.Type == "part_delta" {
			s.WriteString(delta(t, ev))
		}
	}
}
