package ws_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
)

type manyFrame struct {
	ID      uint64          `json:"id"`
	Type    string          `json:"type"`
	Session string          `json:"session"`
	Cursor  string          `json:"cursor"`
	Data    json.RawMessage `json:"data"`
}

func TestManySessionsWebSocket(t *testing.T) {
	t.Parallel()
	b, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	h, err := ws.NewHandler(b, ws.HandlerOptions{MaxSessions: 3})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(ws.ManyPattern, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = h.Close() })
	for _, s := range []string{"a", "b", "c"} {
		require.NoError(t, b.CreateSession(s, ""))
	}
	_, _ = b.Publish("c", "m", 1) // 1
	_, _ = b.Publish("a", "m", 1) // 2

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws?session=a&session=b", nil)
	require.NoError(t, err)
	defer c.CloseNow() //nolint:errcheck
	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(`{"resume":{}}`)))
	read := func() manyFrame {
		t.Helper()
		_, p, err := c.Read(ctx)
		require.NoError(t, err)
		var f manyFrame
		require.NoError(t, json.Unmarshal(p, &f), string(p))
		if f.Type == "replay_complete" {
			_, p, err = c.Read(ctx)
			require.NoError(t, err)
			f = manyFrame{}
			require.NoError(t, json.Unmarshal(p, &f), string(p))
		}
		return f
	}
	nextEvent := func() manyFrame {
		t.Helper()
		for {
			if f := read(); f.ID != 0 {
				return f
			}
		}
	}
	assert.Equal(t, resume.TypeConnection, read().Type)
	f := nextEvent()
	assert.Equal(t, []any{"a", uint64(2), b.Epoch() + "-2"}, []any{f.Session, f.ID, f.Cursor})

	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","session":"nope"}`)))
	f = read()
	assert.Equal(t, []string{resume.TypeSessionError, "nope"}, []string{f.Type, f.Session})
	assert.Contains(t, string(f.Data), resume.CodeSessionNotFound)

	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","session":"c"}`)))
	f = read()
	assert.Equal(t, []string{resume.TypeSessionAdded, "c"}, []string{f.Type, f.Session})
	f = nextEvent()
	assert.Equal(t, []any{"c", uint64(1), b.Epoch() + "-2;+c:session;@c=1"}, []any{f.Session, f.ID, f.Cursor})

	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","session":"d"}`)))
	require.NoError(t, b.CreateSession("d", ""))
	f = read() // not found, or over the cap: either way a frame naming d
	assert.Equal(t, []string{resume.TypeSessionError, "d"}, []string{f.Type, f.Session})

	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(`{"type":"unsubscribe","session":"a"}`)))
	f = read()
	assert.Equal(t, []string{resume.TypeSessionRemoved, "a"}, []string{f.Type, f.Session})
	_, _ = b.Publish("a", "m", 1) // 3
	_, _ = b.Publish("b", "m", 1) // 4
	f = nextEvent()
	assert.Equal(t, []any{"b", uint64(4), b.Epoch() + "-4;+c:session;-a"}, []any{f.Session, f.ID, f.Cursor})

	// Resume on a new socket with the cursor: the set comes back from it.
	_ = c.Close(websocket.StatusNormalClosure, "")
	_, _ = b.Publish("c", "m", 1) // 5
	c2, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws?session=a&session=b", nil)
	require.NoError(t, err)
	defer c2.CloseNow() //nolint:errcheck
	c = c2
	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(`{"resume":{"lastEventId":"`+f.Cursor+`"}}`)))
	f = nextEvent()
	assert.Equal(t, []any{"c", uint64(5)}, []any{f.Session, f.ID})
	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(`{"type":"cancel"}`)))
	_, _, err = c.Read(ctx)
	for err == nil {
		_, _, err = c.Read(ctx)
	}
	assert.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err))
}

// TestManySessionsWebSocketWithoutSession: GET /ws with no session= is
// refused before the upgrade, told it lacks session=.
func TestManySessionsWebSocketWithoutSession(t *testing.T) {
	t.Parallel()
	b, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	h, err := ws.NewHandler(b, ws.HandlerOptions{})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(ws.ManyPattern, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = h.Close() })
	_, resp, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", nil)
	require.Error(t, err)
	require.NotNil(t, resp)
	var se struct{ Code, Message string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&se))
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, resume.CodeInvalidSessionID, se.Code)
	assert.Contains(t, se.Message, "no session= parameter")
}
