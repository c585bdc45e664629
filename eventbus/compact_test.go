package eventbus_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// Compaction in the store (Options.ReplayCompact): a session's replay
// buffer folds a streamed reply into one record, and a resume from inside
// it replays exactly the rest.

const chunkType = "agent_message_chunk"

// chunk is an ACP agent_message_chunk carrying tok (the example agent
// server's shape).
func chunk(session, tok string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"sessionId": session, "update": map[string]any{
		"sessionUpdate": chunkType, "content": map[string]any{"type": "text", "text": tok}}})
	return b
}

// chunkText returns the text an agent_message_chunk carries.
func chunkText(t testing.TB, ev eventbus.Event) string {
	t.Helper()
	var v struct {
		Update struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"update"`
	}
	require.NoError(t, json.Unmarshal(ev.Data, &v), "%s", ev.Data)
	return v.Update.Content.Text
}

// tok is the i-th token of a test reply.
func tok(i int) string { return "t" + strconv.Itoa(i) + " " }

// publishReply publishes tokens from to to-1 of a reply to session and
// returns their text.
func publishReply(t testing.TB, b *eventbus.Bus, session string, from, to int) string {
	t.Helper()
	var sb strings.Builder
	for i := from; i < to; i++ {
		_, err := b.PublishJSON(session, chunkType, chunk(session, tok(i)))
		require.NoError(t, err)
		sb.WriteString(tok(i))
	}
	return sb.String()
}

// readReplay reads a resumed subscription's frames up to and including
// replay_complete.
func readReplay(t testing.TB, s *eventbus.Subscription) []eventbus.Event {
	t.Helper()
	var out []eventbus.Event
	for {
		ev := next(t, s)
		out = append(out, ev)
		if ev.Type == frame.TypeReplayComplete {
			return out
		}
	}
}

// The input: a 2,000-delta reply into the default ring of 100 with
// ACP compaction; a client cut after delta 50 resumes with exactly the
// remaining text and no ring_evicted; a client that joins after the end
// receives the reply as one record; compaction off gives today's
// behaviour (ring_evicted).
func TestCompactReplyResumesExactSuffix(t *testing.T) {
	const n, cut = 2000, 50
	for _, compact := range []bool{true, false} {
		t.Run("compact="+strconv.FormatBool(compact), func(t *testing.T) {
			cfg := eventbus.Options{Epoch: "e"}
			if compact {
				cfg.ReplayCompact = coalesce.ACP
			}
			b := newBus(t, cfg)
			ctx, cancel := context.WithCancel(context.Background())
			live, err := b.Subscribe(ctx, "s", eventbus.SubscribeOptions{})
			require.NoError(t, err)
			want := publishReply(t, b, "s", 0, cut)
			var got strings.Builder
			var cursor uint64
			for _, ev := range readN(t, live, cut) {
				got.WriteString(chunkText(t, ev))
				cursor = ev.ID
			}
			cancel() // the cut: the client is gone while the reply goes on
			want += publishReply(t, b, "s", cut, n)

			resumed := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: "e", ID: cursor}})
			frames := readReplay(t, resumed)
			if !compact {
				assert.Equal(t, "state_resync_required:ring_evicted", describe(frames[:1])[0], "today's behaviour")
				assert.Len(t, ids(frames), 100, "the ring holds the last 100 deltas")
				return
			}
			assert.Zero(t, count(frames, frame.TypeStateResyncRequired), "no ring_evicted: %v", describe(frames))
			require.Len(t, ids(frames), 1, "the rest of the reply is one record")
			rest := frames[0]
			assert.Equal(t, n-cut, rest.Count)
			assert.Equal(t, cursor+1, rest.FirstID)
			assert.Equal(t, cursor+n-cut, rest.ID, "the newest id: resuming from it repeats nothing")
			assert.True(t, rest.Replay)
			got.WriteString(chunkText(t, rest))
			assert.Equal(t, want, got.String(), "the concatenation is what was published")

			// A late joiner: the whole reply as one record.
			late := subscribe(t, b, "s", eventbus.SubscribeOptions{})
			all := drain(late)
			require.Len(t, all, 1, "%v", describe(all))
			assert.Equal(t, n, all[0].Count)
			assert.Equal(t, cursor+1-cut, all[0].FirstID)
			assert.Equal(t, want, chunkText(t, all[0]))
			assert.Equal(t, 1, b.Sessions()[0].Buffered, "the ring counts records")
		})
	}
}

// A cursor at every id inside a folded record replays exactly the parts
// after it; a cursor at the record's last id replays nothing of it.
func TestCompactCursorInsideRecord(t *testing.T) {
	b := newBus(t, eventbus.Options{Epoch: "e", ReplayCompact: coalesce.ACP, ReplayBufferSize: 3})
	publish(t, b, "s", 1) // a "msg" before the reply: its own record
	want := publishReply(t, b, "s", 0, 20)
	_, err := b.Publish("s", "msg", map[string]int{"n": 1})
	require.NoError(t, err)
	toks := strings.SplitAfter(want, " ")
	for c := uint64(1); c <= 22; c++ {
		s := subscribe(t, b, "s", eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: "e", ID: c}})
		frames := readReplay(t, s)
		assert.Zero(t, count(frames, frame.TypeStateResyncRequired), "cursor %d: %v", c, describe(frames))
		var text strings.Builder
		var got []uint64
		for _, ev := range frames {
			if ev.Type == chunkType {
				text.WriteString(chunkText(t, ev))
				if ev.Count > 1 {
					assert.Equal(t, max(c+1, 2), ev.FirstID, "cursor %d", c)
				}
			}
			if ev.ID != 0 {
				got = append(got, ev.ID)
			}
		}
		from := min(max(int(c)-1, 0), 20) // tokens the client already has
		assert.Equal(t, strings.Join(toks[from:], ""), text.String(), "cursor %d", c)
		for i := 1; i < len(got); i++ {
			assert.Greater(t, got[i], got[i-1], "ids rise")
		}
		s.Close()
	}
}

// Events of another type, key or origin, or an event of another type in
// between, are not folded; live delivery is unchanged.
func TestCompactFoldsOnlyConsecutiveSameKey(t *testing.T) {
	b := newBus(t, eventbus.Options{ReplayCompact: coalesce.ACP})
	live := subscribe(t, b, "s", eventbus.SubscribeOptions{})
	pub := func(typ string, data json.RawMessage, opts ...eventbus.PublishOption) {
		_, err := b.PublishJSON("s", typ, data, opts...)
		require.NoError(t, err)
	}
	pub(chunkType, chunk("s", "a"))
	pub(chunkType, chunk("s", "b"))
	pub("tool_call", json.RawMessage(`{}`))
	pub(chunkType, chunk("s", "c"))
	pub(chunkType, chunk("s", "d"), eventbus.WithOrigin("other"))
	pub(chunkType, chunk("s", "e"), eventbus.WithOrigin("other"))
	assert.Len(t, drain(live), 6, "live delivery: every event as published")
	late := subscribe(t, b, "s", eventbus.SubscribeOptions{})
	var got []string
	for _, ev := range drain(late) {
		s := ev.Type
		if ev.Type == chunkType {
			s = chunkText(t, ev) + "/" + strconv.Itoa(ev.Count) + "/" + ev.Origin
		}
		got = append(got, s)
	}
	assert.Equal(t, []string{"ab/2/", "tool_call", "c/0/", "de/2/other"}, got)
	assert.Equal(t, 4, b.Sessions()[0].Buffered)
}

// A coalescing subscriber that replays a folded record counts every event
// it holds.
func TestCompactWithCoalescingSubscriber(t *testing.T) {
	b := newBus(t, eventbus.Options{ReplayCompact: coalesce.ACP, ReplayBufferSize: 2})
	want := publishReply(t, b, "s", 0, 10)
	s := subscribe(t, b, "s", eventbus.SubscribeOptions{Coalesce: coalesce.ACP})
	evs := drain(s)
	require.Len(t, evs, 1)
	assert.Equal(t, 10, evs[0].Count)
	assert.Equal(t, want, chunkText(t, evs[0]))
}
