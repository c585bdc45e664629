package sse_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

// Every cursor a server writes, it takes back: a connection of the default
// cap (100 sessions) that added 60 sessions, each with its own position,
// and removed 50 of its URL's, writes a cursor of 60 "+", 50 "-" and 60
// "@" entries in the session_added frame's id: line. The resume with it
// must be the whole set, not a 400 invalid_last_event_id (the parser took
// at most 100 entries).
func TestManyCursorTheServerWroteIsTakenBack(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	h := newHandler(t, b, sse.HandlerOptions{})
	srv := serveMany(t, h)
	var url []string
	for i := range 50 {
		id := fmt.Sprintf("u%02d", i)
		require.NoError(t, b.CreateSession(id, ""))
		url = append(url, "session="+id)
	}
	require.NoError(t, b.CreateSession("keep", ""))
	url = append(url, "session=keep")
	var add []string
	for i := range 60 {
		id := fmt.Sprintf("n%02d", i)
		require.NoError(t, b.CreateSession(id, ""))
		add = append(add, fmt.Sprintf(`{"session":%q}`, id))
	}
	publish(t, b, "keep", "m", 1) // main position 1: each added session gets @id=0
	path := "/events?" + strings.Join(url, "&")
	st := openMany(t, srv, path, "")
	conn, _ := st.next()
	var cd struct{ Connection string }
	require.NoError(t, json.Unmarshal(conn.Data, &cd))
	e, _ := st.next()
	require.Equal(t, uint64(1), e.ID)

	var remove []string
	for i := range 50 {
		remove = append(remove, fmt.Sprintf("%q", fmt.Sprintf("u%02d", i)))
	}
	body := `{"add":[` + strings.Join(add, ",") + `],"remove":[` + strings.Join(remove, ",") + `]}`
	resp, err := srv.Client().Post(srv.URL+"/events/"+cd.Connection, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	rb, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(rb))
	var last string
	for range 110 {
		e, f := st.next()
		if e.Type == resume.TypeSessionAdded {
			last = f.ID
		}
	}
	require.NotEmpty(t, last)
	st.close()

	st2 := openMany(t, srv, path, last)
	conn, _ = st2.next()
	var cd2 struct{ Sessions []resume.SessionScope }
	require.NoError(t, json.Unmarshal(conn.Data, &cd2))
	assert.Len(t, cd2.Sessions, 61)
}

// A change the bus refuses when the connection subscribes again (the new
// first session at its subscriber cap) leaves the connection as it was:
// the POST is refused naming the cause, and the stream goes on with its
// old set, no session_removed frame, nothing lost. It used to have closed
// its subscription already: the stream went silent for good, its set and
// cursor those of the refused change.
func TestManyChangeRefusedByTheBusChangesNothing(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{MaxSubscribers: 1})
	h := newHandler(t, b, sse.HandlerOptions{})
	srv := serveMany(t, h)
	require.NoError(t, b.CreateSession("a", ""))
	require.NoError(t, b.CreateSession("b", ""))
	// a is at its cap; the connection counts against b, its first session.
	other, err := b.Subscribe(t.Context(), "a", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	defer other.Close()
	st := openMany(t, srv, "/events?session=b&session=a", "")
	conn, _ := st.next()
	var cd struct{ Connection string }
	require.NoError(t, json.Unmarshal(conn.Data, &cd))

	resp, err := srv.Client().Post(srv.URL+"/events/"+cd.Connection, "application/json", strings.NewReader(`{"remove":["b"]}`))
	require.NoError(t, err)
	rb, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(rb))

	publish(t, b, "a", "m", 1) // 1
	publish(t, b, "b", "m", 1) // 2
	var got []string
	for len(got) < 2 {
		e, _ := st.next()
		require.NotEqual(t, resume.TypeSessionRemoved, e.Type)
		if e.ID != 0 {
			got = append(got, fmt.Sprintf("%s %s %d", e.Type, e.Session, e.ID))
		}
	}
	assert.Equal(t, []string{"m a 1", "m b 2"}, got)
}

// A connection cursor from beyond the bus's last id (forged, huge) is an
// epoch_reset for each session of the set: their whole buffers once, and
// the id: lines after it this epoch's real positions, not the forged one.
func TestManyCursorBeyondTheLastIDResets(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	h := newHandler(t, b, sse.HandlerOptions{})
	srv := serveMany(t, h)
	require.NoError(t, b.CreateSession("a", ""))
	require.NoError(t, b.CreateSession("b", ""))
	publish(t, b, "a", "m", 1) // 1
	publish(t, b, "b", "m", 1) // 2
	st := openMany(t, srv, "/events?session=a&session=b", b.Epoch()+"-9007199254740991;@b=9007199254740990")
	var resets []string
	var got []string
	for len(got) < 2 {
		e, f := st.next()
		switch {
		case e.Type == "state_resync_required":
			resets = append(resets, e.Session)
		case e.ID != 0:
			got = append(got, fmt.Sprintf("%s %d %s", e.Session, e.ID, f.ID))
		}
	}
	assert.ElementsMatch(t, []string{"a", "b"}, resets)
	assert.Equal(t, []string{"a 1 " + b.Epoch() + "-1", "b 2 " + b.Epoch() + "-2"}, got)
}
