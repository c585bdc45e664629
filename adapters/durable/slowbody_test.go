package durable_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/durable"
	"github.com/replaybus/replaybus/eventbus"
)

// slowReader sends its parts with a pause before each; after stop is
// closed it fails at once.
type slowReader struct {
	parts []string
	pause time.Duration
	stop  chan struct{}
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(s.parts) == 0 {
		return 0, io.EOF
	}
	select {
	case <-time.After(s.pause):
	case <-s.stop:
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, s.parts[0])
	s.parts[0] = s.parts[0][n:]
	if s.parts[0] == "" {
		s.parts = s.parts[1:]
	}
	return n, nil
}

// An append's body that arrives slowly but whole is answered, and one that
// never finishes is 408 request_timeout. The handler armed its
// WriteTimeout when the request came in, so an upload slower than it had
// its append stored and its answer cut (the client saw the connection
// drop and would retry: a duplicate), and a body cut by the server's read
// deadline was answered into a passed write deadline: nothing.
func TestASlowBodyIsAnswered(t *testing.T) {
	const writeTimeout = 250 * time.Millisecond
	bus, err := eventbus.New(eventbus.Options{Epoch: "e1"})
	require.NoError(t, err)
	defer func() { _ = bus.Close() }()
	h, err := durable.NewHandler(bus, durable.HandlerOptions{WriteTimeout: writeTimeout})
	require.NoError(t, err)
	defer func() { _ = h.Close() }()
	// As a server bounds a body's arrival (the example server's
	// BodyTimeout): a read deadline when the request comes in.
	const readDeadline = 1500 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(readDeadline))
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	base := srv.URL + durable.Pattern

	put, err := http.NewRequest(http.MethodPut, base+"s", nil)
	require.NoError(t, err)
	put.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(put)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	for _, tc := range []struct {
		name     string
		body     *slowReader
		length   int64 // announced; -1 chunked
		status   int
		wantCode string
	}{
		// Four pauses of 150 ms: over twice the write timeout, within the read deadline.
		{"slow but whole", &slowReader{parts: []string{"ab", "cd", "ef", "gh"}, pause: 150 * time.Millisecond}, 8, http.StatusNoContent, ""},
		// Announces 8 bytes, sends 2, then waits past the read deadline.
		{"never finishes", &slowReader{parts: []string{"ab", ""}, pause: readDeadline + 500*time.Millisecond}, 8, http.StatusRequestTimeout, "request_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.body.stop = make(chan struct{})
			defer close(tc.body.stop)
			req, err := http.NewRequest(http.MethodPost, base+"s", tc.body)
			require.NoError(t, err)
			req.Header.Set("Content-Type", "text/plain")
			req.ContentLength = tc.length
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err, "an answer, not a cut connection")
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			assert.Equal(t, tc.status, resp.StatusCode, "%s", b)
			if tc.wantCode != "" {
				var e struct{ Code, Message string }
				require.NoError(t, json.Unmarshal(b, &e))
				assert.Equal(t, tc.wantCode, e.Code)
				assert.True(t, strings.Contains(e.Message, "of 8"), "the message says how much arrived of what: %q", e.Message)
			}
		})
	}
}

// The subscription APIs' bodies (__ds/subscriptions/…: PUT, POST streams,
// claim, ack, release, callback) keep the appends' rule: a body that
// arrives slowly but whole is answered, however long it took within the
// server's read deadline (the write deadline starts when the body is in),
// and one that never finishes is 408 REQUEST_TIMEOUT in the APIs' own
// shape, naming how much arrived; one over 1 MiB is 413 PAYLOAD_TOO_LARGE.
// Before, the WriteTimeout armed when the request came in was spent by
// the upload: the subscription was made and its answer cut.
func TestASlowSubscriptionBodyIsAnswered(t *testing.T) {
	const writeTimeout = 250 * time.Millisecond
	const readDeadline = 1500 * time.Millisecond
	bus, err := eventbus.New(eventbus.Options{Epoch: "e1"})
	require.NoError(t, err)
	defer func() { _ = bus.Close() }()
	h, err := durable.NewHandler(bus, durable.HandlerOptions{WriteTimeout: writeTimeout, Subscriptions: true})
	require.NoError(t, err)
	defer func() { _ = h.Close() }()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(readDeadline))
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	base := srv.URL + durable.Pattern
	put, err := http.NewRequest(http.MethodPut, base+"s", strings.NewReader(`{"n":1}`))
	require.NoError(t, err)
	put.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(put)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	send := func(method, path string, body io.Reader, length int64) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = length
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err, "an answer, not a cut connection")
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal(b, &e)
		return resp.StatusCode, e.Error.Code, e.Error.Message
	}
	slow := func(s string) *slowReader { // four pauses of 150 ms: over twice the write timeout
		q := len(s) / 4
		return &slowReader{parts: []string{s[:q], s[q : 2*q], s[2*q : 3*q], s[3*q:]}, pause: 150 * time.Millisecond, stop: make(chan struct{})}
	}

	sub := `{"type":"pull-wake","streams":["s"],"wake_stream":"s"}`
	status, _, msg := send(http.MethodPut, "__ds/subscriptions/p", slow(sub), int64(len(sub)))
	assert.Equal(t, http.StatusCreated, status, "a slow PUT: %s", msg)
	streams := `{"streams":["s","t"]}`
	status, _, msg = send(http.MethodPost, "__ds/subscriptions/p/streams", slow(streams), int64(len(streams)))
	assert.Equal(t, http.StatusNoContent, status, "a slow POST streams: %s", msg)
	claim := `{"worker":"w1"}`
	status, code, msg := send(http.MethodPost, "__ds/subscriptions/p/claim", slow(claim), int64(len(claim)))
	assert.NotEqual(t, http.StatusRequestTimeout, status, "a slow claim: %s %s", code, msg)

	for _, path := range []string{"__ds/subscriptions/q", "__ds/subscriptions/p/streams", "__ds/subscriptions/p/ack", "__ds/subscriptions/p/release"} {
		method := http.MethodPost
		if path == "__ds/subscriptions/q" {
			method = http.MethodPut
		}
		never := &slowReader{parts: []string{`{"st`, ""}, pause: readDeadline + 500*time.Millisecond, stop: make(chan struct{})}
		status, code, msg = send(method, path, never, 40)
		close(never.stop)
		assert.Equal(t, [2]any{http.StatusRequestTimeout, "REQUEST_TIMEOUT"}, [2]any{status, code}, "%s %s: %s", method, path, msg)
		assert.Contains(t, msg, "bytes arrived of 40", "%s", path)
	}
	big := strings.Repeat(" ", 1<<20+1)
	status, code, _ = send(http.MethodPut, "__ds/subscriptions/r", strings.NewReader(big), int64(len(big)))
	assert.Equal(t, [2]any{http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE"}, [2]any{status, code})
}
