package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// The client process: it holds one connection per session of its range,
// each in a goroutine that reads every frame (a real client, not a socket
// left unread), reconnects after a broken stream as an SSE client does
// (after the retry delay, jittered, with Last-Event-ID), and keeps the
// bookkeeping the harness checks: rounds received in order, once.
//
//	connscale clients -system replaybus -transport sse -addrs a,b,c,d -primaries 3 -first 0 -n 10000 [-active]

type clientsConfig struct {
	system, transport string
	addrs             []string
	primaries         int // addrs[:primaries] take the first connects; the rest are spares
	first, n          int
	active            bool
}

// conn is one client connection's bookkeeping.
type conn struct {
	session string
	node    int
	lastID  string // the last id: line (SSE) or envelope id (WebSocket), for the resume

	mu                  sync.Mutex
	next                int // the next round expected
	dup, lost, gaps     int
	dropped, resumed    int64 // Unix ns of the last break and of the reconnect after it
	connected, everDrop bool
}

type clientsProc struct {
	cfg    clientsConfig
	conns  []*conn
	open   atomic.Int64
	dials  atomic.Int64
	errs   sync.Map // error text → *atomic.Int64
	lat    latencies
	stopCh chan struct{}
}

// latencies are the active session's publish→receive times (ns).
type latencies struct {
	mu sync.Mutex
	ns []int64
}

func clientsMain(args []string) error {
	fs := flag.NewFlagSet("clients", flag.ContinueOnError)
	var cfg clientsConfig
	var addrs string
	fs.StringVar(&cfg.system, "system", "replaybus", "replaybus, replaybus-hijack or centrifuge")
	fs.StringVar(&cfg.transport, "transport", "sse", "sse or ws")
	fs.StringVar(&addrs, "addrs", "", "the servers, host:port, comma-separated")
	fs.IntVar(&cfg.primaries, "primaries", 0, "how many of -addrs take first connects (0: all); the others are spares that take reconnects")
	fs.IntVar(&cfg.first, "first", 0, "first session index")
	fs.IntVar(&cfg.n, "n", 1000, "connections (one session each)")
	fs.BoolVar(&cfg.active, "active", false, "also hold the connection of session \"active\" on the first server and time its events")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.addrs = strings.Split(addrs, ",")
	if cfg.primaries == 0 {
		cfg.primaries = len(cfg.addrs)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	p := &clientsProc{cfg: cfg, stopCh: make(chan struct{})}
	ctl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ctl.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		since, _ := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64)
		_ = json.NewEncoder(w).Encode(p.status(since))
	})
	go func() { _ = http.Serve(ctl, mux) }()

	sem := make(chan struct{}, 128) // connects in progress: the servers' accept backlog
	var wg sync.WaitGroup
	start := func(c *conn) {
		wg.Go(func() { p.run(ctx, c, sem) })
	}
	if cfg.active {
		c := &conn{session: "active", node: 0}
		p.conns = append(p.conns, c)
		start(c)
	}
	for i := cfg.first; i < cfg.first+cfg.n; i++ {
		c := &conn{session: fmt.Sprintf("s%d", i), node: i % cfg.primaries}
		p.conns = append(p.conns, c)
		start(c)
	}
	<-ctx.Done()
	close(p.stopCh)
	wg.Wait()
	return nil
}

// run keeps c connected until the process stops.
func (p *clientsProc) run(ctx context.Context, c *conn, sem chan struct{}) {
	for ctx.Err() == nil {
		sem <- struct{}{}
		err := p.connect(ctx, c, func() { <-sem })
		if ctx.Err() != nil {
			return
		}
		p.count(err)
		now := time.Now().UnixNano()
		c.mu.Lock()
		if c.connected {
			c.dropped, c.resumed, c.everDrop = now, 0, true
		}
		c.connected = false
		// The node is gone or refused: the next connect goes to a spare
		// if there is one, else to the next server.
		if c.node < p.cfg.primaries && len(p.cfg.addrs) > p.cfg.primaries {
			c.node = p.cfg.primaries + rand.IntN(len(p.cfg.addrs)-p.cfg.primaries)
		} else if len(p.cfg.addrs) > 1 {
			c.node = (c.node + 1) % len(p.cfg.addrs)
		}
		c.mu.Unlock()
		// The SSE retry delay (3 s), drawn from [1.5 s, 3 s] as
		// adapters/resume's clients and browsers spread it.
		select {
		case <-ctx.Done():
			return
		case <-time.After(1500*time.Millisecond + rand.N(1500*time.Millisecond)):
		}
	}
}

