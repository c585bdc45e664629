package aisdk_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/replaybus/replaybus/adapters/a2a"
	"github.com/replaybus/replaybus/adapters/agui"
	"github.com/replaybus/replaybus/adapters/aisdk"
	"github.com/replaybus/replaybus/eventbus"
)

// frontendMux mounts the three frontend handlers, with o's body timeout,
// on one mux; Start is never reached by the tests that use it.
func frontendMux(t *testing.T, bus *eventbus.Bus, bt time.Duration) *http.ServeMux {
	t.Helper()
	refuse := func() (string, error) { return "", eventbus.ErrTurnActive }
	ai, err := aisdk.NewHandler(bus, aisdk.HandlerOptions{BodyTimeout: bt,
		Start: func(*http.Request, aisdk.Message) (string, error) { return refuse() }})
	require.NoError(t, err)
	ag, err := agui.NewHandler(bus, agui.HandlerOptions{BodyTimeout: bt,
		Start: func(*http.Request, agui.Input) (string, error) { return refuse() }})
	require.NoError(t, err)
	aa, err := a2a.NewHandler(bus, a2a.HandlerOptions{BodyTimeout: bt,
		Start: func(*http.Request, a2a.Message) (string, error) { return refuse() }})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/api/chat", ai)
	mux.Handle("/api/chat/", ai)
	mux.Handle("/agui", ag)
	mux.Handle("/agui/", ag)
	mux.Handle("/a2a", aa)
	return mux
}

// A body that never finishes, on a plain http.Server with no timeouts of
// its own, is answered 408 request_timeout once the handler's body
// timeout has passed, with Connection: close; the server closes the
// connection, and the goroutines return to the baseline: a slow-loris
// client pins nothing. Not parallel: it counts the process's goroutines.
func TestABodyThatNeverFinishesIs408(t *testing.T) {
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	require.NoError(t, bus.CreateSession("c1", ""))
	ts := httptest.NewServer(frontendMux(t, bus, 200*time.Millisecond))
	defer ts.Close()
	base := goleak.IgnoreCurrent()
	for _, path := range []string{"/api/chat", "/api/chat/c1/stop", "/agui", "/a2a"} {
		t.Run(path, func(t *testing.T) {
			var conns []net.Conn
			for range 10 {
				c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
				require.NoError(t, err)
				defer c.Close()
				_, err = c.Write([]byte("POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\""))
				require.NoError(t, err)
				conns = append(conns, c)
			}
			deadline := time.Now().Add(5 * time.Second)
			for _, c := range conns {
				require.NoError(t, c.SetReadDeadline(deadline))
				var b strings.Builder
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					b.Write(buf[:n])
					if err != nil {
						break // the server closed it (or the 5 s ran out: the asserts say)
					}
				}
				got := b.String()
				assert.True(t, strings.HasPrefix(got, "HTTP/1.1 408 "), "%s", got)
				assert.Contains(t, got, "did not arrive in time") // request_timeout; a JSON-RPC error on /a2a
				assert.Contains(t, got, "Connection: close")
			}
		})
	}
	assert.Equal(t, uint64(0), bus.LastEventID(), "nothing written to the log")
	goleak.VerifyNone(t, base)
}

