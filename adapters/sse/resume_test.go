package sse_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
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
			assert.Equal(t, []string{"msg:4", "msg:5", frame.TypeReplayComplete + ":0"}, got)
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

func TestHandlerCursorReplay(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{Epoch: "E1"})
	for range 3 {
		publish(t, b, "s1", "tick", nil)
	}
	h := newHandler(t, b, sse.HandlerOptions{})
	srv := serve(t, h, nil)
	u := srv.URL + "/session/s1/events"

	t.Run("no cursor: ring without replay_complete", func(t *testing.T) {
		s := openRaw(t, u, nil)
		for want := uint64(1); want <= 3; want++ {
			ev := s.next(t)
			assert.Equal(t, want, ev.ID)
			assert.True(t, ev.Replay)
			assert.Equal(t, fmt.Sprintf("E1-%d", want), s.dec.LastEventID())
		}
		ev := publish(t, b, "s1", "live", nil)
		got := s.next(t)
		assert.Equal(t, ev.ID, got.ID, "no replay_complete without a cursor")
		assert.False(t, got.Replay)
	})
	t.Run("epoch-qualified cursor", func(t *testing.T) {
		s := openRaw(t, u, http.Header{"Last-Event-ID": {"E1-2"}})
		assert.EqualValues(t, 3, s.next(t).ID)
		assert.EqualValues(t, 4, s.next(t).ID)
		assert.Equal(t, frame.TypeReplayComplete, s.next(t).Type)
	})
	t.Run("plain cursor", func(t *testing.T) {
		s := openRaw(t, u+"?lastEventId=4", nil)
		ev := s.next(t)
		assert.Equal(t, frame.TypeReplayComplete, ev.Type, "nothing after 4 to replay")
		assert.JSONEq(t, `{"lastReplayedEventId":4,"replayedCount":0}`, string(ev.Data))
	})
	t.Run("other epoch: epoch_reset frame, not an error", func(t *testing.T) {
		for _, hd := range []http.Header{{"Last-Event-ID": {"OLD-2"}}, {"Last-Event-ID": {"2"}, resume.HeaderEpoch: {"OLD"}}} {
			s := openRaw(t, u, hd)
			require.Equal(t, http.StatusOK, s.resp.StatusCode)
			ev := s.next(t)
			assert.Equal(t, frame.TypeStateResyncRequired, ev.Type)
			assert.Zero(t, ev.ID)
			assert.Contains(t, string(ev.Data), `"reason":"epoch_reset"`)
			assert.EqualValues(t, 1, s.next(t).ID, "the whole buffer is replayed")
			s.close()
		}
	})
}

// Issue 12.3: an X-Event-Epoch this server never issued but that is
// well-formed elsewhere (a UUID with hyphens) was answered 400. It is another
// incarnation's epoch: epoch_reset, then the whole buffer. Only a malformed
// value (control characters, over-long, invalid UTF-8) is a 400.
func TestHandlerForeignEpochIsEpochReset(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	for i := range 3 {
		publish(t, b, "s1", "t", i)
	}
	h := newHandler(t, b, sse.HandlerOptions{Retry: -1})
	const uuid = "550e8400-e29b-41d4-a716-446655440000"
	for name, hdr := range map[string]http.Header{
		"header":       {"X-Event-Epoch": {uuid}, "Last-Event-Id": {"2"}},
		"qualified id": {"Last-Event-Id": {uuid + "-2"}},
		"spaces":       {"X-Event-Epoch": {"old epoch"}, "Last-Event-Id": {"2"}},
		// docs/protocol.md's examples (once documented as refused):
		"punctuation in a qualified id": {"Last-Event-Id": {"foo!-2"}},
		"space in a qualified id":       {"Last-Event-Id": {"a b-2"}},
		"punctuation in the header":     {"X-Event-Epoch": {"garbage!!"}, "Last-Event-Id": {"2"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/session/s1/events", nil)
			r.SetPathValue("id", "s1")
			for k, v := range hdr {
				r.Header[k] = v
			}
			w := serveUntilID(t, h, r, 3)
			require.Equal(t, http.StatusOK, w.code(), w.body())
			evs := frames(t, w.body())
			require.NotEmpty(t, evs)
			assert.Equal(t, frame.TypeStateResyncRequired, evs[0].Type)
			var rd frame.ResyncData
			require.NoError(t, json.Unmarshal(evs[0].Data, &rd))
			assert.Equal(t, frame.ReasonEpochReset, rd.Reason)
			assert.Equal(t, b.Epoch(), rd.Epoch)
			assert.Equal(t, seq(1, 3), ids(evs), "the whole buffer after the reset")
		})
	}
	for name, v := range map[string]string{
		"control": "a\x01b", "newline": "a\nb", "DEL": "ab\x7f", "over-long": strings.Repeat("e", 65), "not UTF-8": "\xffab",
	} {
		w := serveDirect(t, h, "", http.Header{"X-Event-Epoch": {v}})
		assert.Equal(t, http.StatusBadRequest, w.Code, name)
		code, _ := errorBody(t, w)
		assert.Equal(t, resume.CodeInvalidEpoch, code, name)
	}
}

