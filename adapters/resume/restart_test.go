package resume_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// restartedServer is a Transport to a server that was killed and came
// back without the session: the first connect streams one event of epoch
// "old" and drops, every later one is 404 session_not_found from epoch
// "new". It records when each connect was made.
type restartedServer struct {
	mu       sync.Mutex
	connects []time.Time
}

func (r *restartedServer) Connect(context.Context, string, string) (resume.Conn, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.connects = append(r.connects, time.Now())
	if len(r.connects) == 1 {
		return &oneEventConn{}, "old", nil
	}
	return nil, "", &resume.StatusError{Status: http.StatusNotFound, Code: resume.CodeSessionNotFound,
		Message: `session "s1" not found`, Epoch: "new"}
}

// oneEventConn hands out one event, then the connection drops.
type oneEventConn struct{ sent bool }

func (c *oneEventConn) Read(context.Context) (resume.Frame, error) {
	if c.sent {
		return resume.Frame{}, io.ErrUnexpectedEOF
	}
	c.sent = true
	return resume.Frame{Event: eventbus.Event{ID: 1, Type: "note", Session: "s1"}, Cursor: "old-1"}, nil
}

func (c *oneEventConn) Close() error { return nil }

// A Go client across a hard restart of a server that does not re-create
// the session must stop with the 404 within RestartGrace of the first one
// (plus one request): before, the wait after a 404 was a whole backoff
// step whatever was left of the grace, so the stream went quiet for up to
// MaxBackoff past it (33–48 s instead of 30 s against the example server,
// "neither stops nor reconnects for 40 s" in one run of four).
func TestRestartedServer404StopsWithinGrace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		retry, grace     time.Duration
		maxBackoff       time.Duration
		wantRetriesAtMin int
	}{
		{"defaults", 0, 0, 0, 2},
		{"short grace, long backoff", time.Second, 5 * time.Second, time.Minute, 2},
		{"grace shorter than the first wait", 10 * time.Second, time.Second, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &restartedServer{}
				st := resume.NewStream(t.Context(), srv, "http://h/session/s1/events", resume.StreamOptions{},
					resume.Backoff{Retry: tc.retry, RestartGrace: tc.grace, MaxBackoff: tc.maxBackoff})
				defer st.Close()
				ev, err := st.Next()
				require.NoError(t, err)
				require.Equal(t, uint64(1), ev.ID)
				_, err = st.Next()
				stopped := time.Now()
				var se *resume.StatusError
				require.True(t, errors.As(err, &se), "stops with the 404, got %v", err)
				assert.Equal(t, http.StatusNotFound, se.Status)

				grace := tc.grace
				if grace == 0 {
					grace = resume.DefaultRestartGrace
				}
				srv.mu.Lock()
				defer srv.mu.Unlock()
				require.GreaterOrEqual(t, len(srv.connects), 2)
				first404 := srv.connects[1]
				// The fake clock makes these exact: the stop comes at the
				// grace's end, never a backoff step past it.
				assert.Equal(t, first404.Add(grace), stopped, "stopped at the end of the grace")
				assert.GreaterOrEqual(t, len(srv.connects)-2, tc.wantRetriesAtMin, "the 404 was retried during the grace")
				for i := 2; i < len(srv.connects); i++ {
					assert.False(t, srv.connects[i].After(first404.Add(grace)), "connect %d after the grace", i)
				}
			})
		})
	}
}

// scriptedServer hands out one scripted connection per connect and
// records the cursor and epoch each connect resumed from.
type scriptedServer struct {
	conns   [][]resume.Frame // frames of each connection, then it drops
	epochs  []string         // the epoch each connection announces
	resumed [][2]string      // cursor, epoch of each connect
}

func (s *scriptedServer) Connect(_ context.Context, cursor, epoch string) (resume.Conn, string, error) {
	i := len(s.resumed)
	s.resumed = append(s.resumed, [2]string{cursor, epoch})
	if i >= len(s.conns) {
		return nil, "", &resume.PermanentError{Err: errors.New("script over")}
	}
	return &scriptedConn{frames: s.conns[i]}, s.epochs[i], nil
}

type scriptedConn struct{ frames []resume.Frame }

func (c *scriptedConn) Read(context.Context) (resume.Frame, error) {
	if len(c.frames) == 0 {
		return resume.Frame{}, io.ErrUnexpectedEOF
	}
	f := c.frames[0]
	c.frames = c.frames[1:]
	return f, nil
}

func (c *scriptedConn) Close() error { return nil }

// Issue 27.10: Stream.Epoch was still the old server's when the
// epoch_reset frame was handed out (it moved only with the next id). It is
// the new epoch at once, the cursor is the new epoch's start, and a drop
// before the next id resumes from there: the whole new history, none of
// its first ids skipped.
func TestStreamEpochIsNewAtEpochReset(t *testing.T) {
	t.Parallel()
	reset := eventbus.Event{Session: "s1", Type: frame.TypeStateResyncRequired,
		Data: []byte(`{"reason":"epoch_reset","lastDeliveredId":5,"epoch":"new"}`)}
	srv := &scriptedServer{
		conns: [][]resume.Frame{
			{{Event: eventbus.Event{ID: 5, Session: "s1", Type: "note"}, Cursor: "old-5"}},
			{{Event: reset}},
			{{Event: eventbus.Event{ID: 1, Session: "s1", Type: "note", Replay: true}, Cursor: "new-1"}},
		},
		epochs: []string{"old", "new", "new"},
	}
	st := resume.NewStream(t.Context(), srv, "http://h/session/s1/events", resume.StreamOptions{},
		resume.Backoff{Retry: time.Millisecond})
	defer st.Close()
	ev, err := st.Next()
	require.NoError(t, err)
	require.Equal(t, uint64(5), ev.ID)
	assert.Equal(t, "old", st.Epoch())

	ev, err = st.Next()
	require.NoError(t, err)
	require.Equal(t, frame.TypeStateResyncRequired, ev.Type)
	assert.Equal(t, "new", st.Epoch(), "the new epoch as the epoch_reset frame is handed out")
	assert.Equal(t, "0", st.LastEventID(), "the start of the new epoch")

	ev, err = st.Next() // the connection dropped after the frame: a resume
	require.NoError(t, err)
	assert.Equal(t, uint64(1), ev.ID)
	assert.Equal(t, [][2]string{{"", ""}, {"old-5", "old"}, {"0", "new"}}, srv.resumed,
		"the resume after the reset asks for the new epoch from its start")
}
