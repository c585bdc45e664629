package serve

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/scope"
)

// TestAdmitOverflowPolicy: the handlers' overflow policy is a field
// default — HandlerOptions.OverflowPolicy, else the bus's, else
// drop_subscriber — that Configure may still change.
func TestAdmitOverflowPolicy(t *testing.T) {
	for _, tc := range []struct {
		bus, field, want eventbus.OverflowPolicy
	}{
		{"", "", eventbus.DropSubscriber},
		{eventbus.DropNewest, "", ""}, // the bus's own applies
		{"", eventbus.DropOldest, eventbus.DropOldest},
		{eventbus.DropNewest, eventbus.DropOldest, eventbus.DropOldest},
	} {
		bus, err := eventbus.New(eventbus.Options{OverflowPolicy: tc.bus})
		require.NoError(t, err)
		r := httptest.NewRequest(http.MethodGet, "/session/s1/events", nil)
		r.SetPathValue("id", "s1")
		a, err := Admit(httptest.NewRecorder(), r, bus, Hooks{OverflowPolicy: tc.field}, nil)
		require.NoError(t, err)
		assert.Equal(t, tc.want, a.Options.Policy, "bus %q field %q", tc.bus, tc.field)
		_ = bus.Close()
	}
}

// TestAdmitOrder: the transport's check runs after the request parsing and
// before Authorize; Authorize's StatusError is answered as it is.
func TestAdmitOrder(t *testing.T) {
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	defer bus.Close()
	var calls []string
	h := Hooks{Authorize: func(*http.Request, string, scope.Kind) error {
		calls = append(calls, "authorize")
		return &resume.StatusError{Status: 401, Code: "unauthorized"}
	}}
	check := func() error { calls = append(calls, "check"); return nil }
	r := httptest.NewRequest(http.MethodGet, "/session/s1/events?scope=nope", nil)
	r.SetPathValue("id", "s1")
	w := httptest.NewRecorder()
	_, err = Admit(w, r, bus, h, check)
	var serr *resume.StatusError
	require.ErrorAs(t, err, &serr)
	assert.Equal(t, resume.CodeInvalidScope, serr.Code)
	assert.Empty(t, calls, "a bad query stops before the check")
	assert.Equal(t, bus.Epoch(), w.Header().Get(resume.HeaderEpoch))

	r = httptest.NewRequest(http.MethodGet, "/session/s1/events", nil)
	r.SetPathValue("id", "s1")
	_, err = Admit(httptest.NewRecorder(), r, bus, h, check)
	require.ErrorAs(t, err, &serr)
	assert.Equal(t, 401, serr.Status)
	assert.Equal(t, []string{"check", "authorize"}, calls)

	r = httptest.NewRequest(http.MethodPost, "/session/s1/events", nil)
	_, err = Admit(httptest.NewRecorder(), r, bus, Hooks{Authorize: func(*http.Request, string, scope.Kind) error {
		return errors.New("never asked")
	}}, nil)
	require.ErrorAs(t, err, &serr)
	assert.Equal(t, http.StatusMethodNotAllowed, serr.Status)
}

// TestRegistry: Close cancels what is open and refuses more; Wait returns
// once the last stream is removed.
func TestRegistry(t *testing.T) {
	cancelled := 0
	r := NewRegistry(func(int) { cancelled++ })
	a, ok := r.Add(1)
	require.True(t, ok)
	b, ok := r.Add(2)
	require.True(t, ok)
	assert.Equal(t, 2, r.Each(nil))
	r.Close()
	r.Close()
	assert.Equal(t, 2, cancelled, "Close cancels each open stream once")
	_, ok = r.Add(3)
	assert.False(t, ok, "closed: no new stream")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, r.Wait(ctx), context.Canceled, "streams are still open")
	sum := 0
	r.Remove(a, func(v int) { sum += v })
	r.Remove(b, func(v int) { sum += v })
	assert.Equal(t, 3, sum)
	assert.NoError(t, r.Wait(context.Background()))
	assert.True(t, r.Closed())
}

func TestDurationOr(t *testing.T) {
	assert.EqualValues(t, 5, DurationOr(0, 5))
	assert.EqualValues(t, 0, DurationOr(-1, 5))
	assert.EqualValues(t, 7, DurationOr(7, 5))
}
