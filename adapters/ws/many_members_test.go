package ws_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
)

// A message of the many-sessions socket is read as strictly as POST
// /events/{conn}'s body and the single-session socket's messages: a member
// given twice or named in another case is refused (1008 naming it), not
// folded by encoding/json — {"type":"subscribe","session":"a","session":"b"}
// subscribed b where a proxy or a log read a, and "Session" was "session".
func TestManySessionsMessageMembersAreExact(t *testing.T) {
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
	for _, s := range []string{"a", "b", "c"} {
		require.NoError(t, b.CreateSession(s, ""))
	}

	for _, tc := range []struct {
		name, msg, reason string
	}{
		{"session twice", `{"type":"subscribe","session":"b","session":"c"}`, `"session" given twice`},
		{"type twice", `{"type":"unsubscribe","type":"subscribe","session":"b"}`, `"type" given twice`},
		{"another case", `{"type":"subscribe","Session":"b"}`, `"Session"`},
		{"type in another case", `{"TYPE":"subscribe","session":"b"}`, `"TYPE"`},
		{"resume twice", `{"resume":{},"resume":null}`, `"resume" given twice`},
		{"resume's cursor in another case", `{"resume":{"lastEventId":"1","LastEventId":"9"}}`, `resume: member "LastEventId"`},
		{"ok", `{"type":"subscribe","session":"b"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws?session=a", nil)
			require.NoError(t, err)
			defer c.CloseNow() //nolint:errcheck
			require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(tc.msg)))
			for {
				_, p, err := c.Read(ctx)
				if tc.reason == "" {
					require.NoError(t, err)
					var f struct{ Type, Session string }
					require.NoError(t, json.Unmarshal(p, &f))
					if f.Type == "session_added" {
						assert.Equal(t, "b", f.Session)
						return
					}
					continue
				}
				if err != nil {
					var ce websocket.CloseError
					require.True(t, errors.As(err, &ce), "%v", err)
					assert.Equal(t, websocket.StatusPolicyViolation, ce.Code)
					assert.Contains(t, ce.Reason, tc.reason)
					return
				}
				var f struct{ Type string }
				require.NoError(t, json.Unmarshal(p, &f))
				require.NotEqual(t, "session_added", f.Type, "the message was taken: %s", p)
			}
		})
	}
}
