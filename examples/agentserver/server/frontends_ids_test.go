package server

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The frontend routes take a session id from their body (the AI SDK's chat
// id, AG-UI's threadId, A2A's contextId) and from their paths: each is the
// one validation of POST /sessions, so that a session they create can be
// streamed, stopped and closed by its URL. They created "x/y" (which
// GET /session/x%2Fy/events and DELETE then refused) and "." (which
// reconnectToStream's URL, /api/chat/./stream, never reaches).
func TestFrontendRoutesRefuseIDsNoURLCanAddress(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	chat := func(id string) string {
		return fmt.Sprintf(`{"id":%q,"trigger":"submit-message","messages":[{"id":"m","role":"user","parts":[{"type":"text","text":"hi"}]}]}`, id)
	}
	agui := func(id string) string {
		return fmt.Sprintf(`{"threadId":%q,"runId":"r1","state":{},"messages":[{"id":"u","role":"user","content":"hi"}],"tools":[],"context":[],"forwardedProps":{}}`, id)
	}
	a2a := func(id string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","role":"user","messageId":"m","contextId":%q,"parts":[{"kind":"text","text":"hi"}]}}}`, id)
	}
	for _, id := range []string{"x/y", ".", ".."} {
		for _, tc := range []struct {
			route, body string
		}{
			{"/api/chat", chat(id)},
			{"/agui", agui(id)},
			{"/a2a", a2a(id)},
		} {
			t.Run(tc.route+" "+id, func(t *testing.T) {
				status, _, body := do(t, s, http.MethodPost, tc.route, tc.body)
				require.Equal(t, http.StatusBadRequest, status, "%v", body)
				if tc.route == "/a2a" {
					assert.Contains(t, fmt.Sprint(body["error"]), "segment")
				} else {
					assert.Equal(t, "invalid_session_id", body["code"])
					assert.Contains(t, body["message"], "segment") // the library's "dot segment" or the server's "URL path segment"
				}
				assert.False(t, s.Bus().SessionExists(id), "no session %q created", id)
			})
		}
	}
	// The resume and stop routes say the same of such an id.
	for _, target := range []string{"/api/chat/x%2Fy/stream", "/agui/x%2Fy/stream"} {
		status, _, body := do(t, s, http.MethodGet, target, "")
		assert.Equal(t, http.StatusBadRequest, status, target)
		assert.Equal(t, "invalid_session_id", body["code"], target)
	}
	status, _, body := do(t, s, http.MethodPost, "/api/chat/x%2Fy/stop", "")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "invalid_session_id", body["code"])
}
