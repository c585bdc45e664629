package sse_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

// cursorLog records the cursor (Last-Event-ID) of every request, in order.
type cursorLog struct {
	mu      sync.Mutex
	cursors []string
}

func (l *cursorLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.cursors = append(l.cursors, r.Header.Get("Last-Event-ID"))
		l.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (l *cursorLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.cursors...)
}

// TestResumeCursorWinsOverReplay0 (issue 18 item 1): on a live-only URL
// (?replay=0) a cursor — the Last-Event-ID header or ?last_event_id= —
// still replays what follows it, then replay_complete: a resume always
// replays.
func TestResumeCursorWinsOverReplay0(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	for i := range 5 {
		publish(t, b, "s1", "msg", i)
	}
	srv := serve(t, newHandler(t, b, sse.HandlerOptions{}), nil)
	for _, tc := range []struct {
		name   string
		query  string
		header http.Header
	}{
		{"header", "?replay=0", http.Header{"Last-Event-Id": {"3"}}},
		{"epoch header", "?replay=0", http.Header{"Last-Event-Id": {b.Epoch() + "-3"}}},
		{"last_event_id", "?replay=0&last_event_id=3", nil},
		{"lastEventId", "?replay=0&lastEventId=3", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openRaw(t, srv.URL+"/session/s1/events"+tc.query, tc.header)
			defer s.close()
			var got []string
			for range 3 {
				ev := s.next(t)
				got = append(got, ev.Type+":"+strconv.FormatUint(ev.ID, 10))
			}
			assert.Equal(t, []string{"msg:4", "msg:5", eventbus.TypeReplayComplete + ":0"}, got)
		})
	}
}

// TestClientResumesLiveOnlyAcrossCuts (issue 18 item 1): a Go client on a
// live-only URL, its connection cut 6 times while 120 events are published,
// receives all 120 exactly once, in order, and each reconnect carries the
// newest id it had (the stream_start frame's before its first event).
func TestClientResumesLiveOnlyAcrossCuts(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 1000})
	require.NoError(t, b.CreateSession("s1", ""))
	var log cursorLog
	srv := serve(t, newHandler(t, b, sse.HandlerOptions{Retry: 10 * time.Millisecond}), log.wrap)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := &sse.Client{Retry: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	st := cl.Subscribe(ctx, srv.URL+"/session/s1/events?replay=0", sse.StreamOptions{})
	defer st.Close()

	const total, cuts = 120, 6
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Wait for the first connection before publishing: a live-only
		// stream only promises what comes after it started.
		waitConnects(ctx, t, st, 1)
		for i := range total {
			_, err := b.Publish("s1", "msg", i)
			assert.NoError(t, err)
			if k := i/(total/cuts) + 1; i%(total/cuts) == 5 {
				waitConnects(ctx, t, st, k) // a cut while reconnecting would cut nothing
				srv.CloseClientConnections()
			}
		}
	}()
	var got []uint64
	lastOf := map[int]string{} // connection → the cursor the client held at its end
	for len(got) < total {
		ev, err := st.Next()
		require.NoError(t, err)
		if ev.ID == 0 {
			continue
		}
		got = append(got, ev.ID)
		lastOf[st.Connects()] = st.LastEventID()
	}
	wg.Wait()
	for i, id := range got {
		require.EqualValues(t, i+1, id, "every id once, in order")
	}
	cursors := log.all()
	require.GreaterOrEqual(t, len(cursors), cuts+1, "six cuts, six resumes")
	assert.Empty(t, cursors[0], "the first connect has no cursor")
	// Each reconnect carries the id of the last event the previous
	// connection delivered — or, when it delivered none, the stream_start frame's.
	for k := 2; k <= len(cursors); k++ {
		want, ok := lastOf[k-1]
		if !ok {
			continue // that connection delivered no event: checked by the ids above
		}
		assert.Equal(t, want, cursors[k-1], "reconnect %d", k-1)
		assert.True(t, strings.HasPrefix(cursors[k-1], b.Epoch()+"-"), "epoch-qualified by default: %q", cursors[k-1])
	}
}

// waitConnects waits until st has connected k times (or ctx ends).
func waitConnects(ctx context.Context, t *testing.T, st interface{ Connects() int }, k int) {
	t.Helper()
	assert.Eventually(t, func() bool { return st.Connects() >= k || ctx.Err() != nil }, 30*time.Second, time.Millisecond,
		"the client did not connect %d times", k)
}

