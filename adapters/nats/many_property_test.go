package nats_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// manySessions is how many sessions each case has: the connection starts
// with all of them or a random part, and adds and removes among them.
const manySessions = 100

// TestPropertyManySessions: one connection (GET /events?session=…) over
// 100 sessions, publishers on two NATS nodes, and random cuts (resumed on
// either node with the last id: line only, the URL unchanged), adds
// (POST /events/{conn}, from the client's last id of that session, or its
// whole history) and removes; every event of every session reaches the
// client exactly once and in order — checked against the published ids at
// every frame — and no gap is announced. make test runs 10 cases; make
// property-many runs PROPERTY_CHECKS (10,000; docs/benchmarks.md).
func TestPropertyManySessions(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" {
		require.NoError(t, flag.Set("rapid.checks", "10")) // the default: a short run
	}
	// Each case has sessions of its own. Every 500 cases the two nodes are
	// replaced by two on a new stream and the old stream is deleted, so a
	// long run's memory stays flat (a stream that drops old messages by age
	// would make every new session's history "possibly evicted").
	cfg := eventbus.Options{ReplayBufferSize: 1000}
	var nodes [2]*node
	var srvs [2]*httptest.Server
	var stream string
	rotate := func(k int64) {
		if stream != "" {
			for i := range nodes {
				srvs[i].Close()
				_ = nodes[i].bus.Close()
			}
			js, err := jetstream.New(nodes[0].nc)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			require.NoError(t, js.DeleteStream(ctx, stream))
			cancel()
			for i := range nodes {
				nodes[i].nc.Close()
			}
		}
		stream = fmt.Sprintf("MANY%d_%d", streamSeq.Add(1), k)
		opts := []rbnats.Option{rbnats.WithStream(stream), rbnats.WithSubjectPrefix(strings.ToLower(stream)),
			rbnats.WithStorage(jetstream.MemoryStorage), rbnats.WithHeartbeat(500 * time.Millisecond)}
		for i := range nodes {
			nodes[i] = newNode(t, shared.ClientURL(), cfg, opts...)
			h, err := sse.NewHandler(nodes[i].bus, sse.HandlerOptions{Heartbeat: -1})
			require.NoError(t, err)
			mux := http.NewServeMux()
			mux.Handle(sse.ManyPattern, h)
			mux.Handle(sse.ChangePattern, h)
			srvs[i] = httptest.NewServer(mux)
			t.Cleanup(srvs[i].Close)
			t.Cleanup(func() { _ = h.Close() })
		}
	}
	var cases, frames, cuts, adds, removes, events atomic.Int64
	t.Cleanup(func() {
		t.Logf("%d cases: %d events delivered exactly once in order per session, %d frames, %d cuts, %d adds, %d removes",
			cases.Load(), events.Load(), frames.Load(), cuts.Load(), adds.Load(), removes.Load())
	})
	rapid.Check(t, func(rt *rapid.T) {
		c := cases.Add(1)
		if c%500 == 1 {
			rotate(c)
		}
		m := &manyModel{rt: rt, nodes: nodes, srvs: srvs, published: map[string][]uint64{}, recv: map[string][]uint64{},
			set: map[string]bool{}, frames: &frames, events: &events}
		for i := range manySessions {
			s := fmt.Sprintf("c%d-s%02d", c, i)
			m.all = append(m.all, s)
			require.NoError(rt, nodes[i%2].bus.CreateSession(s, ""))
		}
		m.sync(0)
		m.sync(1)
		if rapid.Bool().Draw(rt, "all") {
			m.url = slices.Clone(m.all)
		} else {
			for _, s := range m.all {
				if rapid.IntRange(0, 3).Draw(rt, "pick "+s) == 0 {
					m.url = append(m.url, s)
				}
			}
			if len(m.url) == 0 {
				m.url = m.all[:1]
			}
		}
		for _, s := range m.url {
			m.set[s] = true
		}
		m.publish(rapid.IntRange(0, 20).Draw(rt, "before"))
		m.connect(rapid.IntRange(0, 1).Draw(rt, "node"))
		defer m.close()
		rt.Repeat(map[string]func(*rapid.T){
			"publish": func(t *rapid.T) { m.publish(rapid.IntRange(1, 8).Draw(t, "n")) },
			"readSome": func(t *rapid.T) {
				m.read(rapid.IntRange(1, 10).Draw(t, "k"))
			},
			"cut": func(t *rapid.T) {
				cuts.Add(1)
				m.close()
				m.connect(rapid.IntRange(0, 1).Draw(t, "node"))
			},
			"add": func(t *rapid.T) {
				var out []string
				for _, s := range m.all {
					if !m.set[s] {
						out = append(out, s)
					}
				}
				if len(out) == 0 {
					t.Skip("every session is in the set")
				}
				adds.Add(1)
				m.add(rapid.SampledFrom(out).Draw(t, "session"))
			},
			"remove": func(t *rapid.T) {
				if len(m.set) < 2 {
					t.Skip("keep one")
				}
				removes.Add(1)
				in := m.members()
				m.remove(rapid.SampledFrom(in).Draw(t, "session"))
			},
		})
		m.read(-1)
		for s := range m.set {
			if !slices.Equal(m.recv[s], m.published[s]) {
				rt.Fatalf("session %s: received %v, published %v", s, m.recv[s], m.published[s])
			}
		}
	})
}

