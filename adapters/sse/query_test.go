package sse_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/scope"
)

// TestHandlerRefusesMisspelledQueryParameter: ?lastEventID=5 (Mercure's
// spelling) used to resume nothing and say nothing. A parameter that is a
// case or separator variant, or a near miss, of one the endpoint reads is a
// 400 unknown_query_parameter naming it and the name it resembles; nothing
// is subscribed.
func TestHandlerRefusesMisspelledQueryParameter(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s1", "t", 1)
	h := newHandler(t, b, sse.HandlerOptions{Retry: -1})
	for _, tc := range []struct{ query, like string }{
		{"lastEventID=5", "lastEventId"},
		{"LastEventId=5", "lastEventId"},
		{"lasteventid=5", "lastEventId"},
		{"Last-Event-ID=5", "last_event_id"},
		{"last-event-id=5", "last_event_id"},
		{"last_event_ID=5", "last_event_id"},
		{"LAST_EVENT_ID=5", "last_event_id"},
		{"last.event.id=5", "last_event_id"},
		{"lastEvntId=5", "lastEventId"},
		{"lastEventIds=5", "lastEventId"},
		{"maxqueued=64", "maxQueued"},
		{"max_queued=64", "maxQueued"},
		{"maxQueue=64", "maxQueued"},
		{"MaxQueued=64", "maxQueued"},
		{"Scope=all", "scope"},
		{"scopes=all", "scope"},
		{"scoep=all", "scope"},
		{"Replay=0", "replay"},
		{"event=message", "events"},
		{"Events=message", "events"},
		{"coalese=acp", "coalesce"},
		{"Coalesce=acp", "coalesce"},
		{"coalesce=acp&throtle=150ms", "throttle"},
		{"token=x&lastEventID=5", "lastEventId"}, // an unrelated parameter beside it changes nothing
	} {
		t.Run(tc.query, func(t *testing.T) {
			w := serveDirect(t, h, tc.query, nil)
			require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
			code, msg := errorBody(t, w)
			assert.Equal(t, sse.CodeUnknownParameter, code)
			bad, _, _ := cutParam(tc.query)
			assert.Contains(t, msg, `"`+bad+`"`, "names the bad parameter")
			assert.Contains(t, msg, "did you mean "+tc.like+"?", "names the parameter it resembles")
		})
	}
	assert.Zero(t, b.Stats().Subscribers, "a refused request registers no subscriber")
	assert.Zero(t, h.Stats().Started)
}

// cutParam returns the name of the last parameter of a raw query.
func cutParam(q string) (name, value string, ok bool) {
	for i := len(q) - 1; i >= 0; i-- {
		if q[i] == '&' {
			q = q[i+1:]
			break
		}
	}
	for i := 0; i < len(q); i++ {
		if q[i] == '=' {
			return q[:i], q[i+1:], true
		}
	}
	return q, "", false
}

// TestHandlerIgnoresUnrelatedQueryParameters: parameters an embedder puts on
// the URL (a token its Authorize hook reads, jQuery's ?_= cache-buster, a
// version) are not refused by default, and the known ones beside them still
// work.
func TestHandlerIgnoresUnrelatedQueryParameters(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	for i := range 3 {
		publish(t, b, "s1", "t", i)
	}
	tokens := make(chan string, 16)
	h := newHandler(t, b, sse.HandlerOptions{Retry: -1, Authorize: func(r *http.Request, _ string, _ scope.Kind) error {
		tokens <- r.URL.Query().Get("token")
		return nil
	}})
	srv := serve(t, h, nil)
	for _, q := range []string{
		"token=abc&lastEventId=1",
		"_=1712345678901&lastEventId=1",
		"v=2&t=9&cb=x&lastEventId=1",
		"access_token=abc&session=s1&id=7&format=json&lang=de&lastEventId=1",
		"utm_source=mail&nocache=1&lastEventId=1",
	} {
		s := openRaw(t, srv.URL+"/session/s1/events?"+q, nil)
		assert.Equal(t, uint64(2), s.next(t).ID, "%s: resumes after 1", q)
		s.close()
	}
	assert.Equal(t, "abc", <-tokens, "the Authorize hook still sees the embedder's parameter")
	waitIdle(t, h, b)
}

// TestHandlerStrictQuery: with HandlerOptions.Query.Strict every parameter
// the endpoint does not read is refused, naming it and the accepted names,
// except those listed in Query.Allow — which are also exempt from the
// look-alike rule in the default mode.
func TestHandlerStrictQuery(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	publish(t, b, "s1", "t", 1)

	strict := newHandler(t, b, sse.HandlerOptions{Retry: -1, Query: sse.QueryRules{Strict: true, Allow: []string{"token"}}})
	w := serveDirect(t, strict, "scope=session&cb=1", nil)
	require.Equal(t, http.StatusBadRequest, w.Code)
	code, msg := errorBody(t, w)
	assert.Equal(t, sse.CodeUnknownParameter, code)
	assert.Contains(t, msg, `unknown query parameter "cb"`)
	assert.Contains(t, msg, "lastEventId")
	// A look-alike gets the suggestion in strict mode too.
	w = serveDirect(t, strict, "lastEventID=1", nil)
	require.Equal(t, http.StatusBadRequest, w.Code)
	_, msg = errorBody(t, w)
	assert.Contains(t, msg, "did you mean lastEventId?")

	srv := serve(t, strict, nil)
	s := openRaw(t, srv.URL+"/session/s1/events?token=abc&scope=session", nil)
	assert.Equal(t, uint64(1), s.next(t).ID, "an allowed parameter passes in strict mode")
	s.close()

	// Default mode: Allow exempts an application's own look-alike.
	lax := newHandler(t, b, sse.HandlerOptions{Retry: -1, Query: sse.QueryRules{Allow: []string{"event"}}})
	srv = serve(t, lax, nil)
	s = openRaw(t, srv.URL+"/session/s1/events?event=mine", nil)
	assert.Equal(t, uint64(1), s.next(t).ID)
	s.close()
	waitIdle(t, strict, b)
	waitIdle(t, lax, b)
}

// TestParseRequestWithRules: ParseRequest applies the default rules and
// ParseRequestWith the given ones, for other transports of the endpoint.
func TestParseRequestWithRules(t *testing.T) {
	t.Parallel()
	r, err := http.NewRequest(http.MethodGet, "/session/s1/events?last_event_Id=3&token=x", nil)
	require.NoError(t, err)
	_, serr := sse.ParseRequest(r, "s1", "e")
	require.NotNil(t, serr)
	assert.Equal(t, sse.CodeUnknownParameter, serr.Code)
	assert.Contains(t, serr.Message, "last_event_id")

	r, err = http.NewRequest(http.MethodGet, "/session/s1/events?last_event_id=3&token=x", nil)
	require.NoError(t, err)
	o, serr := sse.ParseRequest(r, "s1", "e")
	require.Nil(t, serr)
	require.NotNil(t, o.Cursor)
	assert.Equal(t, uint64(3), o.Cursor.ID)
	_, serr = sse.ParseRequestWith(r, "s1", "e", sse.QueryRules{Strict: true})
	require.NotNil(t, serr)
	assert.Contains(t, serr.Message, `"token"`)
	_, serr = sse.ParseRequestWith(r, "s1", "e", sse.QueryRules{Strict: true, Allow: []string{"token"}})
	assert.Nil(t, serr)
}