// TestLiveOnlyStreamStartsWithItsPosition (issue 18 item 3): a live-only
// stream begins with a stream_start frame whose id: line names the newest
// id before it subscribed — it sets EventSource's lastEventId; the Go
// client takes it and returns no event for it — so that a client cut
// before its first event resumes exactly. Streams that replay or resume
// start without it.
func TestLiveOnlyStreamStartsWithItsPosition(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{Epoch: "E1"})
	publish(t, b, "s1", "old", nil)
	publish(t, b, "s1", "old", nil)
	started := make(chan struct{}, 8)
	srv := serve(t, newHandler(t, b, sse.HandlerOptions{}), func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&startWatch{ResponseWriter: w, started: started}, r)
		})
	})

	t.Run("wire", func(t *testing.T) {
		assert.Equal(t, []string{"retry: 3000", "", "id: E1-2", "event: stream_start"}, headLines(t, srv.URL+"/session/s1/events?replay=0", 4),
			"the stream_start frame names the newest id before the subscription")
		<-started
	})

	t.Run("client cut before its first event", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var log cursorLog
		srv := serve(t, newHandler(t, b, sse.HandlerOptions{}), func(next http.Handler) http.Handler {
			return log.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				next.ServeHTTP(&startWatch{ResponseWriter: w, started: started}, r)
			}))
		})
		cl := &sse.Client{Retry: 10 * time.Millisecond}
		st := cl.Subscribe(ctx, srv.URL+"/session/s1/events?replay=0", sse.StreamOptions{})
		defer st.Close()
		type result struct {
			ev  eventbus.Event
			err error
		}
		res := make(chan result, 1)
		go func() { ev, err := st.Next(); res <- result{ev, err} }()
		<-started // the stream_start frame is on its way
		srv.CloseClientConnections()
		missed := publish(t, b, "s1", "during_cut", nil)
		r := <-res
		require.NoError(t, r.err)
		assert.Equal(t, missed.ID, r.ev.ID, "the event published during the cut is replayed")
		assert.True(t, r.ev.Replay)
		cursors := log.all()
		require.GreaterOrEqual(t, len(cursors), 2)
		assert.Equal(t, "E1-2", cursors[1], "the reconnect resumes from the stream_start id")
	})

	t.Run("not on a replaying stream", func(t *testing.T) {
		assert.Equal(t, []string{"retry: 3000", "", "id: E1-1", "event: old"}, headLines(t, srv.URL+"/session/s1/events", 4))
		assert.Equal(t, []string{"retry: 3000", "", "id: E1-2", "event: old"},
			headLines(t, srv.URL+"/session/s1/events?replay=0&lastEventId=E1-1", 4), "nor on a resume: the cursor is its start")
	})
}

// headLines returns the first n lines of the stream at url.
func headLines(t *testing.T, url string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	for len(lines) < n && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// startWatch signals once the handler has written the head of a stream
// that carries a stream_start frame.
type startWatch struct {
	http.ResponseWriter
	started chan<- struct{}
	once    sync.Once
}

func (s *startWatch) Write(p []byte) (int, error) {
	n, err := s.ResponseWriter.Write(p)
	if strings.Contains(string(p), "event: stream_start") {
		if f, ok := s.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		s.once.Do(func() { s.started <- struct{}{} })
	}
	return n, err
}

func (s *startWatch) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// TestClientKeepsReopenedSession (issue 18 item 2): a sub-agent's session
// closed and reopened with CreateSession keeps its buffer, its old
// session_closed included. A client without a cursor, or with one from
// before the close, receives that replayed session_closed and goes on with
// the reopened session's events; only a live session_closed ends it.
func TestClientKeepsReopenedSession(t *testing.T) {
	t.Parallel()
	for _, cursor := range []string{"", "2"} {
		t.Run("cursor="+cursor, func(t *testing.T) {
			b := newBus(t, eventbus.Options{})
			require.NoError(t, b.CreateSession("run", ""))
			require.NoError(t, b.CreateSession("s1", "run"))
			publish(t, b, "s1", "before", nil) // 1
			publish(t, b, "s1", "before", nil) // 2
			require.NoError(t, b.CloseSession("s1"))
			require.NoError(t, b.CreateSession("s1", "run"))
			publish(t, b, "s1", "after", nil)
			srv := serve(t, newHandler(t, b, sse.HandlerOptions{}), nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st := sse.Subscribe(ctx, srv.URL+"/session/s1/events", sse.StreamOptions{LastEventID: cursor, Epoch: b.Epoch()})
			defer st.Close()
			var got []string
			for {
				ev, err := st.Next()
				if err != nil {
					require.ErrorIs(t, err, eventbus.ErrSessionClosed)
					break
				}
				if ev.ID == 0 {
					continue
				}
				got = append(got, ev.Type+":"+strconv.FormatBool(ev.Replay))
				switch {
				case ev.Type == "after" && ev.Replay:
					publish(t, b, "s1", "after", nil) // a live one, once the replay is through
				case ev.Type == "after":
					require.NoError(t, b.CloseSession("s1"))
				}
			}
			want := []string{"before:true", "before:true", "session_closed:true", "after:true", "after:false", "session_closed:false"}
			if cursor != "" {
				want = want[2:]
			}
			assert.Equal(t, want, got, "nothing lost; only the live session_closed ends the client")
			assert.Equal(t, 1, st.Connects(), "nor does the handler end the stream on the replayed one")
		})
	}
}