func TestClientReconnectsExactlyOnce(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 1000})
	require.NoError(t, b.CreateSession("s1", ""))
	h := newHandler(t, b, sse.HandlerOptions{Retry: 5 * time.Millisecond})
	srv := serve(t, h, dropEvery(50))

	const total = 200
	go func() {
		for i := range total {
			if _, err := b.Publish("s1", "tick", i); err != nil {
				return
			}
			if i%20 == 0 {
				runtime.Gosched() // let the client read while events are published
			}
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s := (&sse.Client{MaxBackoff: 20 * time.Millisecond}).Subscribe(ctx, srv.URL+"/session/s1/events", sse.StreamOptions{})
	defer s.Close()
	var got []uint64
	for len(got) < total {
		ev, err := s.Next()
		require.NoError(t, err, "after %d ids", len(got))
		if ev.ID != 0 {
			got = append(got, ev.ID)
		}
	}
	assert.Equal(t, seq(1, total), got, "every id exactly once, in order")
	assert.GreaterOrEqual(t, s.Connects(), total/50)
}

func TestClientResumesAfterEviction(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 1000})
	require.NoError(t, b.CreateSession("s1", ""))
	h := newHandler(t, b, sse.HandlerOptions{Retry: 5 * time.Millisecond})
	gate := make(chan struct{})
	srv := serve(t, h, gateFirst(gate))

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s := sse.Subscribe(ctx, srv.URL+"/session/s1/events?maxQueued=16", sse.StreamOptions{LastEventID: "0"})
	defer s.Close()
	type result struct {
		ev  eventbus.Event
		err error
	}
	results := make(chan result, 1000)
	go func() {
		for {
			ev, err := s.Next()
			results <- result{ev, err}
			if err != nil {
				return
			}
		}
	}()
	require.Eventually(t, func() bool { return b.Stats().Subscribers == 1 }, 5*time.Second, time.Millisecond)
	const total = 100
	for range total {
		publish(t, b, "s1", "tick", nil)
	}
	require.Eventually(t, func() bool { return b.Stats().Evicted == 1 }, 5*time.Second, time.Millisecond)
	close(gate)

	var got []uint64
	evicted := false
	for len(got) < total {
		r := <-results
		require.NoError(t, r.err)
		if r.ev.Type == frame.TypeClientEvicted {
			evicted = true
			assert.EqualValues(t, len(got)+1, jsonField(t, r.ev.Data, "droppedAfter"))
		}
		if r.ev.ID != 0 {
			got = append(got, r.ev.ID)
		}
	}
	assert.True(t, evicted, "the client saw client_evicted")
	assert.Equal(t, seq(1, total), got, "every id exactly once across the eviction")
	assert.Equal(t, 2, s.Connects())
	_ = s.Close()
	for r := range results {
		if r.err != nil {
			break
		}
	}
}

