package ws_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
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

// forms are the two message forms a ws.Client may be served: batched (it
// offers ws.SubprotocolBatch and the handler selects it) and single (the
// offer is taken out of the handshake, as by a server that does not know
// it: one frame per message).
var forms = []struct {
	name   string
	single bool
}{{"batched", false}, {"single", true}}

// forEachForm runs test once per message form (forms), as a subtest.
func forEachForm(t *testing.T, test func(t *testing.T, single bool)) {
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) { test(t, f.single) })
	}
}

// formTransport gives a client the form asked for and records the
// subprotocol each handshake's answer selected.
type formTransport struct {
	base   http.RoundTripper
	single bool
	mu     sync.Mutex
	got    []string
}

func (f *formTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.single {
		r = r.Clone(r.Context())
		r.Header.Del("Sec-WebSocket-Protocol")
	}
	resp, err := f.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
		f.mu.Lock()
		f.got = append(f.got, resp.Header.Get("Sec-WebSocket-Protocol"))
		f.mu.Unlock()
	}
	return resp, err
}

// check asserts that every handshake got the form asked for.
func (f *formTransport) check(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.got, "no handshake")
	want := ws.SubprotocolBatch
	if f.single {
		want = ""
	}
	for i, g := range f.got {
		assert.Equal(t, want, g, "handshake %d", i)
	}
}

// formClient returns a copy of hc (nil: a default client) giving form
// single or batched, and its transport.
func formClient(hc *http.Client, single bool) (*http.Client, *formTransport) {
	c := &http.Client{}
	if hc != nil {
		c = &http.Client{Transport: hc.Transport, Jar: hc.Jar, CheckRedirect: hc.CheckRedirect}
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	ft := &formTransport{base: base, single: single}
	c.Transport = ft
	return c, ft
}

// dialBatched dials offering ws.SubprotocolBatch (with a 4 KiB receive
// buffer when small) and checks that the handler selected it.
func dialBatched(t testing.TB, url string, small bool) *websocket.Conn {
	t.Helper()
	o := &websocket.DialOptions{Subprotocols: []string{"app.v1", ws.SubprotocolBatch}}
	if small {
		hc := &http.Client{Transport: &http.Transport{DialContext: smallRcvBuf().DialContext}}
		o.HTTPClient = hc
		t.Cleanup(hc.CloseIdleConnections)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.CloseNow() })
	require.Equal(t, ws.SubprotocolBatch, c.Subprotocol())
	c.SetReadLimit(1 << 20)
	return c
}

// readBatch reads one message of a batched connection: a JSON array of at
// least one envelope, which SplitBatch and encoding/json split alike.
func readBatch(t testing.TB, c *websocket.Conn) []eventbus.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	typ, b, err := c.Read(ctx)
	require.NoError(t, err)
	return decodeBatch(t, typ, b)
}

func decodeBatch(t testing.TB, typ websocket.MessageType, b []byte) []eventbus.Event {
	t.Helper()
	require.Equal(t, websocket.MessageText, typ)
	require.True(t, strings.HasPrefix(string(b), "[{") && strings.HasSuffix(string(b), "}]"), "an array of envelopes: %.80s", b)
	var raw []json.RawMessage
	require.NoError(t, json.Unmarshal(b, &raw))
	elems, err := ws.SplitBatch(b, nil)
	require.NoError(t, err)
	require.Len(t, elems, len(raw))
	evs := make([]eventbus.Event, len(elems))
	for i, e := range elems {
		assert.Equal(t, string(raw[i]), string(e), "element %d", i)
		evs[i], _, err = ws.DecodeFrame(e)
		require.NoError(t, err, "element %d: %s", i, e)
	}
	return evs
}

// TestBatchedMessages: a client offering ws.SubprotocolBatch (after a
// subprotocol the handler does not know) gets every message as an array:
// stream_start and a pong as arrays of one sent alone, and the frames that
// are ready together (a replay) in batches of at most 64 frames, or of the
// frames that reach 64 KiB (nothing after a frame over it), every frame once, in
// order, each the envelope a single-message client gets. Both with one
// connection (encoded per connection) and with two (the shared cache).
func TestBatchedMessages(t *testing.T) {
	for _, conns := range []int{1, 2} {
		t.Run(map[int]string{1: "alone", 2: "shared"}[conns], func(t *testing.T) {
			s := newServer(t, eventbus.Options{ReplayBufferSize: 1000}, ws.HandlerOptions{ResumeWait: -1})
			require.NoError(t, s.bus.CreateSession("s1", ""))
			live := dialBatched(t, s.url("s1", "replay=0"), false)
			start := readBatch(t, live)
			require.Len(t, start, 1)
			assert.Equal(t, resume.TypeStreamStart, start[0].Type)
			if conns == 2 {
				defer dialBatched(t, s.url("s1", "replay=0"), false).CloseNow()
				require.Eventually(t, func() bool { return s.h.Stats().Active == 2 }, waitFor, time.Millisecond)
			}

			// 200 small events, then 9 of 20 KiB, then one of 70 KiB, then 3 small.
			var sizes []int
			for range 200 {
				sizes = append(sizes, 10)
			}
			for range 9 {
				sizes = append(sizes, 20<<10)
			}
			sizes = append(sizes, 70<<10, 10, 10, 10)
			var want []eventbus.Event
			for _, n := range sizes {
				data, err := json.Marshal(map[string]string{"s": strings.Repeat("x", n)})
				require.NoError(t, err)
				ev, err := s.bus.PublishJSON("s1", "msg", data)
				require.NoError(t, err)
				want = append(want, eventbus.Event{ID: ev.ID, Session: "s1", Type: "msg", Data: data, Replay: true})
			}
			send(t, live, `{"ping":7}`)
			for {
				b := readBatch(t, live)
				if b[0].Type == ws.TypePong {
					require.Len(t, b, 1, "a pong is sent alone")
					assert.JSONEq(t, `7`, string(b[0].Data))
					break
				}
				for _, ev := range b {
					assert.Equal(t, "msg", ev.Type)
				}
			}

			replay := dialBatched(t, s.url("s1", "lastEventId=0"), false)
			var got []eventbus.Event
			var batches [][]eventbus.Event
			for len(got) < len(want)+1 {
				b := readBatch(t, replay)
				batches = append(batches, b)
				got = append(got, b...)
			}
			require.Len(t, got, len(want)+1)
			assert.Equal(t, want, got[:len(want)], "every frame once, in order")
			assert.Equal(t, frame.TypeReplayComplete, got[len(want)].Type)
			most := 0
			for i, b := range batches {
				bytes := 0
				for j, ev := range b {
					if j < len(b)-1 {
						bytes += len(ev.Data) // the bound is checked after each frame: the last may cross it
					}
				}
				assert.LessOrEqual(t, len(b), 64, "batch %d", i)
				assert.Less(t, bytes, 64<<10, "batch %d: only its last frame may cross 64 KiB", i)
				most = max(most, len(b))
				for j, ev := range b {
					if len(ev.Data) > 64<<10 {
						assert.Equal(t, len(b)-1, j, "batch %d: nothing follows a frame over 64 KiB", i)
					}
				}
			}
			assert.Equal(t, 64, most, "a replay is ready at once: full batches")
		})
	}
}

