package eventbus_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/scope"
)

// pubEv is one event the property publishes: its id, session, type and
// the text (chunks) or items (tool_call_update, whose content replaces the
// content before it) it carries.
type pubEv struct {
	id      uint64
	session string
	typ     string
	text    string
}

// textOf returns what an event of the property carries at the path its
// rule merges: a chunk's text, or a tool_call_update's content items
// joined (an array concatenation joins the same way).
func textOf(t *rapid.T, ev eventbus.Event) string {
	var v struct {
		Update struct {
			Content json.RawMessage `json:"content"`
		} `json:"update"`
	}
	require.NoError(t, json.Unmarshal(ev.Data, &v))
	switch ev.Type {
	case "tool_call_update":
		var items []struct {
			Text string `json:"text"`
		}
		require.NoError(t, json.Unmarshal(v.Update.Content, &items))
		s := ""
		for _, it := range items {
			s += it.Text
		}
		return s
	case "tool_call":
		return ""
	}
	var c struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(v.Update.Content, &c))
	return c.Text
}

// TestPropertyCompactResume publishes random interleavings of sessions,
// types and merge keys into compacting buffers of random sizes and byte
// bounds (and some with compaction off) and resumes
// each session from every id: per record the text it carries is the
// concatenation of the published events it covers (for tool_call_update,
// the last one's content); the replay covers
// every event after the cursor exactly once, in rising id order, unless a
// ring_evicted frame announces the loss of exactly the events below its
// completeFromId. A subscriber filtered by a random set of types (the
// cursor: the last id of those types it has) gets the same promises for
// those types only: no event of another type, and ring_evicted only when
// events of its types were lost (langgraph#7778 is the bug where a filter
// and a rejoin interact).
func TestPropertyCompactResume(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.IntRange(1, 6).Draw(t, "ring")
		maxBytes := rapid.SampledFrom([]int64{0, 0, 150, 400, 1000}).Draw(t, "maxBytes") // payloads are 70–130 bytes
		var rules eventbus.Coalescer = coalesce.ACP
		if rapid.IntRange(0, 4).Draw(t, "off") == 0 {
			rules = nil // compaction off: the same promises
		}
		// A snapshot provider (the application's transcript of a session
		// as of a drawn point), or none.
		snaps := rapid.Bool().Draw(t, "snapshots")
		var pub []pubEv
		points := map[string]uint64{}
		transcript := func(session string, asOf uint64) string {
			var text string
			for _, p := range pub {
				if p.session == session && p.id <= asOf {
					text += p.text
				}
			}
			return text
		}
		cfg := eventbus.Options{Epoch: "e", ReplayBufferSize: size, ReplayCompact: rules, ReplayMaxBytes: maxBytes}
		if snaps {
			cfg.Snapshots = func(_ context.Context, session string, sc scope.Kind) (json.RawMessage, uint64, error) {
				state, err := json.Marshal(transcript(session, points[session]))
				return state, points[session], err
			}
		}
		b, err := eventbus.New(cfg)
		require.NoError(t, err)
		defer b.Close()
		sessions := []string{"a", "b", "c"}[:rapid.IntRange(1, 3).Draw(t, "sessions")]
		n := rapid.IntRange(0, 40).Draw(t, "events")
		for i := range n {
			s := rapid.SampledFrom(sessions).Draw(t, "session")
			text := string(rune('a' + i%26))
			var typ string
			var data any
			switch k := rapid.IntRange(0, 5).Draw(t, "kind"); k {
			case 0, 1:
				typ = chunkType
				data = map[string]any{"update": map[string]any{"sessionUpdate": typ, "content": map[string]any{"type": "text", "text": text}}}
			case 2:
				typ = "agent_thought_chunk"
				data = map[string]any{"update": map[string]any{"sessionUpdate": typ, "content": map[string]any{"type": "text", "text": text}}}
			case 3, 4: // merge key: tool call id and status
				typ = "tool_call_update"
				data = map[string]any{"update": map[string]any{"sessionUpdate": typ,
					"toolCallId": rapid.SampledFrom([]string{"x", "y"}).Draw(t, "call"),
					"status":     rapid.SampledFrom([]string{"in_progress", "completed"}).Draw(t, "status"),
					"content":    []any{map[string]any{"type": "content", "text": text}}}}
			default:
				typ, text = "tool_call", ""
				data = map[string]any{"update": map[string]any{"sessionUpdate": typ}}
			}
			ev, err := b.Publish(s, typ, data)
			require.NoError(t, err)
			pub = append(pub, pubEv{id: ev.ID, session: s, typ: typ, text: text})
		}
		for _, s := range sessions {
			point := []uint64{0}
			for _, p := range pub {
				if p.session == s {
					point = append(point, p.id)
				}
			}
			points[s] = rapid.SampledFrom(point).Draw(t, "snapshot point")
		}
		for _, s := range sessions {
			var mine []pubEv
			// A filter by type: every type, or a random non-empty subset.
			types := []string{chunkType, "agent_thought_chunk", "tool_call_update", "tool_call"}
			var filter []string
			if rapid.Bool().Draw(t, "filtered") {
				filter = rapid.SliceOfNDistinct(rapid.SampledFrom(types), 1, 3, rapid.ID).Draw(t, "types")
			}
			for _, p := range pub {
				if p.session == s && (filter == nil || slices.Contains(filter, p.typ)) {
					mine = append(mine, p)
				}
			}
			if len(mine) == 0 {
				continue
			}
			// A cursor at every id of the session, and before the first.
			cursors := []uint64{0}
			for _, p := range mine {
				cursors = append(cursors, p.id)
			}
			for _, c := range cursors {
				ask := snaps && rapid.Bool().Draw(t, "ask snapshot")
				sub, err := b.Subscribe(t.Context(), s, eventbus.SubscribeOptions{Cursor: &eventbus.Position{Epoch: "e", ID: c}, Types: filter, Snapshot: ask})
				require.NoError(t, err)
				frames := drain(sub)
				sub.Close()
				covered := map[uint64]bool{}
				complete := uint64(0) // completeFromId of a ring_evicted, 0 none
				last, snapped := c, false
				for i, f := range frames {
					if f.Type == frame.TypeSnapshot {
						// The state as of an id replaces the position:
						// the events after that id follow, exactly.
						require.Zero(t, i, "the snapshot comes first")
						var d frame.SnapshotData
						require.NoError(t, json.Unmarshal(f.Data, &d))
						require.Equal(t, points[s], d.LastEventID)
						var state string
						require.NoError(t, json.Unmarshal(d.State, &state))
						require.Equal(t, transcript(s, d.LastEventID), state)
						if ask {
							require.Equal(t, frame.ReasonRequested, d.Reason)
						} else {
							require.Equal(t, frame.ReasonRingEvicted, d.Reason)
						}
						c, last, snapped = d.LastEventID, d.LastEventID, true
						continue
					}
					if f.Type == frame.TypeStateResyncRequired {
						var d frame.ResyncData
						require.NoError(t, json.Unmarshal(f.Data, &d))
						require.Equal(t, frame.ReasonRingEvicted, d.Reason)
						complete = d.CompleteFromID
						continue
					}
					if f.ID == 0 {
						continue
					}
					if filter != nil {
						require.Contains(t, filter, f.Type, "only the types asked for")
					}
					require.Greater(t, f.ID, last, "ids rise")
					last = f.ID
					first := f.ID
					if f.Count > 1 {
						first = f.FirstID
					}
					require.Greater(t, first, c, "nothing at or before the cursor")
					var text string
					parts := 0
					for _, p := range mine {
						if p.id >= first && p.id <= f.ID {
							require.False(t, covered[p.id], "event %d delivered twice", p.id)
							require.Equal(t, f.Type, p.typ, "a record covers one type")
							covered[p.id] = true
							if p.typ == "tool_call_update" {
								text = p.text // an update's content replaces the call's
							} else {
								text += p.text
							}
							parts++
						}
					}
					require.Equal(t, max(f.Count, 1), parts, "record %d counts the events it covers", f.ID)
					require.Equal(t, text, textOf(t, f), "record %d carries exactly their text", f.ID)
				}
				for _, p := range mine {
					if p.id <= c || covered[p.id] {
						continue
					}
					require.NotZero(t, complete, "event %d after cursor %d lost without ring_evicted", p.id, c)
					require.Less(t, p.id, complete, "event %d at/after completeFromId %d lost", p.id, complete)
				}
				require.Equal(t, ask, snapped && ask, "a snapshot asked for at join comes")
				if snaps && !snapped {
					require.Zero(t, complete, "with a provider a lost position gets a snapshot, not ring_evicted alone")
				}
				if complete != 0 {
					require.True(t, slices.ContainsFunc(mine, func(p pubEv) bool { return p.id > c && !covered[p.id] }),
						"ring_evicted announced with nothing lost after cursor %d", c)
				}
			}
		}
	})
}
