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