func (p *clientsProc) count(err error) {
	msg := "stream ended"
	if err != nil {
		msg = err.Error()
		if i := strings.LastIndex(msg, ": "); i >= 0 && len(msg) > 80 {
			msg = msg[i+2:]
		}
	}
	v, _ := p.errs.LoadOrStore(msg, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// connected marks c's stream as up (its answer or handshake arrived).
func (p *clientsProc) connected(c *conn) {
	p.open.Add(1)
	p.dials.Add(1)
	c.mu.Lock()
	c.connected = true
	if c.dropped != 0 && c.resumed == 0 {
		c.resumed = time.Now().UnixNano()
	}
	c.mu.Unlock()
}

// event handles one event's data of c's session.
func (p *clientsProc) event(c *conn, data []byte) {
	if c.session == "active" {
		if t, ok := intField(data, `"t":`); ok {
			p.lat.mu.Lock()
			p.lat.ns = append(p.lat.ns, time.Now().UnixNano()-t)
			p.lat.mu.Unlock()
		}
		return
	}
	r, ok := intField(data, `"r":`)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case int(r) == c.next:
		c.next++
	case int(r) < c.next:
		c.dup++
	default:
		c.lost += int(r) - c.next
		c.next = int(r) + 1
	}
}

func (p *clientsProc) connect(ctx context.Context, c *conn, release func()) error {
	addr := p.cfg.addrs[c.node]
	if p.cfg.transport == "ws" {
		return p.runWS(ctx, c, addr, release)
	}
	return p.runSSE(ctx, c, addr, release)
}

// runSSE reads one SSE stream of c until it breaks.
func (p *clientsProc) runSSE(ctx context.Context, c *conn, addr string, release func()) error {
	d := net.Dialer{Timeout: 10 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		release()
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	path := "/session/" + c.session + "/events"
	if p.cfg.system == "centrifuge" {
		path = "/connection/uni_sse?cf_connect=" + url.QueryEscape(`{"id":1,"connect":{}}`) + "&s=" + c.session
	}
	req := "GET " + path + " HTTP/1.1\r\nHost: scale\r\nAccept: text/event-stream\r\n"
	if c.lastID != "" {
		req += "Last-Event-ID: " + c.lastID + "\r\n"
	}
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	_, err = io.WriteString(nc, req+"\r\n")
	if err != nil {
		release()
		return err
	}
	br := bufio.NewReaderSize(nc, 1024)
	resp, err := http.ReadResponse(br, nil)
	release()
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	_ = nc.SetDeadline(time.Time{})
	p.connected(c)
	defer p.open.Add(-1)
	body := bufio.NewReaderSize(resp.Body, 1024)
	var id, event string
	var data []byte
	for {
		line, err := body.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return errors.New("line over 1 KiB")
		}
		if err != nil {
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			switch {
			case event == "state_resync_required":
				c.mu.Lock()
				c.gaps++
				c.mu.Unlock()
			case len(data) > 0:
				p.event(c, data)
			}
			if id != "" {
				c.lastID = id
			}
			id, event, data = "", "", data[:0]
		case bytes.HasPrefix(line, []byte("id:")):
			id = string(bytes.TrimSpace(line[3:]))
		case bytes.HasPrefix(line, []byte("event:")):
			event = string(bytes.TrimSpace(line[6:]))
		case bytes.HasPrefix(line, []byte("data:")):
			data = append(data, line[5:]...)
		}
	}
}

// runWS reads one WebSocket of c until it breaks.
func (p *clientsProc) runWS(ctx context.Context, c *conn, addr string, release func()) error {
	u := "ws://" + addr + "/session/" + c.session + "/ws"
	hello := []byte(`{"resume":{}}`)
	if c.lastID != "" {
		hello = fmt.Appendf(nil, `{"resume":{"lastEventId":%q}}`, c.lastID)
	}
	if p.cfg.system == "centrifuge" {
		u = "ws://" + addr + "/connection/websocket?s=" + c.session
		hello = []byte(`{"id":1,"connect":{}}`)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	wc, _, err := websocket.Dial(dctx, u, nil)
	cancel()
	release()
	if err != nil {
		return err
	}
	defer wc.CloseNow()
	if err := wc.Write(ctx, websocket.MessageText, hello); err != nil {
		return err
	}
	p.connected(c)
	defer p.open.Add(-1)
	var buf bytes.Buffer
	for {
		// A background context: a cancellable one makes coder/websocket
		// arm a context.AfterFunc per read; ctx's end closes wc instead.
		_, r, err := wc.Reader(context.Background())
		if err != nil {
			return err
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			return err
		}
		msg := buf.Bytes()
		if p.cfg.system == "centrifuge" {
			for part := range bytes.SplitSeq(msg, []byte("\n")) {
				if bytes.Equal(part, []byte("{}")) { // a ping: answered as centrifuge's SDKs do
					if err := wc.Write(ctx, websocket.MessageText, []byte("{}")); err != nil {
						return err
					}
					continue
				}
				if i := bytes.Index(part, []byte(`"data":`)); i >= 0 {
					p.event(c, part[i:])
				}
			}
			continue
		}
		if id, ok := stringField(msg, `"id":`); ok {
			c.lastID = id
		}
		if bytes.Contains(msg, []byte(`"type":"state_resync_required"`)) {
			c.mu.Lock()
			c.gaps++
			c.mu.Unlock()
			continue
		}
		if i := bytes.Index(msg, []byte(`"data":`)); i >= 0 {
			p.event(c, msg[i:])
		}
	}
}

// intField parses the integer after key in b.
func intField(b []byte, key string) (int64, bool) {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false
	}
	b = b[i+len(key):]
	j := 0
	for j < len(b) && (b[j] >= '0' && b[j] <= '9' || j == 0 && b[j] == '-') {
		j++
	}
	n, err := strconv.ParseInt(string(b[:j]), 10, 64)
	return n, err == nil
}

// stringField returns the value after key: a JSON string's text, or a
// number's digits.
func stringField(b []byte, key string) (string, bool) {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return "", false
	}
	b = b[i+len(key):]
	if len(b) > 0 && b[0] == '"' {
		j := bytes.IndexByte(b[1:], '"')
		if j < 0 {
			return "", false
		}
		return string(b[1 : j+1]), true
	}
	j := 0
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	return string(b[:j]), j > 0
}

