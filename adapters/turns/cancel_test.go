package turns_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/turns"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// A cancel that is accepted answers 202 with the turns it ended and those
// it holds, writes one turn_cancel, and the turns end with
// turn_end{cancelled} while their producers' contexts end.
func TestCancelAnswers202WithTheTurnsItEnded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body      string
		start           []string // sessions with a turn "t-<session>"
		cancelled, held []string
	}{
		{name: "no body: the session's active turn", start: []string{"root"}, cancelled: []string{"t-root"}},
		{name: "the named turn", body: `{"turn":"t-root"}`, start: []string{"root"}, cancelled: []string{"t-root"}},
		{name: "null members are absent", body: `{"turn":null,"cascade":null}`, start: []string{"root"}, cancelled: []string{"t-root"}},
		{name: "nothing active: empty lists", body: `{}`},
		{name: "a turn not yet started is held", body: `{"turn":"later"}`, held: []string{"later"}},
		{name: "the WebSocket message's type is accepted", body: `{"type":"cancel"}`, start: []string{"root"}, cancelled: []string{"t-root"}},
		{name: "cascade ends the descendants' turns", body: `{"cascade":true}`, start: []string{"root", "child", "grandchild"},
			cancelled: []string{"t-root", "t-child", "t-grandchild"}},
		{name: "without cascade a child's turn runs on", start: []string{"root", "child"}, cancelled: []string{"t-root"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBus(t)
			require.NoError(t, b.CreateSession("root", ""))
			require.NoError(t, b.CreateSession("child", "root"))
			require.NoError(t, b.CreateSession("grandchild", "child"))
			running := map[string]*eventbus.Turn{}
			for _, s := range tc.start {
				tr, err := b.StartTurn(context.Background(), s, eventbus.TurnOptions{ID: "t-" + s})
				require.NoError(t, err)
				running[s] = tr
			}
			_, srv := serve(t, b, turns.HandlerOptions{})

			a := do(t, http.MethodPost, srv.URL+"/session/root/cancel", tc.body, nil)
			require.Equal(t, http.StatusAccepted, a.status, a.body)
			assert.Equal(t, b.Epoch(), a.header.Get(resume.HeaderEpoch))
			var res eventbus.CancelResult
			require.NoError(t, json.Unmarshal([]byte(a.body), &res))
			assert.ElementsMatch(t, tc.cancelled, res.Cancelled)
			assert.ElementsMatch(t, tc.held, res.Held)
			assert.NotNil(t, res.Cancelled, "an empty list, never null")
			assert.NotNil(t, res.Held, "an empty list, never null")
			for s, tr := range running {
				ended := false
				for _, c := range tc.cancelled {
					ended = ended || c == "t-"+s
				}
				if !ended {
					assert.NoError(t, tr.Context().Err(), "turn of %s runs on", s)
					continue
				}
				select {
				case <-tr.Context().Done():
				case <-time.After(10 * time.Second):
					t.Fatalf("the producer of %s was not cancelled", s)
				}
				end, err := tr.End(nil)
				require.NoError(t, err)
				assert.JSONEq(t, `{"turn":"t-`+s+`","reason":"cancelled"}`, string(end.Data))
			}
			assert.Contains(t, types(t, b, "root"), frame.TypeTurnCancel)
		})
	}
}

