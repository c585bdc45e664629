package aisdk_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/aisdk"
	"github.com/replaybus/replaybus/eventbus"
)

// brokenBody gives its text, then fails: a body cut by the network.
type brokenBody struct{ r io.Reader }

func (b *brokenBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, errors.New("connection reset by peer")
	}
	return n, err
}

// A stop whose body was cut on the way ({"turn":"other" and a reset) is a
// 400, and cancels nothing. It used to be read as an empty body, which is
// a cancel of every active turn of the chat: a stop of one turn stopped
// the others.
func TestAStopWithACutBodyCancelsNothing(t *testing.T) {
	t.Parallel()
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	require.NoError(t, bus.CreateSession("c", ""))
	tn, err := bus.StartTurn(context.Background(), "c", eventbus.TurnOptions{})
	require.NoError(t, err)
	defer tn.End(nil)
	h, err := aisdk.NewHandler(bus, aisdk.HandlerOptions{Start: func(*http.Request, aisdk.Message) (string, error) { return "", nil }})
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodPost, "/api/chat/c/stop", &brokenBody{strings.NewReader(`{"turn":"other"`)})
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	_, active := bus.ActiveTurn("c")
	assert.True(t, active, "the turn was cancelled by a stop whose body never arrived whole")
}