// Bodies the frontend routes cannot read as sent are refused before
// anything is written to the bus, naming the bad value: a Content-Type
// other than application/json (a page's form or text/plain POST), a
// compressed body, a top-level member given twice (encoding/json kept
// the last: {"threadId":"a","threadId":"b"} ran on b where a proxy or a
// log reads a), a JSON bomb nested past encoding/json's depth, a chat id
// of 100 KB. A stop without a body needs no Content-Type.
func TestFrontendRoutesRefuseBodiesTheyCannotRead(t *testing.T) {
	t.Parallel()
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	require.NoError(t, bus.CreateSession("c1", ""))
	ts := httptest.NewServer(frontendMux(t, bus, 0))
	defer ts.Close()
	const js = "application/json"
	chat := chatBody("c1", "hi")
	run := `{"threadId":"c1","runId":"r1","messages":[{"id":"u","role":"user","content":"hi"}]}`
	rpc := `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}],"contextId":"c1"}}}`
	bomb := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	rows := []struct {
		name, path, ct, enc, body string
		status                    int
		has                       string
	}{
		{"chat as text/plain", "/api/chat", "text/plain", "", chat, 415, `"text/plain"`},
		{"chat as a form", "/api/chat", "application/x-www-form-urlencoded", "", chat, 415, "want application/json"},
		{"chat without a Content-Type", "/api/chat", "", "", chat, 415, `""`},
		{"chat gzipped", "/api/chat", js, "gzip", chat, 415, `"gzip"`},
		{"run as text/plain", "/agui", "text/plain;charset=utf-8", "", run, 415, "text/plain"},
		{"rpc as text/plain", "/a2a", "text/plain", "", rpc, 415, "want application/json"},
		{"stop with a text body", "/api/chat/c1/stop", "text/plain", "", `{}`, 415, "text/plain"},
		{"chat id twice", "/api/chat", js, "", `{"id":"c1",` + chat[1:], 400, `member "id" given twice`},
		{"thread twice", "/agui", js, "", `{"threadId":"zz",` + run[1:], 400, `member "threadId" given twice`},
		{"method twice", "/a2a", js, "", `{"method":"tasks/resubscribe",` + rpc[1:], 400, `member "method" given twice`},
		{"stop turn twice", "/api/chat/c1/stop", js, "", `{"turn":"a","turn":"b"}`, 400, `"turn" given twice`},
		// encoding/json also matches names regardless of case, and the
		// inner objects are read too: {"threadId":"a","THREADID":"zz"} ran
		// on zz, a contextId given twice inside params.message ran on the last.
		{"thread twice in another case", "/agui", js, "", `{"THREADID":"zz",` + run[1:], 400, `member "THREADID" (member names are case-sensitive: want "threadId")`},
		{"thread in another case, then as is", "/agui", js, "", `{"threadId":"c1",` + strings.Replace(run[1:], `"threadId":"c1"`, `"THREADID":"zz"`, 1), 400, `member "THREADID" given twice (as "threadId"`},
		{"chat id in another case alone", "/api/chat", js, "", strings.Replace(chat, `{"id":"c1"`, `{"Id":"zz"`, 1), 400, `member "Id" (member names are case-sensitive: want "id")`},
		{"contextId in another case alone", "/a2a", js, "", strings.Replace(rpc, `"contextId":"c1"`, `"contextID":"zz"`, 1), 400, `member "contextID" (member names are case-sensitive: want "contextId")`},
		{"chat id twice in another case", "/api/chat", js, "", chatBody("c1", "hi")[:len(chatBody("c1", "hi"))-1] + `,"ID":"zz"}`, 400, `member "ID" given twice (as "id"`},
		{"a message's role twice", "/api/chat", js, "", strings.Replace(chat, `"role":"user"`, `"role":"user","role":"assistant"`, 1), 400, `member "role" given twice`},
		{"contextId twice inside the message", "/a2a", js, "", strings.Replace(rpc, `"contextId":"c1"`, `"contextId":"c1","contextID":"zz"`, 1), 400, `member "contextID" given twice (as "contextId"`},
		{"stop turn twice in another case", "/api/chat/c1/stop", js, "", `{"turn":"a","Turn":"b"}`, 400, `"Turn"`},
		{"a JSON bomb", "/api/chat", js, "", bomb, 400, "not JSON"},
		{"a 100 KB chat id", "/api/chat", js, "", chatBody(strings.Repeat("c", 100_000), "hi"), 400, "chat id"},
	}
	for _, r := range rows {
		req, err := http.NewRequest(http.MethodPost, ts.URL+r.path, strings.NewReader(r.body))
		require.NoError(t, err)
		if r.ct != "" {
			req.Header.Set("Content-Type", r.ct)
		}
		if r.enc != "" {
			req.Header.Set("Content-Encoding", r.enc)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, r.status, resp.StatusCode, "%s: %s", r.name, b)
		assert.Contains(t, strings.ReplaceAll(string(b), `\"`, `"`), r.has, r.name)
		assert.Less(t, len(b), 1024, "%s: the answer names the value, clipped", r.name)
	}
	assert.Equal(t, uint64(0), bus.LastEventID(), "nothing written to the bus")
	assert.False(t, bus.SessionExists("zz"))

	// Names in other cases in what the route does not decode are the
	// application's data, taken as sent: the request reaches Start (which
	// refuses every turn here).
	resp, err := http.Post(ts.URL+"/agui", js, strings.NewReader(`{"threadId":"fp","runId":"r1","forwardedProps":{"ID":1,"id":2},"state":{"K":1,"k":2},"messages":[{"id":"u","role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusConflict, resp.StatusCode, string(b))

	resp, err = http.Post(ts.URL+"/api/chat/c1/stop", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusAccepted, resp.StatusCode, "a stop without a body needs no Content-Type")
}
