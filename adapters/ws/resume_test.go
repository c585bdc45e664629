package ws_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// TestResumeWithURLCursorNamesTheConflict: a connection whose URL (or
// Last-Event-ID header) carries a cursor and whose first message is a
// resume with a cursor is closed 1008 naming that conflict (not "resume too
// late": it was sent first); a resume without a cursor stays accepted.
func TestResumeWithURLCursorNamesTheConflict(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	publish(t, s.bus, "s1", 3)

	c := dial(t, s.url("s1", "lastEventId=1"))
	send(t, c, `{"resume":{"lastEventId":"2"}}`)
	ce, _ := readClose(t, c)
	assert.Equal(t, websocket.StatusPolicyViolation, ce.Code)
	assert.Contains(t, ce.Reason, "the URL already carries one")
	assert.NotContains(t, ce.Reason, "too late")

	ok := dial(t, s.url("s1", "lastEventId=1"))
	send(t, ok, `{"resume":{}}`)
	ev := read(t, ok)
	assert.EqualValues(t, 2, ev.ID, "the URL's cursor counts")
}

// TestResumeCursorWinsOverReplay0 (issue 18 item 1): a cursor in the URL of
// a live-only connection (?replay=0&lastEventId=3) still replays what
// follows it, then replay_complete: a resume always replays.
func TestResumeCursorWinsOverReplay0(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	publish(t, s.bus, "s1", 5)
	for _, q := range []string{"replay=0&lastEventId=3", "replay=0&last_event_id=3"} {
		c := dial(t, s.url("s1", q))
		var got []string
		for range 3 {
			ev := read(t, c)
			got = append(got, ev.Type+":"+strconv.FormatUint(ev.ID, 10))
		}
		assert.Equal(t, []string{"msg:4", "msg:5", "replay_complete:0"}, got, q)
	}
}

// resumeLog records where every connection a ws.Client dials resumes
// from, read from the bytes it writes: the Go client sends its cursor in
// the handshake's Last-Event-ID and X-Event-Epoch headers and then a
// resume message without a cursor.
type resumeLog struct {
	mu    sync.Mutex
	conns []*recordConn
}

type recordConn struct {
	net.Conn
	mu  sync.Mutex
	out []byte
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.out = append(c.out, p...)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (l *resumeLog) client() *http.Client {
	d := &net.Dialer{}
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		rc := &recordConn{Conn: c}
		l.mu.Lock()
		l.conns = append(l.conns, rc)
		l.mu.Unlock()
		return rc, nil
	}}}
}

// resumes returns the cursor of each connection, in dial order, as
// {"lastEventId": …, "epoch": …} (the handshake's Last-Event-ID and
// X-Event-Epoch; absent ones left out), checking that the first message
// is a resume without a cursor of its own.
func (l *resumeLog) resumes(t *testing.T) []map[string]string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]string
	for _, c := range l.conns {
		c.mu.Lock()
		b := c.out
		c.mu.Unlock()
		i := strings.Index(string(b), "\r\n\r\n")
		if i < 0 {
			continue
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b[:i+4])))
		require.NoError(t, err)
		assert.Empty(t, firstMessage(t, b[i+4:]), "the cursor goes in the headers, not the resume message")
		m := map[string]string{}
		if v := req.Header.Get("Last-Event-ID"); v != "" {
			m["lastEventId"] = v
		}
		if v := req.Header.Get(resume.HeaderEpoch); v != "" {
			m["epoch"] = v
		}
		out = append(out, m)
	}
	return out
}

// firstMessage unmasks the first client frame of b (RFC 6455 §5.2) and
// decodes it as {"resume": {…}}.
func firstMessage(t *testing.T, b []byte) map[string]string {
	t.Helper()
	require.GreaterOrEqual(t, len(b), 6)
	n, off := int(b[1]&0x7f), 2
	if n == 126 {
		n, off = int(binary.BigEndian.Uint16(b[2:4])), 4
	}
	mask := b[off : off+4]
	p := append([]byte(nil), b[off+4:off+4+n]...)
	for i := range p {
		p[i] ^= mask[i%4]
	}
	var m struct{ Resume map[string]string }
	require.NoError(t, json.Unmarshal(p, &m), "%s", p)
	return m.Resume
}

