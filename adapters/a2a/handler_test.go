package a2a_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/a2a"
	"github.com/replaybus/replaybus/eventbus"
)

// Bad requests are JSON-RPC error responses under a 4xx naming the bad
// value; nothing reaches the bus.
func TestBadA2ARequestsPublishNothing(t *testing.T) {
	t.Parallel()
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	started := 0
	h, err := a2a.NewHandler(bus, a2a.HandlerOptions{Start: func(r *http.Request, m a2a.Message) (string, error) {
		started++
		tn, err := bus.StartTurn(context.Background(), m.Context, eventbus.TurnOptions{ID: m.Turn})
		if err != nil {
			return "", err
		}
		return tn.ID(), nil
	}})
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	defer ts.Close()
	require.NoError(t, bus.CreateSession("busy", ""))
	_, err = bus.StartTurn(context.Background(), "busy", eventbus.TurnOptions{ID: "running"})
	require.NoError(t, err)
	msg := func(ctx, text string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"message/stream","params":{"message":{"messageId":"m","contextId":"` + ctx + `","parts":[{"kind":"text","text":"` + text + `"}]}}}`
	}
	rows := []struct {
		name, body string
		status     int
		code       int
		says       string
	}{
		{"not JSON", `{`, 400, a2a.CodeParseError, "not a JSON object"},
		{"not JSON-RPC", `{"id":1,"method":"message/stream"}`, 400, a2a.CodeInvalidRequest, "JSON-RPC 2.0"},
		{"another method", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{}}`, 404, a2a.CodeMethodNotFound, `"tasks/get"`},
		{"no message", `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{}}`, 400, a2a.CodeInvalidParams, "message"},
		{"no text", msg("c1", ""), 400, a2a.CodeInvalidParams, "no text"},
		{"a context the bus refuses", msg(`a\u0001b`, "hi"), 400, a2a.CodeInvalidParams, "control character"},
		{"a task runs in the context", msg("busy", "hi"), 409, a2a.CodeInvalidRequest, "running@busy"},
		{"unknown task", `{"jsonrpc":"2.0","id":1,"method":"tasks/resubscribe","params":{"id":"nope@busy"}}`, 404, a2a.CodeTaskNotFound, `"nope@busy"`},
		{"task id without context", `{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"nope"}}`, 404, a2a.CodeTaskNotFound, "<turn>@<contextId>"},
		// A batch, a bare value and a member of the wrong type are named
		// as such, not as a Go type.
		{"a batch", `[` + msg("c1", "hi") + `]`, 400, a2a.CodeInvalidRequest, "a batch (a JSON array) is not served here"},
		{"a bare string", `"hi"`, 400, a2a.CodeInvalidRequest, "not a JSON-RPC request object"},
		{"jsonrpc a number", `{"jsonrpc":2,"id":1,"method":"message/stream"}`, 400, a2a.CodeInvalidRequest, `member "jsonrpc" is a JSON number`},
		{"a bad Last-Event-ID", `{"jsonrpc":"2.0","id":1,"method":"tasks/resubscribe","params":{"id":"running@busy"},"_lastEventId":"x-1:99999999999"}`, 400, a2a.CodeInvalidParams, "Last-Event-ID"},
	}
	before := bus.LastEventID()
	for _, r := range rows {
		req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(r.body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if strings.Contains(r.body, "_lastEventId") {
			req.Header.Set("Last-Event-ID", "x-1:99999999999")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var e struct {
			JSONRPC string
			Error   a2a.Error
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e), r.name)
		resp.Body.Close()
		assert.Equal(t, r.status, resp.StatusCode, r.name)
		assert.Equal(t, "2.0", e.JSONRPC, r.name)
		assert.Equal(t, r.code, e.Error.Code, r.name)
		assert.Contains(t, e.Error.Message, r.says, r.name)
		assert.NotContains(t, e.Error.Message, "Go ", r.name)
		assert.NotContains(t, e.Error.Message, "resume: ", r.name)
	}
	assert.Equal(t, before, bus.LastEventID(), "nothing published")
	assert.False(t, bus.SessionExists("c1"))
	assert.Zero(t, started)
}

// The card handler makes a relative URL absolute with the request's host.
func TestCardHandlerFillsTheURL(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(a2a.CardHandler(a2a.Card{Name: "n", URL: "/a2a"}))
	defer ts.Close()
	resp, err := http.Get(ts.URL + a2a.CardPath)
	require.NoError(t, err)
	defer resp.Body.Close()
	var c struct {
		URL                 string `json:"url"`
		SupportedInterfaces []struct{ URL string }
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&c))
	assert.Equal(t, ts.URL+"/a2a", c.URL)
	require.NotEmpty(t, c.SupportedInterfaces)
	assert.Equal(t, ts.URL+"/a2a", c.SupportedInterfaces[0].URL)
}

// A JSON-RPC error names the value as sent: '&', '<' and '>' are written
// as themselves, not as \u0026, \u003c, \u003e.
func TestA2AErrorBodiesDoNotEscapeHTML(t *testing.T) {
	t.Parallel()
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	h, err := a2a.NewHandler(bus, a2a.HandlerOptions{Start: func(*http.Request, a2a.Message) (string, error) { return "", nil }})
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	defer ts.Close()
	require.NoError(t, bus.CreateSession("c&d", ""))
	for _, id := range []string{"a&b<c>@c&d", "x>y"} {
		resp, err := http.Post(ts.URL, "application/json", strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"tasks/resubscribe","params":{"id":"`+id+`"}}`))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, id)
		assert.Contains(t, string(body), id, "the task id as sent")
		for _, esc := range []string{`\u0026`, `\u003c`, `\u003e`} {
			assert.NotContains(t, string(body), esc, id)
		}
	}
}
