package sse_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
)

// serveMany mounts h at sse.ManyPattern and sse.ChangePattern.
func serveMany(t *testing.T, h *sse.Handler) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(sse.ManyPattern, h)
	mux.Handle(sse.ChangePattern, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = h.Close() })
	return srv
}

// manyStream is an open many-sessions stream read frame by frame.
type manyStream struct {
	t      *testing.T
	resp   *http.Response
	dec    *sse.Decoder
	cancel context.CancelFunc
}

func openMany(t *testing.T, srv *httptest.Server, path, lastID string) *manyStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
	require.NoError(t, err)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	}
	s := &manyStream{t: t, resp: resp, dec: sse.NewDecoder(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	return s
}

func (s *manyStream) close() { s.cancel(); _ = s.resp.Body.Close() }

// next returns the next frame's envelope and its id: line.
func (s *manyStream) next() (eventbus.Event, sse.Frame) {
	s.t.Helper()
	f, err := s.dec.Next()
	require.NoError(s.t, err)
	ev, err := sse.DecodeEvent(f)
	require.NoError(s.t, err)
	return ev, f
}

func TestManySessionsSSE(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	h := newHandler(t, b, sse.HandlerOptions{})
	srv := serveMany(t, h)
	for _, s := range []string{"a", "b", "c"} {
		require.NoError(t, b.CreateSession(s, ""))
	}
	publish(t, b, "a", "m", 1) // 1
	publish(t, b, "c", "m", 1) // 2
	publish(t, b, "b", "m", 1) // 3

	st := openMany(t, srv, "/events?session=a&session=b&session=zz", "")
	conn, _ := st.next()
	require.Equal(t, resume.TypeConnection, conn.Type)
	var cd struct {
		Connection string                `json:"connection"`
		Sessions   []resume.SessionScope `json:"sessions"`
	}
	require.NoError(t, json.Unmarshal(conn.Data, &cd))
	assert.Len(t, cd.Sessions, 2)
	e, _ := st.next()
	assert.Equal(t, resume.TypeSessionError, e.Type)
	assert.Equal(t, "zz", e.Session)
	e, f := st.next()
	assert.Equal(t, []any{"a", uint64(1), b.Epoch() + "-1"}, []any{e.Session, e.ID, f.ID})
	e, f = st.next()
	assert.Equal(t, []any{"b", uint64(3), b.Epoch() + "-3"}, []any{e.Session, e.ID, f.ID})

	// Add c from nothing: its history below 3 comes first with a floor.
	resp, err := srv.Client().Post(srv.URL+"/events/"+cd.Connection, "application/json", strings.NewReader(`{"add":[{"session":"c"}]}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	e, _ = st.next()
	assert.Equal(t, []string{resume.TypeSessionAdded, "c"}, []string{e.Type, e.Session})
	e, f = st.next()
	assert.Equal(t, []any{"c", uint64(2), b.Epoch() + "-3;+c:session;@c=2"}, []any{e.Session, e.ID, f.ID})
	publish(t, b, "c", "m", 1) // 4
	for {
		e, f = st.next()
		if e.ID != 0 {
			break
		}
	}
	assert.Equal(t, []any{"c", uint64(4), b.Epoch() + "-4;+c:session"}, []any{e.Session, e.ID, f.ID})

	// A cut, and a resume with the original URL and the last id: the set
	// comes from the cursor.
	st.close()
	publish(t, b, "a", "m", 1) // 5
	publish(t, b, "c", "m", 1) // 6
	publish(t, b, "x", "m", 1) // 7, not in the set
	st2 := openMany(t, srv, "/events?session=a&session=b", f.ID)
	conn, _ = st2.next()
	require.NoError(t, json.Unmarshal(conn.Data, &cd))
	assert.Len(t, cd.Sessions, 3)
	var got []uint64
	for len(got) < 2 {
		if e, _ := st2.next(); e.ID != 0 {
			got = append(got, e.ID)
		}
	}
	assert.Equal(t, []uint64{5, 6}, got)

	// Remove a: its events no longer come.
	resp, err = srv.Client().Post(srv.URL+"/events/"+cd.Connection, "application/json", strings.NewReader(`{"remove":["a"]}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	publish(t, b, "a", "m", 1) // 8
	publish(t, b, "b", "m", 1) // 9
	for {
		e, f = st2.next()
		if e.ID != 0 {
			break
		}
	}
	assert.Equal(t, uint64(9), e.ID)
	assert.Equal(t, b.Epoch()+"-9;+c:session;-a", f.ID)
}

func TestManySessionsSSERefusals(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	h := newHandler(t, b, sse.HandlerOptions{MaxSessions: 2})
	srv := serveMany(t, h)
	require.NoError(t, b.CreateSession("a", ""))
	for url, code := range map[string]string{
		"/events?session=a&session=b&session=c": resume.CodeTooManySessions,
		"/events?session=a:all":                 resume.CodeInvalidScope,
		"/events?session=a&session=a":           resume.CodeInvalidSessionID,
		"/events?session=a&lastEventId=1%3Bx":   resume.CodeInvalidLastEventID,
		"/events?session=a&presence=1":          resume.CodeInvalidPresence,
	} {
		resp, err := srv.Client().Get(srv.URL + url)
		require.NoError(t, err)
		var se struct{ Code, Message string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&se))
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, url)
		assert.Equal(t, code, se.Code, url+": "+se.Message)
	}
	st := openMany(t, srv, "/events?session=a", "")
	conn, _ := st.next()
	var cd struct{ Connection string }
	require.NoError(t, json.Unmarshal(conn.Data, &cd))
	for body, want := range map[string]int{
		`{"add":[{"session":"nope"}]}`:               http.StatusNotFound,
		`{"add":[{"session":"b"},{"session":"c"}]}`:  http.StatusBadRequest,
		`{"add":[{"session":"a","from":"x"}],"z":1}`: http.StatusBadRequest,
		`{"add":[{"session":"b","from":"12abc"}]}`:   http.StatusBadRequest,
	} {
		require.NoError(t, b.CreateSession("b", ""))
		require.NoError(t, b.CreateSession("c", ""))
		resp, err := srv.Client().Post(srv.URL+"/events/"+cd.Connection, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, body)
	}
	resp, err := srv.Client().Post(srv.URL+"/events/nope", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	// The stream is unaffected: a's events still come, nothing else.
	publish(t, b, "a", "m", 1)
	e, _ := st.next()
	assert.Equal(t, "a", e.Session)
}

// TestManySessionsSSEUnderConcurrentPublishing: four publishers write to
// twenty sessions while the client adds, removes and cuts
// (resuming with its last id: line and the URL unchanged); each session
// still arrives exactly once and in order, and those in the set at the end
// arrive whole.
func TestManySessionsSSEUnderConcurrentPublishing(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{ReplayBufferSize: 10_000, MaxQueueSize: 100_000})
	h := newHandler(t, b, sse.HandlerOptions{})
	srv := serveMany(t, h)
	var all []string
	for i := range 20 {
		s := "p" + string(rune('a'+i))
		require.NoError(t, b.CreateSession(s, ""))
		all = append(all, s)
	}
	urlSet := all[:10]
	q := "/events?session=" + strings.Join(urlSet, "&session=")
	set := map[string]bool{}
	for _, s := range urlSet {
		set[s] = true
	}
	stop := make(chan struct{})
	done := make(chan map[string][]uint64, 4)
	for w := range 4 {
		go func() {
			pub := map[string][]uint64{}
			defer func() { done <- pub }()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				time.Sleep(200 * time.Microsecond) // the pace: no ring (10,000) overflows during the test
				s := all[(i*7+w)%len(all)]
				ev, err := b.Publish(s, "m", nil)
				if err != nil {
					t.Error(err)
					return
				}
				pub[s] = append(pub[s], ev.ID)
			}
		}()
	}
	recv := map[string][]uint64{}
	cursor := ""
	st := openMany(t, srv, q, "")
	conn := ""
	readFrame := func() eventbus.Event {
		e, f := st.next()
		cursor = f.ID
		if e.Type == resume.TypeConnection {
			var cd struct{ Connection string }
			require.NoError(t, json.Unmarshal(e.Data, &cd))
			conn = cd.Connection
		}
		require.NotEqual(t, "state_resync_required", e.Type, "%s", e.Data)
		if e.ID != 0 {
			require.True(t, set[e.Session], "event %d of %s, not in the set", e.ID, e.Session)
			r := recv[e.Session]
			require.True(t, len(r) == 0 || r[len(r)-1] < e.ID, "session %s: %d after %v", e.Session, e.ID, r)
			recv[e.Session] = append(r, e.ID)
		}
		return e
	}
	readFrame()
	post := func(body, typ, session string) {
		resp, err := srv.Client().Post(srv.URL+"/events/"+conn, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		for {
			if e := readFrame(); e.Type == typ && e.Session == session {
				return
			}
		}
	}
	for round := range 30 {
		for range 20 {
			readFrame()
		}
		s := all[(round*3)%len(all)]
		switch {
		case round%5 == 4:
			st.close()
			st = openMany(t, srv, q, cursor)
			readFrame()
		case set[s] && len(set) > 1:
			post(`{"remove":["`+s+`"]}`, resume.TypeSessionRemoved, s)
			delete(set, s)
		case !set[s]:
			from := ""
			if r := recv[s]; len(r) > 0 {
				from = `,"from":"` + resume.FormatID(r[len(r)-1], b.Epoch()) + `"`
			}
			set[s] = true
			post(`{"add":[{"session":"`+s+`"`+from+`}]}`, resume.TypeSessionAdded, s)
		}
	}
	close(stop)
	published := map[string][]uint64{}
	for range 4 {
		for s, ids := range <-done {
			published[s] = append(published[s], ids...)
		}
	}
	total := 0
	for s := range set {
		slices.Sort(published[s])
		total += len(published[s])
	}
	for got := 0; got < total; {
		got = 0
		for s := range set {
			got += len(recv[s])
		}
		if got < total {
			readFrame()
		}
	}
	for s := range set {
		assert.Equal(t, published[s], recv[s], "session %s", s)
	}
	for s, r := range recv {
		if !set[s] {
			slices.Sort(published[s])
			assert.Equal(t, published[s][:len(r)], r, "session %s (removed): a prefix", s)
		}
	}
}

// TestManySessionsSSEWithoutSession: GET /events with no session= is told
// it lacks session=, not only how to mount a single-session handler.
func TestManySessionsSSEWithoutSession(t *testing.T) {
	t.Parallel()
	b := newBus(t, eventbus.Options{})
	srv := serveMany(t, newHandler(t, b, sse.HandlerOptions{}))
	for _, url := range []string{"/events", "/events?scope=descendants", "/events?sessions=a"} {
		resp, err := srv.Client().Get(srv.URL + url)
		require.NoError(t, err)
		var se struct{ Code, Message string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&se))
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, url)
		assert.Equal(t, resume.CodeInvalidSessionID, se.Code, url)
		assert.Contains(t, se.Message, "no session= parameter", url)
	}
}