// TestClientResumesLiveOnlyAcrossCuts (issue 18 item 1): a Go client on a
// live-only URL, its connection cut 6 times while 120 events are published,
// receives all 120 exactly once, in order, and each reconnect carries the
// newest id it had, with its epoch.
func TestClientResumesLiveOnlyAcrossCuts(t *testing.T) {
	forEachForm(t, func(t *testing.T, single bool) {
		s, cut := newCutServer(t, eventbus.Options{ReplayBufferSize: 1000, Epoch: "E1"}, ws.HandlerOptions{})
		require.NoError(t, s.bus.CreateSession("s1", ""))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var log resumeLog
		hc, ft := formClient(log.client(), single)
		cl := &ws.Client{HTTPClient: hc, Retry: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
		st := cl.Subscribe(ctx, s.url("s1", "replay=0"), ws.StreamOptions{})
		defer st.Close()

		const total, cuts = 120, 6
		waitConnects := func(k int) {
			assert.Eventually(t, func() bool { return st.Connects() >= k && s.h.Stats().Active == 1 || ctx.Err() != nil },
				30*time.Second, time.Millisecond, "the client did not connect %d times", k)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			waitConnects(1)
			// The live-only stream has started once its start frame is out.
			assert.Eventually(t, func() bool { return s.h.Stats().Frames >= 1 }, 30*time.Second, time.Millisecond)
			for i := range total {
				_, err := s.bus.Publish("s1", "msg", i)
				assert.NoError(t, err)
				if k := i/(total/cuts) + 1; i%(total/cuts) == 5 {
					waitConnects(k) // a cut while reconnecting would cut nothing
					cut.Cut()
				}
			}
		}()
		var got []uint64
		lastOf := map[int]string{}
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
		resumes := log.resumes(t)
		require.GreaterOrEqual(t, len(resumes), cuts+1, "six cuts, six resumes")
		assert.Empty(t, resumes[0]["lastEventId"], "the first connect has no cursor")
		for k := 2; k <= len(resumes); k++ {
			want, ok := lastOf[k-1]
			if !ok {
				continue // that connection delivered no event: checked by the ids above
			}
			assert.Equal(t, want, resumes[k-1]["lastEventId"], "reconnect %d", k-1)
			assert.Equal(t, "E1", resumes[k-1]["epoch"], "reconnect %d sends the epoch of its cursor", k-1)
		}
		ft.check(t)
	})
}

// TestLiveOnlyStreamStartsWithItsPosition (issue 18 item 3): a live-only
// stream opens with a stream_start frame (no id) naming the newest id
// before it subscribed, epoch-qualified by default, so that a client cut
// before its first event resumes exactly; the Go client takes it as its
// cursor and does not return it.
func TestLiveOnlyStreamStartsWithItsPosition(t *testing.T) {
	for _, plain := range []bool{false, true} {
		s := newServer(t, eventbus.Options{}, ws.HandlerOptions{PlainIDs: plain})
		publish(t, s.bus, "s1", 2)
		for _, q := range []string{"replay=0", "replay=0&lastEventId=1", ""} {
			c := dial(t, s.url("s1", q))
			send(t, c, `{"resume":{}}`)
			ev, _ := readEpoch(t, c)
			if q != "replay=0" {
				assert.NotEqual(t, resume.TypeStreamStart, ev.Type, "%s: only a live-only stream has a start", q)
				continue
			}
			require.Equal(t, resume.TypeStreamStart, ev.Type)
			assert.Zero(t, ev.ID)
			var d map[string]string
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			want := s.bus.Epoch() + "-2"
			if plain {
				want = "2"
			}
			assert.Equal(t, map[string]string{"lastEventId": want, "epoch": s.bus.Epoch()}, d)
			publish(t, s.bus, "s1", 1)
			_, epoch := readEpoch(t, c)
			if plain {
				assert.Empty(t, epoch, "PlainIDs: no epoch in the frames")
			} else {
				assert.Equal(t, s.bus.Epoch(), epoch)
			}
		}
	}

	t.Run("client cut before its first event", func(t *testing.T) {
		s, cut := newCutServer(t, eventbus.Options{Epoch: "E1"}, ws.HandlerOptions{})
		publish(t, s.bus, "s1", 2)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var log resumeLog
		cl := &ws.Client{HTTPClient: log.client(), Retry: 10 * time.Millisecond}
		st := cl.Subscribe(ctx, s.url("s1", "replay=0"), ws.StreamOptions{})
		defer st.Close()
		type result struct {
			ev  eventbus.Event
			err error
		}
		res := make(chan result, 1)
		go func() { ev, err := st.Next(); res <- result{ev, err} }()
		require.Eventually(t, func() bool { return s.h.Stats().Frames == 1 }, waitFor, time.Millisecond, "the start frame is out")
		cut.Cut()
		missed, err := s.bus.Publish("s1", "during_cut", nil)
		require.NoError(t, err)
		r := <-res
		require.NoError(t, r.err)
		assert.Equal(t, missed.ID, r.ev.ID, "the event published during the cut is replayed")
		assert.True(t, r.ev.Replay)
		resumes := log.resumes(t)
		require.GreaterOrEqual(t, len(resumes), 2)
		assert.Equal(t, map[string]string{"lastEventId": "2", "epoch": "E1"}, resumes[1], "the reconnect resumes from the start")
	})
}

// TestClientKeepsReopenedSession (issue 18 item 2): a sub-agent's session
// closed and reopened with CreateSession keeps its buffer, its old
// session_closed included; the Go client passes the replayed
// session_closed and goes on with the reopened session; only a live
// session_closed ends it.
func TestClientKeepsReopenedSession(t *testing.T) {
	for _, cursor := range []string{"", "2"} {
		t.Run("cursor="+cursor, func(t *testing.T) {
			s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
			b := s.bus
			require.NoError(t, b.CreateSession("run", ""))
			require.NoError(t, b.CreateSession("s1", "run"))
			publish(t, b, "s1", 2)
			require.NoError(t, b.CloseSession("s1"))
			require.NoError(t, b.CreateSession("s1", "run"))
			_, err := b.Publish("s1", "after", nil)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st := ws.Subscribe(ctx, s.url("s1", ""), ws.StreamOptions{LastEventID: cursor, Epoch: b.Epoch()})
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
					_, err := b.Publish("s1", "after", nil) // a live one, once the replay is through
					require.NoError(t, err)
				case ev.Type == "after":
					require.NoError(t, b.CloseSession("s1"))
				}
			}
			want := []string{"msg:true", "msg:true", "session_closed:true", "after:true", "after:false", "session_closed:false"}
			if cursor != "" {
				want = want[2:]
			}
			assert.Equal(t, want, got, "nothing lost; only the live session_closed ends the client")
			assert.Equal(t, 1, st.Connects(), "nor does the handler end the stream on the replayed one")
		})
	}
}