// Every refusal names the bad value and writes nothing to the log.
func TestCancelRefusalsNameTheValueAndWriteNothing(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", frame.MaxNameLen+1)
	for _, tc := range []struct {
		name, session, body string
		header              http.Header
		opts                turns.HandlerOptions
		status              int
		code, message       string
	}{
		{name: "unknown session", session: "nobody", status: 404, code: "session_not_found", message: `session "nobody" not found`},
		{name: "closed session", session: "closed", status: 410, code: "session_closed", message: `session "closed" closed`},
		{name: "ended turn", body: `{"turn":"done"}`, status: 409, code: "turn_ended", message: `turn "done"`},
		{name: "not JSON", body: `{`, status: 400, code: "invalid_json", message: "invalid JSON"},
		{name: "an array", body: `[]`, status: 400, code: "invalid_json", message: "want a JSON object"},
		{name: "turn not a string", body: `{"turn":5}`, status: 400, code: "invalid_json", message: `"turn" must be a string, got "5"`},
		{name: "cascade not a boolean", body: `{"cascade":"yes"}`, status: 400, code: "invalid_json", message: `"cascade" must be true or false`},
		{name: "unknown member", body: `{"turns":"t"}`, status: 400, code: "invalid_json", message: `unknown member "turns"`},
		{name: "member in another case", body: `{"Turn":"t"}`, status: 400, code: "invalid_json", message: `unknown member "Turn"`},
		{name: "member twice", body: `{"turn":"a","turn":"b"}`, status: 400, code: "invalid_json", message: `member "turn" given twice`},
		{name: "another type", body: `{"type":"stop"}`, status: 400, code: "invalid_json", message: `"type" must be "cancel"`},
		{name: "trailing data", body: `{} {}`, status: 400, code: "invalid_json", message: "trailing data"},
		{name: "invalid UTF-8", body: "{\"turn\":\"\xff\"}", status: 400, code: "invalid_json", message: "invalid UTF-8 at byte 9"},
		{name: "empty turn id", body: `{"turn":""}`, status: 400, code: "invalid_turn_id", message: "empty turn id"},
		{name: "turn id with a control character", body: `{"turn":"a\nb"}`, status: 400, code: "invalid_turn_id", message: `turn id "a\nb" contains control character`},
		{name: "turn id too long", body: `{"turn":"` + long + `"}`, status: 400, code: "invalid_turn_id", message: "longer than 256"},
		{name: "not JSON content", body: `{}`, header: http.Header{"Content-Type": {"text/plain"}}, status: 415, code: "unsupported_media_type", message: `"text/plain"`},
		{name: "compressed", body: `{}`, header: http.Header{"Content-Encoding": {"gzip"}}, status: 415, code: "unsupported_content_encoding", message: `"gzip"`},
		{name: "too large", body: `{"turn":"` + strings.Repeat(" ", turns.MaxBodyBytes) + `"}`, status: 413, code: "body_too_large", message: "over 4096 bytes"},
		{name: "a page of another site", header: http.Header{"Sec-Fetch-Site": {"cross-site"}}, status: 403, code: "forbidden_origin", message: "cross-origin"},
		{name: "the hook refuses", opts: turns.HandlerOptions{AuthorizeCancel: func(*http.Request, string, *frame.TurnData) error {
			return errors.New("only the session's owner may stop it")
		}}, status: 403, code: "forbidden", message: "only the session's owner may stop it"},
		{name: "the hook chooses its answer", opts: turns.HandlerOptions{AuthorizeCancel: func(*http.Request, string, *frame.TurnData) error {
			return &resume.StatusError{Status: 401, Code: "unauthorized", Message: "no token"}
		}}, status: 401, code: "unauthorized", message: "no token"},
		{name: "a bad session id", session: "a%0Ab", status: 400, code: "invalid_session_id", message: `session id "a\nb"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBus(t)
			require.NoError(t, b.CreateSession("s", ""))
			require.NoError(t, b.CreateSession("closed", ""))
			require.NoError(t, b.CloseSession("closed"))
			done, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "done"})
			require.NoError(t, err)
			_, err = done.End(nil)
			require.NoError(t, err)
			running, err := b.StartTurn(context.Background(), "s", eventbus.TurnOptions{ID: "running"})
			require.NoError(t, err)
			_, srv := serve(t, b, tc.opts)
			session := tc.session
			if session == "" {
				session = "s"
			}
			before := b.LastEventID()

			a := do(t, http.MethodPost, srv.URL+"/session/"+session+"/cancel", tc.body, tc.header)
			assert.Equal(t, tc.status, a.status, a.body)
			code, msg := a.code(t)
			assert.Equal(t, tc.code, code)
			assert.Contains(t, msg, tc.message)
			assert.Equal(t, before, b.LastEventID(), "nothing written to the log")
			assert.NoError(t, running.Context().Err(), "the running turn runs on")
		})
	}
}

// The hook sees the validated cancel and the request; what it sets as By
// is recorded in the turn_cancel.
func TestCancelHookSetsWhoAsked(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	require.NoError(t, b.CreateSession("s", ""))
	var seen frame.TurnData
	_, srv := serve(t, b, turns.HandlerOptions{AuthorizeCancel: func(r *http.Request, session string, c *frame.TurnData) error {
		seen = *c
		c.By = r.Header.Get("X-User") + "@" + session
		return nil
	}})
	a := do(t, http.MethodPost, srv.URL+"/session/s/cancel", `{"turn":"t9","cascade":true}`, http.Header{"X-User": {"alice"}})
	require.Equal(t, http.StatusAccepted, a.status, a.body)
	assert.Equal(t, frame.TurnData{Turn: "t9", Cascade: true}, seen)

	sub, err := b.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	ev, ok := sub.TryNext()
	require.True(t, ok)
	assert.Equal(t, frame.TypeTurnCancel, ev.Type)
	assert.JSONEq(t, `{"turn":"t9","cascade":true,"by":"alice@s"}`, string(ev.Data))
}

// Mounted without the mux's method check (another router), the cancel
// handler answers another method 405 with Allow: POST, and an empty id
// says where it should have come from.
func TestCancelUnderAnotherRouter(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	h, err := turns.NewHandler(b, turns.HandlerOptions{})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/stop", h.Cancel())
	mux.Handle("/api/{sid}/stop", mustHandler(t, b, turns.HandlerOptions{SessionID: func(r *http.Request) string { return r.PathValue("sid") }}).Cancel())
	srv := newServer(t, mux)
	require.NoError(t, b.CreateSession("s", ""))

	a := do(t, http.MethodGet, srv+"/stop", "", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, a.status)
	assert.Equal(t, "POST", a.header.Get("Allow"))

	a = do(t, http.MethodPost, srv+"/stop", "", nil)
	assert.Equal(t, http.StatusBadRequest, a.status)
	code, msg := a.code(t)
	assert.Equal(t, "invalid_session_id", code)
	assert.Contains(t, msg, "HandlerOptions.SessionID")

	a = do(t, http.MethodPost, srv+"/api/s/stop", "", nil)
	assert.Equal(t, http.StatusAccepted, a.status, a.body)
}

// A body that never finishes is answered 408 once the body timeout has
// passed, and its connection is closed: it pins no goroutine.
func TestCancelBodyThatNeverFinishes(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	require.NoError(t, b.CreateSession("s", ""))
	_, srv := serve(t, b, turns.HandlerOptions{BodyTimeout: 100 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("POST /session/s/cancel HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n{\"tu"))
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(buf[:n]), "HTTP/1.1 408 "), "%s", buf[:n])
	assert.Contains(t, string(buf[:n]), "request_timeout")
	assert.Equal(t, uint64(0), b.LastEventID(), "nothing written to the log")
}

func mustHandler(t testing.TB, b *eventbus.Bus, o turns.HandlerOptions) *turns.Handler {
	t.Helper()
	h, err := turns.NewHandler(b, o)
	require.NoError(t, err)
	return h
}

func newServer(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
