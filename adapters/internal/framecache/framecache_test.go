package framecache_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/internal/framecache"
	"github.com/replaybus/replaybus/eventbus"
)

// encode is a stand-in encoder: it says which event and variant it saw.
func encode(variant uint8) func([]byte, eventbus.Event) []byte {
	return func(dst []byte, ev eventbus.Event) []byte {
		return fmt.Appendf(dst, "%d/%d/%s/%d/%d/%t", variant, ev.ID, ev.Data, ev.Count, ev.FirstID, ev.Replay)
	}
}

// A hit returns the one stored frame; anything that differs from what it
// was built from — data slice, count, first id, variant — is encoded anew;
// synthetic events (id 0) and frames over Max are never stored.
func TestCacheSharesOnlyWhatMatches(t *testing.T) {
	var c framecache.Cache
	data := json.RawMessage(`{"a":1}`)
	ev := eventbus.Event{ID: 5, Data: data}

	first, _ := c.Frame(ev, 0, nil, encode(0))
	require.Equal(t, "0/5/{\"a\":1}/0/0/false", string(first))
	a, _ := c.Frame(ev, 0, nil, encode(0))
	b, _ := c.Frame(ev, 0, nil, encode(0))
	require.Equal(t, string(first), string(a))
	require.Same(t, &a[0], &b[0], "later callers share the stored bytes")

	for name, tc := range map[string]struct {
		ev      eventbus.Event
		variant uint8
	}{
		"another variant":             {ev, 1},
		"equal data in another slice": {eventbus.Event{ID: 5, Data: json.RawMessage(`{"a":1}`)}, 0},
		"another count (coalesced)":   {eventbus.Event{ID: 5, Data: data, Count: 2, FirstID: 4}, 0},
	} {
		got, _ := c.Frame(tc.ev, tc.variant, nil, encode(tc.variant))
		require.Equal(t, string(encode(tc.variant)(nil, tc.ev)), string(got), name)
	}

	// A stream Slots events behind the others gets its frame but leaves
	// the newer one in the slot they share.
	newer := eventbus.Event{ID: 5 + framecache.Slots, Data: data}
	_, _ = c.Frame(newer, 0, nil, encode(0)) // stores it
	n1, _ := c.Frame(newer, 0, nil, encode(0))
	old, _ := c.Frame(ev, 0, nil, encode(0))
	require.Equal(t, string(encode(0)(nil, ev)), string(old))
	n2, _ := c.Frame(newer, 0, nil, encode(0))
	require.Same(t, &n1[0], &n2[0], "the older event did not evict the newer frame")

	syn := eventbus.Event{Data: data}
	f, scratch := c.Frame(syn, 0, make([]byte, 0, 64), encode(0))
	require.Same(t, &f[0], &scratch[0], "a synthetic frame is built in scratch")
	big := eventbus.Event{ID: 6, Data: json.RawMessage(strings.Repeat("x", framecache.Max))}
	bf, _ := c.Frame(big, 0, nil, encode(0))
	require.Equal(t, string(encode(0)(nil, big)), string(bf))
	c.Each(func(b []byte) { require.LessOrEqual(t, len(b), framecache.Max) })
}