// TestResumeMessage: the first message carries the cursor; the targeted
// hello from OnSubscribe arrives after replay_complete, without id.
func TestResumeMessage(t *testing.T) {
	var s *server
	s = newServer(t, eventbus.Options{}, ws.HandlerOptions{
		OnSubscribe: func(r *http.Request, sub *eventbus.Subscription) {
			assert.NoError(t, s.bus.SendTo("hello", map[string]uint64{"subscriber": sub.ID()}, sub))
		},
	})
	publish(t, s.bus, "s1", 5)
	c := dial(t, s.url("s1", ""))
	send(t, c, `{"resume":{"lastEventId":"3","epoch":"`+s.bus.Epoch()+`"}}`)
	var shape []string
	for range 4 {
		ev := read(t, c)
		shape = append(shape, ev.Type+":"+resume.FormatID(ev.ID, ""))
	}
	assert.Equal(t, []string{"msg:4", "msg:5", "replay_complete:0", "hello:0"}, shape)

	// A restarted server's client: another epoch → epoch_reset, whole buffer.
	c2 := dial(t, s.url("s1", ""))
	send(t, c2, `{"resume":{"lastEventId":"old_epoch-3"}}`)
	ev := read(t, c2)
	assert.Equal(t, frame.TypeStateResyncRequired, ev.Type)
	assert.Contains(t, string(ev.Data), frame.ReasonEpochReset)
	assert.EqualValues(t, 1, read(t, c2).ID)

	// A foreign epoch (a UUID) is another incarnation's: epoch_reset.
	c4 := dial(t, s.url("s1", ""))
	send(t, c4, `{"resume":{"lastEventId":3,"epoch":"123e4567-e89b-12d3-a456-426614174000"}}`)
	ev = read(t, c4)
	assert.Equal(t, frame.TypeStateResyncRequired, ev.Type)
	assert.Contains(t, string(ev.Data), frame.ReasonEpochReset)

	// No message at all: after ResumeWait the stream starts as the URL
	// says — the whole buffer, and what was published during the wait.
	c5 := dial(t, s.url("s1", ""))
	publish(t, s.bus, "s1", 1)
	for want := uint64(1); want <= 6; want++ {
		assert.Equal(t, want, read(t, c5).ID)
	}

	// {"resume":{}}: start now, as the URL says (whole buffer).
	c3 := dial(t, s.url("s1", ""))
	start := time.Now()
	send(t, c3, `{"resume":{}}`)
	ev = read(t, c3)
	assert.EqualValues(t, 1, ev.ID)
	assert.Less(t, time.Since(start), ws.DefaultResumeWait/2, "no wait after an empty resume")
}