// manyModel is the client and what it should have.
type manyModel struct {
	rt        *rapid.T
	nodes     [2]*node
	srvs      [2]*httptest.Server
	all, url  []string
	set       map[string]bool     // the sessions whose events the client is owed
	published map[string][]uint64 // per session, in order
	recv      map[string][]uint64
	cursor    string // the last id: line
	conn      string
	at        int
	resp      *http.Response
	ch        chan sse.Frame
	cancel    context.CancelFunc
	frames    *atomic.Int64
	events    *atomic.Int64
}

func (m *manyModel) members() []string {
	var out []string
	for s := range m.set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func (m *manyModel) publish(n int) {
	for range n {
		s := rapid.SampledFrom(m.all).Draw(m.rt, "to")
		at := rapid.IntRange(0, 1).Draw(m.rt, "from node")
		ev, err := m.nodes[at].bus.Publish(s, "m", nil, eventbus.Existing())
		if err != nil {
			m.rt.Fatalf("publish to %s on node %d: %v", s, at, err)
		}
		m.published[s] = append(m.published[s], ev.ID)
	}
}

func (m *manyModel) owed() int {
	n := 0
	for s := range m.set {
		n += len(m.published[s]) - len(m.recv[s])
	}
	return n
}

func (m *manyModel) connect(at int) {
	m.sync(at) // the node knows the sessions (a cursor is awaited anyway)
	q := url.Values{"session": m.url}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.srvs[at].URL+"/events?"+q.Encode(), nil)
	require.NoError(m.rt, err)
	if m.cursor != "" {
		req.Header.Set("Last-Event-ID", m.cursor)
	}
	resp, err := m.srvs[at].Client().Do(req)
	require.NoError(m.rt, err)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		cancel()
		m.rt.Fatalf("connect: %d %s", resp.StatusCode, body)
	}
	m.at, m.resp, m.cancel, m.ch = at, resp, cancel, make(chan sse.Frame, 64)
	go func(dec *sse.Decoder, ch chan<- sse.Frame) {
		defer close(ch)
		for {
			f, err := dec.Next()
			if err != nil {
				return
			}
			f.Data = bytes.Clone(f.Data) // the decoder reuses its buffer
			ch <- f
		}
	}(sse.NewDecoder(resp.Body), m.ch)
	ev := m.frame()
	if ev.Type != resume.TypeConnection {
		m.rt.Fatalf("first frame %s, want connection", ev.Type)
	}
	var cd struct {
		Connection string                `json:"connection"`
		Sessions   []resume.SessionScope `json:"sessions"`
	}
	require.NoError(m.rt, json.Unmarshal(ev.Data, &cd))
	m.conn = cd.Connection
	var got []string
	for _, s := range cd.Sessions {
		got = append(got, s.Session)
	}
	sort.Strings(got)
	if !slices.Equal(got, m.members()) {
		m.rt.Fatalf("resumed set %v, want %v (cursor %q)", got, m.members(), m.cursor)
	}
}

