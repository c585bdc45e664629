package resume

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBackoffBoundsAndJitter(t *testing.T) {
	t.Parallel()
	b := Backoff{Retry: 100 * time.Millisecond, MaxBackoff: time.Second}
	s := NewStream(context.Background(), nil, "http://x/session/a%2Fb/events", StreamOptions{}, b)
	defer s.Close()
	assert.Equal(t, "a/b", s.session, "session taken from the URL")
	for failures, want := range []time.Duration{100, 200, 400, 800, 1000, 1000, 1000} {
		s.failures = failures
		want *= time.Millisecond
		if want > time.Second {
			want = time.Second
		}
		seen := map[time.Duration]bool{}
		for range 200 {
			d := s.backoff()
			assert.GreaterOrEqual(t, d, want/2, "failures %d", failures)
			assert.LessOrEqual(t, d, want, "failures %d", failures)
			seen[d] = true
		}
		assert.Greater(t, len(seen), 10, "jittered")
	}
	s.failures, s.retry = 0, 5*time.Second // a server retry above MaxBackoff is honoured
	assert.GreaterOrEqual(t, s.backoff(), 2500*time.Millisecond)
	s.failures, s.retry, s.minWait = 0, time.Millisecond, 3*time.Second // Retry-After raises it
	d := s.backoff()
	assert.GreaterOrEqual(t, d, 3*time.Second)
	assert.LessOrEqual(t, d, 4500*time.Millisecond)
}

func TestSessionFromURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://h/session/s1/events":             "s1",
		"ws://h/session/s1/ws":                   "s1",
		"http://h/api/session/s%201/events/?x=1": "s 1",
		"http://h/sessions/s1/events":            "",
		"http://h/session/s1/stream":             "",
		"http://h/events":                        "",
		"::bad":                                  "",
	} {
		assert.Equal(t, want, sessionFromURL(in), in)
	}
}

// Issue 12.6: 40 clients told Retry-After: 5 came back within the same 50 ms
// because the jitter was clamped to the Retry-After floor. The waits must
// spread over seconds, never below the floor.
func TestBackoffRetryAfterSpreadsClients(t *testing.T) {
	t.Parallel()
	var lo, hi time.Duration
	for i := range 40 {
		s := NewStream(context.Background(), nil, "http://x/session/s/events", StreamOptions{}, Backoff{})
		s.failures, s.minWait = 1, 5*time.Second
		d := s.backoff()
		s.Close()
		assert.GreaterOrEqual(t, d, 5*time.Second, "Retry-After is a floor")
		if i == 0 || d < lo {
			lo = d
		}
		if d > hi {
			hi = d
		}
	}
	assert.Greater(t, hi-lo, time.Second, "40 clients spread over %v only", hi-lo)
}