// TestClientResumesAcrossCuts: the Go client resumes across four
// server-side cuts with its resume message and sees every id exactly once,
// in order; the session's close ends it with ErrSessionClosed.
func TestClientResumesAcrossCuts(t *testing.T) {
	forEachForm(t, func(t *testing.T, single bool) {
		s, cut := newCutServer(t, eventbus.Options{ReplayBufferSize: 10_000}, ws.HandlerOptions{})
		require.NoError(t, s.bus.CreateSession("s1", ""))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		hc, ft := formClient(nil, single)
		cl := &ws.Client{HTTPClient: hc, Retry: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
		st := cl.Subscribe(ctx, s.url("s1", ""), ws.StreamOptions{})
		defer st.Close()

		const total = 400
		var received atomic.Uint64 // the last id the client got
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range total {
				_, err := s.bus.Publish("s1", "msg", i)
				assert.NoError(t, err)
				if i%100 == 50 {
					// Cut only once the client is connected again after the
					// previous cut (its (i/100+1)-th handshake succeeded): a
					// cut that lands while it is still reconnecting cuts
					// nothing, and the four resumes would then hang on how
					// fast a loaded machine reconnects. The 30 s is a hang
					// guard; a client that does not resume fails here.
					k := i/100 + 1
					assert.Eventually(t, func() bool { return st.Connects() >= k || ctx.Err() != nil }, 30*time.Second, time.Millisecond,
						"the client did not reconnect before cut %d", k)
					cut.Cut()
				}
				runtime.Gosched() // let the client read while events are published
			}
			// Close once the client has every event: the close of a root
			// session drops its buffer, so a resume after it has nothing to
			// replay (and is answered 410).
			assert.Eventually(t, func() bool { return received.Load() >= total || ctx.Err() != nil }, 30*time.Second, time.Millisecond)
			assert.NoError(t, s.bus.CloseSession("s1"))
		}()
		var ids []uint64
		var err error
		for {
			var ev eventbus.Event
			ev, err = st.Next()
			if err != nil {
				break
			}
			if ev.ID != 0 {
				ids = append(ids, ev.ID)
				received.Store(ev.ID)
			}
		}
		wg.Wait()
		require.ErrorIs(t, err, eventbus.ErrSessionClosed)
		require.Len(t, ids, total+1, "every event and session_closed")
		for i, id := range ids {
			require.EqualValues(t, i+1, id, "ids exactly once, in order")
		}
		assert.GreaterOrEqual(t, st.Connects(), 5, "four cuts, four resumes")
		assert.Zero(t, s.bus.Stats().Guarded)
		ft.check(t)
	})
}

// TestClientAcrossRestart: the server's bus is replaced (a restart: new
// epoch, ids from 1 again) and the old handler closes with 1001; the client
// resumes with the old cursor and its epoch, gets
// state_resync_required{epoch_reset}, then exactly the new server's events.
// incarnation is one server process of the restart tests: its bus (with
// session s1) and its handler.
type incarnation struct {
	bus *eventbus.Bus
	h   *ws.Handler
}

// startIncarnation starts a new server incarnation: a fresh bus (a new
// epoch, ids from 1) with session s1, and its handler.
func startIncarnation(t *testing.T) *incarnation {
	t.Helper()
	bus, err := eventbus.New(eventbus.Options{})
	require.NoError(t, err)
	require.NoError(t, bus.CreateSession("s1", ""))
	return handlerOver(t, bus)
}

// handlerOver is a new handler over bus: a proxy cut, when it replaces the
// handler of the same bus.
func handlerOver(t *testing.T, bus *eventbus.Bus) *incarnation {
	t.Helper()
	h, err := ws.NewHandler(bus, ws.HandlerOptions{})
	require.NoError(t, err)
	return &incarnation{bus, h}
}