// TestBatchedEviction: a batched client that stops reading (4 KiB receive
// buffer, maxQueued=16) is evicted; read late, its last message is an array
// whose last element is client_evicted, then the close is 1008 "slow
// consumer"; the events before it come in order, every message an array.
func TestBatchedEviction(t *testing.T) {
	s := newServer(t, eventbus.Options{ReplayBufferSize: 64}, ws.HandlerOptions{ResumeWait: -1, CloseGrace: 5 * time.Second})
	require.NoError(t, s.bus.CreateSession("s1", ""))
	late := dialBatched(t, s.url("s1", "replay=0&maxQueued=16"), true)
	require.Eventually(t, func() bool { return s.h.Stats().Active == 1 }, waitFor, time.Millisecond)
	payload := map[string]string{"text": strings.Repeat("x", 1024)}
	deadline := time.Now().Add(30 * time.Second)
	for s.h.Stats().Evicted == 0 {
		for range 32 {
			_, err := s.bus.Publish("s1", "chunk", payload)
			require.NoError(t, err)
		}
		require.True(t, time.Now().Before(deadline), "the stalled client was not evicted")
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var msgs [][]eventbus.Event
	var ce websocket.CloseError
	for {
		typ, b, err := late.Read(ctx)
		if err != nil {
			require.ErrorAs(t, err, &ce, "want a close frame, got %v", err)
			break
		}
		msgs = append(msgs, decodeBatch(t, typ, b))
	}
	assert.Equal(t, websocket.StatusPolicyViolation, ce.Code)
	assert.Equal(t, ws.ReasonSlowConsumer, ce.Reason)
	require.GreaterOrEqual(t, len(msgs), 2)
	assert.Equal(t, []eventbus.Event{{Type: resume.TypeStreamStart}}, []eventbus.Event{{Type: msgs[0][0].Type}})
	last := msgs[len(msgs)-1]
	assert.Equal(t, frame.TypeClientEvicted, last[len(last)-1].Type, "client_evicted is the last element")
	var want uint64
	for i, m := range msgs[1:] {
		for j, e := range m {
			if i == len(msgs)-2 && j == len(m)-1 {
				continue // client_evicted
			}
			if e.ID == 0 {
				assert.Equal(t, frame.TypeSlowClientWarning, e.Type)
				continue
			}
			want++
			assert.Equal(t, want, e.ID, "what the socket buffers held, in order; the rest was skipped")
		}
	}
	assert.EqualValues(t, 1, s.h.Stats().Evicted)
}

// TestClientOffersBatch: ws.Client offers the batched form and reads it;
// served single messages (a server that selects no subprotocol), it reads
// those; the events are the same either way.
func TestClientOffersBatch(t *testing.T) {
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			s := newServer(t, eventbus.Options{ReplayBufferSize: 1000}, ws.HandlerOptions{})
			require.NoError(t, s.bus.CreateSession("s1", ""))
			ids := publish(t, s.bus, "s1", 150)
			hc, ft := formClient(nil, f.single)
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			st := (&ws.Client{HTTPClient: hc}).Subscribe(ctx, s.url("s1", "lastEventId=0"), ws.StreamOptions{})
			defer st.Close()
			for i := 0; i < len(ids); {
				ev, err := st.Next()
				require.NoError(t, err)
				if ev.ID == 0 {
					assert.Equal(t, frame.TypeReplayComplete, ev.Type)
					continue
				}
				require.Equal(t, ids[i], ev.ID, "event %d", i)
				assert.JSONEq(t, `{"n":`+strconvItoa(i)+`}`, string(ev.Data))
				i++
			}
			ft.check(t)
		})
	}
}

func strconvItoa(i int) string { b, _ := json.Marshal(i); return string(b) }