func (m *manyModel) close() {
	if m.cancel == nil {
		return
	}
	m.cancel()
	_ = m.resp.Body.Close()
	for range m.ch { // the reader ends with the body
	}
	m.cancel = nil
}

// frame reads and checks one frame: an event must be its session's next
// published one; a gap or an error frame fails the case.
func (m *manyModel) frame() eventbus.Event {
	var f sse.Frame
	var ok bool
	select {
	case f, ok = <-m.ch:
	case <-time.After(20 * time.Second):
		m.rt.Fatalf("no frame within 20 s (owed %d)", m.owed())
	}
	if !ok {
		m.rt.Fatalf("stream ended (owed %d)", m.owed())
	}
	m.frames.Add(1)
	m.cursor = f.ID // as EventSource: the last id: line seen, whatever frame carried it
	ev, err := sse.DecodeEvent(f)
	require.NoError(m.rt, err)
	switch ev.Type {
	case frame.TypeStateResyncRequired, frame.TypeClientEvicted, resume.TypeSessionError:
		m.rt.Fatalf("unexpected %s frame: %s", ev.Type, ev.Data)
	}
	if ev.ID == 0 {
		return ev
	}
	s := ev.Session
	if !m.set[s] {
		m.rt.Fatalf("event %d of session %s, not in the set", ev.ID, s)
	}
	i := len(m.recv[s])
	if i >= len(m.published[s]) || m.published[s][i] != ev.ID {
		m.rt.Fatalf("session %s: got id %d after %v, published %v (cursor %q)", s, ev.ID, m.recv[s], m.published[s], f.ID)
	}
	m.recv[s] = append(m.recv[s], ev.ID)
	m.events.Add(1)
	return ev
}

// read reads until k events arrived or nothing is owed (k < 0: the latter).
func (m *manyModel) read(k int) {
	for n := 0; m.owed() > 0 && (k < 0 || n < k); {
		if m.frame().ID != 0 {
			n++
		}
	}
}

// change posts body to the connection and reads up to the frame of type
// typ naming session.
func (m *manyModel) change(body any, typ, session string) {
	b, _ := json.Marshal(body)
	resp, err := m.srvs[m.at].Client().Post(m.srvs[m.at].URL+"/events/"+m.conn, "application/json", bytes.NewReader(b))
	require.NoError(m.rt, err)
	out, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		m.rt.Fatalf("POST %s: %d %s", b, resp.StatusCode, out)
	}
	for {
		ev := m.frame()
		if ev.Type == typ && ev.Session == session {
			return
		}
	}
}

func (m *manyModel) add(s string) {
	a := map[string]string{"session": s}
	if r := m.recv[s]; len(r) > 0 {
		a["from"] = resume.FormatID(r[len(r)-1], m.nodes[0].bus.Epoch())
	}
	m.sync(m.at)
	m.set[s] = true
	m.change(map[string]any{"add": []any{a}}, resume.TypeSessionAdded, s)
}

func (m *manyModel) remove(s string) {
	m.change(map[string]any{"remove": []string{s}}, resume.TypeSessionRemoved, s)
	delete(m.set, s)
}

// sync waits until node at has ingested everything in the stream.
func (m *manyModel) sync(at int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(m.rt, m.nodes[at].be.Sync(ctx))
}
