package aisdk_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/acp"
	"github.com/replaybus/replaybus/adapters/a2a"
	"github.com/replaybus/replaybus/adapters/agui"
	"github.com/replaybus/replaybus/adapters/aisdk"
	"github.com/replaybus/replaybus/adapters/turns"
	"github.com/replaybus/replaybus/eventbus"
)

// h2Server serves h over HTTP/2: TLS (ALPN h2) or h2c (prior knowledge),
// and returns the server and a client that speaks only HTTP/2 to it.
func h2Server(t *testing.T, h http.Handler, tlsOn bool) (*httptest.Server, *http.Client) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	if tlsOn {
		srv.EnableHTTP2 = true
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv, srv.Client()
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &http.Client{Transport: &http.Transport{Protocols: &p, TLSClientConfig: &tls.Config{}}}
}

// sseData reads the data lines of an SSE body until the body ends.
func sseData(t *testing.T, body io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// Every frontend route and the cancel route over HTTP/2, with TLS and
// h2c: the AI SDK POST streams the turn to [DONE] and its GET resume
// streams the active one, the stop is 202; AG-UI's POST streams the run
// to RUN_FINISHED; A2A's SendStreamingMessage streams the task to
// completed; POST /session/{id}/cancel ends a turn (202); a body that
// never ends is 408, the stream reset, not the connection.
func TestFrontendRoutesOverHTTP2(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"tls", "h2c"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bus, err := eventbus.New(eventbus.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = bus.Close() })
			gate := make(chan struct{}) // the producer waits for the test to let the turn end
			run := func(session, id string) (string, error) {
				tn, err := bus.StartTurn(context.Background(), session, eventbus.TurnOptions{ID: id})
				if err != nil {
					return "", err
				}
				go func() {
					for _, s := range []string{"Hel", "lo"} {
						n := acp.Notification{SessionID: session, Update: acp.MessageChunk(s)}
						if _, err := tn.Publish(n.Type(), n); err != nil {
							return
						}
					}
					select {
					case <-gate:
					case <-tn.Context().Done():
					case <-time.After(10 * time.Second):
					}
					_, _ = tn.End(nil)
				}()
				return tn.ID(), nil
			}
			ai, err := aisdk.NewHandler(bus, aisdk.HandlerOptions{BodyTimeout: 300 * time.Millisecond,
				Start: func(r *http.Request, m aisdk.Message) (string, error) { return run(m.Chat, "") }})
			require.NoError(t, err)
			ag, err := agui.NewHandler(bus, agui.HandlerOptions{
				Start: func(r *http.Request, in agui.Input) (string, error) { return run(in.Thread, in.Run) }})
			require.NoError(t, err)
			aa, err := a2a.NewHandler(bus, a2a.HandlerOptions{
				Start: func(r *http.Request, m a2a.Message) (string, error) { return run(m.Context, m.Turn) }})
			require.NoError(t, err)
			th, err := turns.NewHandler(bus, turns.HandlerOptions{})
			require.NoError(t, err)
			mux := http.NewServeMux()
			mux.Handle("/api/chat", ai)
			mux.Handle("/api/chat/", ai)
			mux.Handle("/agui", ag)
			mux.Handle("/a2a", aa)
			mux.Handle(turns.CancelPattern, th.Cancel())
			srv, client := h2Server(t, mux, mode == "tls")
			post := func(path, body string) *http.Response {
				t.Helper()
				req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				require.NoError(t, err)
				require.Equal(t, 2, resp.ProtoMajor, "the test needs HTTP/2")
				return resp
			}

			// AI SDK: the POST's stream, a resume while it runs, the stop.
			resp := post("/api/chat", chatBody("c1", "hi"))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Eventually(t, func() bool { _, ok := bus.Turn("c1", ""); return ok }, 5*time.Second, time.Millisecond)
			g, err := client.Get(srv.URL + "/api/chat/c1/stream")
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, g.StatusCode)
			stop := post("/api/chat/c1/stop", "")
			stopBody, _ := io.ReadAll(stop.Body)
			stop.Body.Close()
			assert.Equal(t, http.StatusAccepted, stop.StatusCode, "%s", stopBody)
			for _, r := range []*http.Response{resp, g} {
				got := sseData(t, r.Body)
				r.Body.Close()
				require.NotEmpty(t, got)
				assert.Contains(t, strings.Join(got, "\n"), `"delta":"Hel"`)
				assert.Equal(t, "[DONE]", got[len(got)-1])
			}

			// AG-UI: a run to its end.
			resp = post("/agui", `{"threadId":"t1","runId":"r1","messages":[{"id":"u","role":"user","content":"hi"}]}`)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			gate <- struct{}{}
			got := strings.Join(sseData(t, resp.Body), "\n")
			resp.Body.Close()
			assert.Contains(t, got, `"RUN_STARTED"`)
			assert.Contains(t, got, `"RUN_FINISHED"`)

			// A2A: a task to completed.
			resp = post("/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}],"contextId":"x1"}}}`)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			gate <- struct{}{}
			got = strings.Join(sseData(t, resp.Body), "\n")
			resp.Body.Close()
			assert.Contains(t, got, `"completed"`)

			// The cancel route.
			require.NoError(t, bus.CreateSession("k1", ""))
			_, err = run("k1", "turn-k")
			require.NoError(t, err)
			resp = post("/session/k1/cancel", `{"turn":"turn-k"}`)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", b)
			assert.Contains(t, string(b), `"turn-k"`)

			// A body that never ends: 408 on its stream; the connection
			// serves the next request.
			pr, pw := io.Pipe()
			defer pw.Close()
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/chat", pr)
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			go func() { _, _ = fmt.Fprint(pw, `{"id":`) }()
			slow, err := client.Do(req)
			require.NoError(t, err)
			b, _ = io.ReadAll(slow.Body)
			slow.Body.Close()
			assert.Equal(t, http.StatusRequestTimeout, slow.StatusCode, "%s", b)
			assert.Empty(t, slow.Header.Get("Connection"), "no connection-specific header over HTTP/2")
			resp = post("/api/chat/c1/stop", "")
			resp.Body.Close()
			assert.Equal(t, http.StatusAccepted, resp.StatusCode, "the connection still serves")
		})
	}
}
