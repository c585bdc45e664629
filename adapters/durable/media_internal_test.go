package durable

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
)

// The media types a process interns are never forgotten and at most
// 4,096 (eventbus.Bus.PublishBytes): streams created with ever new content
// types have the bus intern at most maxMediaTypes of them; a stream of a
// further new type is published as application/octet-stream (and still
// answers with its own content type), one of a type already interned
// keeps it, and the application can still publish byte payloads of new
// types.
func TestStreamsInternAtMostMaxMediaTypes(t *testing.T) {
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	h, err := NewHandler(bus, HandlerOptions{})
	require.NoError(t, err)
	put := func(name, ct string) {
		t.Helper()
		r := httptest.NewRequest(http.MethodPut, Pattern+name, nil)
		r.Header.Set("Content-Type", ct)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, http.StatusCreated, w.Code, "%s: %s", ct, w.Body)
	}
	typ := func(i int) string { return "application/x-review-cap-" + strconv.Itoa(i) }
	for i := range maxMediaTypes {
		put("s"+strconv.Itoa(i), typ(i))
	}
	first, ok := h.streams.Load("s0")
	require.True(t, ok)
	assert.Equal(t, typ(0), first.media)

	put("over", typ(maxMediaTypes)+"; Q=1")
	over, ok := h.streams.Load("over")
	require.True(t, ok)
	assert.Equal(t, "application/octet-stream", over.media, "a new type beyond the bound")
	assert.Equal(t, typ(maxMediaTypes)+"; Q=1", over.ctype, "the stream keeps its content type")
	ev := (eventbus.Event{}).WithContentType
	_, err = ev(typ(maxMediaTypes))
	require.NoError(t, err, "the application may still intern a new type")

	put("again", "Application/X-Review-Cap-7")
	again, ok := h.streams.Load("again")
	require.True(t, ok)
	assert.Equal(t, "Application/X-Review-Cap-7", again.media, "a type interned already, in another spelling")
	put("json", "application/json")
	put("text", "text/plain; charset=utf-8")
	text, ok := h.streams.Load("text")
	require.True(t, ok)
	assert.Equal(t, "application/octet-stream", text.media, "beyond the bound, whatever the type")
}