// clientStatus is what a client process reports.
type clientStatus struct {
	Conns, Open int
	Dials       int64
	Errors      map[string]int64
	// Rounds[r]: connections (active excluded) that have round r.
	Rounds          []int
	Lost, Dup, Gaps int
	// Of the connections that broke at or after since: how many, how many
	// resumed, and their resume times after since (ms).
	Dropped, Resumed int
	ResumeMs         []int64
	// The active session's publish→receive latencies (µs), sorted.
	LatencyUs []int64
}

func (p *clientsProc) status(since int64) clientStatus {
	st := clientStatus{Conns: len(p.conns), Open: int(p.open.Load()), Dials: p.dials.Load(), Errors: map[string]int64{}}
	p.errs.Range(func(k, v any) bool {
		st.Errors[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	for _, c := range p.conns {
		if c.session == "active" {
			continue
		}
		c.mu.Lock()
		for len(st.Rounds) < c.next {
			st.Rounds = append(st.Rounds, 0)
		}
		for r := range c.next {
			st.Rounds[r]++
		}
		st.Lost += c.lost
		st.Dup += c.dup
		st.Gaps += c.gaps
		if since != 0 && c.everDrop && c.dropped >= since {
			st.Dropped++
			if c.resumed != 0 {
				st.Resumed++
				st.ResumeMs = append(st.ResumeMs, (c.resumed-since)/1e6)
			}
		}
		c.mu.Unlock()
	}
	p.lat.mu.Lock()
	for _, ns := range p.lat.ns {
		st.LatencyUs = append(st.LatencyUs, ns/1e3)
	}
	p.lat.mu.Unlock()
	slices.Sort(st.LatencyUs)
	slices.Sort(st.ResumeMs)
	return st
}