// The epoch sent on a resume is the one of the connection that delivered the
// cursor: a new server's epoch announced on a connection that dropped before
// any id must not be paired with the old server's cursor (the new server
// would then take the cursor as its own and skip its first events without an
// epoch_reset).
func TestClientEpochFollowsCursor(t *testing.T) {
	t.Parallel()
	got, seen, err := scriptedResumes(t,
		oldServerID5,
		func(w http.ResponseWriter) { // the restarted server answers, then the connection drops
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set(resume.HeaderEpoch, "NEW")
		})
	require.Error(t, err)
	require.Len(t, got, 1)
	require.Len(t, seen, 3)
	assert.Equal(t, "5", seen[2].Get("Last-Event-ID"))
	assert.Equal(t, "OLD", seen[2].Get(resume.HeaderEpoch), "the epoch of the cursor, not of the empty connection")
}

// TestClientEpochStaysWithCursorOverSyntheticFrames: frames without an
// id: line do not move the cursor, and so never pair the old server's
// cursor with the new server's epoch either — with plain ids that pair
// would resume at the old id in the new history and skip its first events
// without an epoch_reset. The restarted server's
// state_resync_required{epoch_reset} moves both together, to the start of
// the new epoch (issue 27.10: Stream.Epoch is the new one at that frame):
// a drop right after it resumes from id 0 of the new history, skipping
// nothing.
func TestClientEpochStaysWithCursorOverSyntheticFrames(t *testing.T) {
	t.Parallel()
	got, seen, err := scriptedResumes(t,
		oldServerID5,
		func(w http.ResponseWriter) { // the restarted server says epoch_reset, then the connection drops
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set(resume.HeaderEpoch, "NEW")
			_, _ = io.WriteString(w, "event: state_resync_required\ndata: {\"v\":1,\"id\":0,\"type\":\"state_resync_required\",\"session\":\"s1\",\"data\":{\"reason\":\"epoch_reset\",\"lastDeliveredId\":5,\"epoch\":\"NEW\"}}\n\n")
		},
		func(w http.ResponseWriter) { // it delivers its id 5 (the same text as the old cursor)
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set(resume.HeaderEpoch, "NEW")
			_, _ = io.WriteString(w, "id: 5\nevent: t\ndata: {\"v\":1,\"id\":5,\"type\":\"t\",\"session\":\"s1\"}\n\n")
		})
	require.Error(t, err)
	require.Len(t, got, 3)
	require.Len(t, seen, 4)
	assert.Equal(t, "0", seen[2].Get("Last-Event-ID"), "the start of the new epoch")
	assert.Equal(t, "NEW", seen[2].Get(resume.HeaderEpoch), "epoch_reset moves cursor and epoch together")
	assert.Equal(t, "5", seen[3].Get("Last-Event-ID"))
	assert.Equal(t, "NEW", seen[3].Get(resume.HeaderEpoch), "the new server's id 5 comes with its epoch")
}

// TestProtocolDocEpochExamples: docs/protocol.md's epoch examples — any
// well-formed foreign epoch is an epoch_reset (rows of
// TestHandlerForeignEpochIsEpochReset), and an empty epoch before the last
// '-' is malformed, a 400.
func TestProtocolDocEpochExamples(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	h := newHandler(t, b, sse.HandlerOptions{Retry: -1})
	// The well-formed foreign examples are rows of
	// TestHandlerForeignEpochIsEpochReset. An empty epoch before the last
	// '-' is malformed, not foreign.
	w := serveDirect(t, h, "", http.Header{"Last-Event-Id": {"-2"}})
	assert.Equal(t, http.StatusBadRequest, w.Code)
	code, _ := errorBody(t, w)
	assert.Equal(t, resume.CodeInvalidLastEventID, code)
}