// shutHandler closes x's handler (every socket gets 1001) and waits for it.
func shutHandler(t *testing.T, x *incarnation) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	assert.NoError(t, x.h.Shutdown(ctx))
}

// restartServer serves whichever incarnation cur holds at ws.Pattern.
func restartServer(t *testing.T, cur *atomic.Pointer[incarnation]) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc(ws.Pattern, func(w http.ResponseWriter, r *http.Request) { cur.Load().h.ServeHTTP(w, r) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestClientAcrossRestart(t *testing.T) {
	forEachForm(t, func(t *testing.T, single bool) {
		start := func() *incarnation { return startIncarnation(t) }
		stop := func(x *incarnation) {
			shutHandler(t, x)
			_ = x.bus.Close()
		}
		var cur atomic.Pointer[incarnation]
		a := start()
		cur.Store(a)
		srv := restartServer(t, &cur)

		publish(t, a.bus, "s1", 3)
		hc, ft := formClient(nil, single)
		st := (&ws.Client{HTTPClient: hc, Retry: 10 * time.Millisecond}).Subscribe(context.Background(),
			"ws"+strings.TrimPrefix(srv.URL, "http")+"/session/s1/ws", ws.StreamOptions{})
		defer st.Close()
		for want := uint64(1); want <= 3; want++ {
			ev, err := st.Next()
			require.NoError(t, err)
			require.Equal(t, want, ev.ID)
		}
		assert.Equal(t, a.bus.Epoch(), st.Epoch())

		b := start()
		defer stop(b)
		publish(t, b.bus, "s1", 2)
		cur.Store(b)
		stop(a) // 1001 to the client

		ev, err := st.Next()
		require.NoError(t, err)
		require.Equal(t, frame.TypeStateResyncRequired, ev.Type)
		var d frame.ResyncData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		assert.Equal(t, frame.ReasonEpochReset, d.Reason)
		assert.EqualValues(t, 3, d.LastDeliveredID, "the old server's cursor")
		for want := uint64(1); want <= 2; want++ {
			ev, err := st.Next()
			require.NoError(t, err)
			require.Equal(t, want, ev.ID, "the new server's ids, from 1")
		}
		assert.Equal(t, b.bus.Epoch(), st.Epoch())
		assert.Equal(t, 2, st.Connects())
		ft.check(t)
	})
}

// TestClientEpochFollowsARepeatedCursor: after a restart the new server's
// ids start again at 1 (bus-wide), so the first id a session replays after
// the epoch_reset may be the very cursor the client had ("3" in both
// histories). The WebSocket cursor is a plain id, so the stream must take
// the new epoch even when the id text is unchanged: otherwise its next
// resume pairs the new history's "3" with the old server's epoch, and a
// mere proxy cut replays the whole new history again behind a spurious
// epoch_reset.
func TestClientEpochFollowsARepeatedCursor(t *testing.T) {
	forEachForm(t, func(t *testing.T, single bool) {
		var cur atomic.Pointer[incarnation]
		a := startIncarnation(t)
		cur.Store(a)
		srv := restartServer(t, &cur)

		publish(t, a.bus, "s1", 3)
		hc, ft := formClient(nil, single)
		st := (&ws.Client{HTTPClient: hc, Retry: 10 * time.Millisecond}).Subscribe(context.Background(),
			"ws"+strings.TrimPrefix(srv.URL, "http")+"/session/s1/ws", ws.StreamOptions{})
		defer st.Close()
		for want := uint64(1); want <= 3; want++ {
			ev, err := st.Next()
			require.NoError(t, err)
			require.Equal(t, want, ev.ID)
		}

		// The restart: the new server's ids 1 and 2 go to another session,
		// and s1's first event is id 3 again.
		b := startIncarnation(t)
		defer func() { _ = b.bus.Close() }()
		publish(t, b.bus, "other", 2)
		publish(t, b.bus, "s1", 1)
		cur.Store(b)
		shutHandler(t, a)
		_ = a.bus.Close()
		ev, err := st.Next()
		require.NoError(t, err)
		require.Equal(t, frame.TypeStateResyncRequired, ev.Type, "the restart is an epoch_reset")
		ev, err = st.Next()
		require.NoError(t, err)
		require.EqualValues(t, 3, ev.ID, "the new server's s1 event")
		ev, err = st.Next()
		require.NoError(t, err)
		require.Equal(t, frame.TypeReplayComplete, ev.Type)
		require.Equal(t, "3", st.LastEventID())
		assert.Equal(t, b.bus.Epoch(), st.Epoch(), "the epoch of the new server's id 3")

		// A proxy cut, same server: the resume goes on after id 3, no reset.
		c := handlerOver(t, b.bus)
		cur.Store(c)
		shutHandler(t, b)
		defer shutHandler(t, c)
		publish(t, b.bus, "s1", 1)
		ev, err = st.Next()
		require.NoError(t, err)
		assert.Equal(t, "msg", ev.Type, "after a cut on the same server: %s %s", ev.Type, ev.Data)
		assert.EqualValues(t, 4, ev.ID)
		assert.Equal(t, 3, st.Connects())
		ft.check(t)
	})
}

// TestClientResumesWithoutResumeWait: a server whose ResumeWait is negative
// takes the cursor only from the URL or the headers. The Go client sent it
// only in its resume message, so after a cut it got the whole history
// again and then stopped for good with 1008 "resume too late"; it sends the
// cursor in the handshake's Last-Event-ID and X-Event-Epoch headers, which
// every server reads, waiting or not.
func TestClientResumesWithoutResumeWait(t *testing.T) {
	forEachForm(t, func(t *testing.T, single bool) {
		for _, wait := range []time.Duration{-1, 0} {
			s, cl := newCutServer(t, eventbus.Options{}, ws.HandlerOptions{ResumeWait: wait})
			require.NoError(t, s.bus.CreateSession("s1", ""))
			publish(t, s.bus, "s1", 2)
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			hc, ft := formClient(nil, single)
			st := (&ws.Client{HTTPClient: hc, Retry: 10 * time.Millisecond}).Subscribe(ctx, s.url("s1", ""), ws.StreamOptions{})
			for want := uint64(1); want <= 2; want++ {
				ev, err := st.Next()
				require.NoError(t, err, "ResumeWait %v", wait)
				require.Equal(t, want, ev.ID, "ResumeWait %v", wait)
			}
			cl.Cut()
			publish(t, s.bus, "s1", 1)
			ev, err := st.Next()
			require.NoError(t, err, "ResumeWait %v: the stream goes on", wait)
			assert.EqualValues(t, 3, ev.ID, "ResumeWait %v: resumed after id 2, not from the start", wait)
			ev, err = st.Next()
			require.NoError(t, err, "ResumeWait %v", wait)
			assert.Equal(t, frame.TypeReplayComplete, ev.Type, "ResumeWait %v", wait)
			assert.Equal(t, 2, st.Connects(), "ResumeWait %v", wait)
			st.Close()
			cancel()
			ft.check(t)
		}
	})
}

// TestResumeMessageTakesTheHandshakeEpoch: a resume message whose cursor
// is a plain id and that names no epoch is qualified by the handshake's
// X-Event-Epoch, as a plain Last-Event-ID is on the SSE endpoint: the bus's
// own epoch resumes after the cursor, another one is an epoch_reset, and
// an epoch in the message wins over the header.
func TestResumeMessageTakesTheHandshakeEpoch(t *testing.T) {
	s := newServer(t, eventbus.Options{}, ws.HandlerOptions{})
	publish(t, s.bus, "s1", 5)
	dialEpoch := func(epoch string) *websocket.Conn {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		h := http.Header{}
		h.Set(resume.HeaderEpoch, epoch)
		c, _, err := websocket.Dial(ctx, s.url("s1", ""), &websocket.DialOptions{HTTPHeader: h})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.CloseNow() })
		return c
	}
	tests := []struct {
		name, header, msg string
		want              []string // type:id of the first frames
	}{
		{"own epoch in the header", s.bus.Epoch(), `{"resume":{"lastEventId":"3"}}`,
			[]string{"msg:4", "msg:5", "replay_complete:0"}},
		{"another epoch in the header", "older", `{"resume":{"lastEventId":3}}`,
			[]string{frame.TypeStateResyncRequired + ":0", "msg:1"}},
		{"the message's epoch wins", "older", `{"resume":{"lastEventId":"3","epoch":"` + s.bus.Epoch() + `"}}`,
			[]string{"msg:4", "msg:5", "replay_complete:0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialEpoch(tt.header)
			send(t, c, tt.msg)
			var shape []string
			for range tt.want {
				ev := read(t, c)
				shape = append(shape, ev.Type+":"+resume.FormatID(ev.ID, ""))
			}
			assert.Equal(t, tt.want, shape)
		})
	}
}