// Issue 12.6: a 404 right after an in-memory restart (the agent has not
// recreated its session yet) ended the Go client for good. A 404 whose
// X-Event-Epoch is not the one the stream knew is retried for
// Client.RestartGrace; the stream then gets epoch_reset and goes on.
func TestClientRetriesNotFoundAfterRestart(t *testing.T) {
	t.Parallel()
	b1 := newBus(t, eventbus.Options{})
	require.NoError(t, b1.CreateSession("s1", ""))
	h1 := newHandler(t, b1, sse.HandlerOptions{Retry: time.Millisecond})
	var sw switchable
	mux1 := http.NewServeMux()
	mux1.Handle(sse.Pattern, h1)
	sw.set(mux1)
	srv := httptest.NewServer(&sw)
	t.Cleanup(srv.Close)

	s := (&sse.Client{Retry: time.Millisecond, MaxBackoff: 20 * time.Millisecond}).Subscribe(t.Context(),
		srv.URL+"/session/s1/events", sse.StreamOptions{})
	defer s.Close()
	publish(t, b1, "s1", "before", 1)
	ev, err := s.Next()
	require.NoError(t, err)
	require.EqualValues(t, 1, ev.ID)

	// Restart: a new bus without the session. The agent recreates it only
	// after the server has answered the client's reconnect with a 404, so
	// the client meets the 404 however late it reconnects (a timer here
	// made the test depend on the client reconnecting within it).
	b2 := newBus(t, eventbus.Options{})
	h2 := newHandler(t, b2, sse.HandlerOptions{Retry: time.Millisecond})
	mux2 := http.NewServeMux()
	var notFound atomic.Int32
	mux2.Handle(sse.Pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		missing := !b2.SessionExists("s1")
		h2.ServeHTTP(w, r) // a 404 returns at once; a stream runs until the test ends
		if missing && notFound.Add(1) == 1 {
			assert.NoError(t, b2.CreateSession("s1", ""))
			_, err := b2.Publish("s1", "after", 2)
			assert.NoError(t, err)
		}
	}))
	sw.set(mux2)
	require.NoError(t, h1.Close()) // ends the live stream: the client reconnects

	ev, err = s.Next()
	require.NoError(t, err, "a 404 from a restarted server is transient")
	assert.Equal(t, frame.TypeStateResyncRequired, ev.Type)
	assert.Contains(t, string(ev.Data), frame.ReasonEpochReset)
	ev, err = s.Next()
	require.NoError(t, err)
	assert.Equal(t, "after", ev.Type)
	assert.Positive(t, notFound.Load(), "the restarted server answered 404 at least once")
}

// oldServerID5 is the first answer of a scripted restart: the old server
// (epoch OLD) delivers id 5.
func oldServerID5(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set(resume.HeaderEpoch, "OLD")
	_, _ = io.WriteString(w, "id: 5\nevent: t\ndata: {\"v\":1,\"id\":5,\"type\":\"t\",\"session\":\"s1\"}\n\n")
}

// scriptedResumes runs an sse.Client against a server whose n-th
// connection gets answers[n] and every later one a 410 session_closed (which
// ends the client), and returns what the client read, the request headers
// of every connection in order, and how the client ended.
func scriptedResumes(t *testing.T, answers ...func(http.ResponseWriter)) ([]eventbus.Event, []http.Header, error) {
	t.Helper()
	var mu sync.Mutex
	var seen []http.Header
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		i := len(seen)
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		if i < len(answers) {
			answers[i](w)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		_, _ = io.WriteString(w, `{"code":"session_closed","message":"closed"}`)
	}))
	defer ts.Close()
	c := &sse.Client{Retry: time.Millisecond, MaxBackoff: time.Millisecond}
	got, err := readAll(t, c.Subscribe(t.Context(), ts.URL+"/session/s1/events", sse.StreamOptions{}))
	mu.Lock()
	defer mu.Unlock()
	return got, slices.Clone(seen), err
}
