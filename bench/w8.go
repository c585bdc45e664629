package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/centrifugal/centrifuge"
	sse "github.com/tmaxmax/go-sse"

	"github.com/replaybus/replaybus/adapters/resume"
	rbsse "github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// W8: real SSE over loopback. Each system's own HTTP handler is mounted on
// an http.Server listening on 127.0.0.1; S clients in this process connect
// over TCP, send a GET, and read and parse every frame of the chunked body
// (id:, event:, data: lines, blank line ends a frame) with one parser shared
// by all systems. A delivery is counted when the client has parsed the
// frame. The events are published in-process, flat out, as in W1.
//
//   - replaybus: adapters/sse.NewHandler on the bus (?replay=0) with its
//     default wire form: ids "<epoch>-<seq>" (the epoch is checked against
//     the answer's X-Event-Epoch) and a stream_start frame first, which is
//     not an event; lossless via HandlerOptions.Configure (MaxQueued
//     1,000,000, 1 GiB).
//   - go-sse: sse.Server{Provider: the session's Joe}.
//   - centrifuge: centrifuge.NewSSEHandler with a server-side subscription
//     (cf_connect in the URL, the channel from ConnectReply.Subscriptions).
type httpRig struct {
	inst     Instance
	handler  http.Handler
	path     func(session string) string
	idOffset uint64 // added to the id line's value (go-sse's auto ids start at 0)
	offsetIn bool   // the id is the "offset" inside the data line (centrifuge)
	named    bool   // frames name their session (identity checked)
}

var httpSystems = map[string]func(lossless bool) (*httpRig, error){
	"replaybus": func(lossless bool) (*httpRig, error) {
		inst, err := openReplaybus(Opts{Ring: 100})
		if err != nil {
			return nil, err
		}
		rb := inst.(*rbInstance)
		ho := rbsse.HandlerOptions{SessionID: func(r *http.Request) string { return r.URL.Query().Get("s") }}
		if lossless {
			ho.Configure = func(_ *http.Request, o *eventbus.SubscribeOptions) {
				o.MaxQueued, o.MaxQueuedBytes = 1_000_000, 1<<30
			}
		}
		h, err := rbsse.NewHandler(rb.bus, ho)
		if err != nil {
			inst.Close()
			return nil, err
		}
		return &httpRig{inst: inst, handler: h, named: true,
			path: func(s string) string { return "/events?replay=0&s=" + url.QueryEscape(s) }}, nil
	},
	"go-sse": func(lossless bool) (*httpRig, error) {
		inst, _ := openGoSSE(Opts{Ring: 100})
		g := inst.(*gsInstance)
		mux := http.NewServeMux()
		servers := sync.Map{}
		mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
			s := r.URL.Query().Get("s")
			x, err := g.session(s)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			srv, _ := servers.LoadOrStore(s, &sse.Server{Provider: x.joe})
			srv.(*sse.Server).ServeHTTP(w, r)
		})
		return &httpRig{inst: inst, handler: mux, idOffset: 1,
			path: func(s string) string { return "/events?s=" + url.QueryEscape(s) }}, nil
	},
	"centrifuge": func(lossless bool) (*httpRig, error) {
		inst, err := openCentrifuge(Opts{Ring: 100, Lossless: lossless})
		if err != nil {
			return nil, err
		}
		c := inst.(*cfInstance)
		h := centrifuge.NewSSEHandler(c.node, centrifuge.SSEConfig{
			PingPongConfig: centrifuge.PingPongConfig{PingInterval: -1, PongTimeout: -1},
		})
		wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := context.WithValue(r.Context(), cfChannelKey{}, r.URL.Query().Get("s"))
			h.ServeHTTP(w, r.WithContext(ctx))
		})
		connect := url.QueryEscape(`{"id":1,"connect":{}}`)
		return &httpRig{inst: inst, handler: wrapped, offsetIn: true, named: true,
			path: func(s string) string { return "/events?cf_connect=" + connect + "&s=" + url.QueryEscape(s) }}, nil
	},
}

// sseClient reads one stream until the connection ends or a frame cannot
// be parsed, feeding k; it returns why. It closes conn when it returns: a
// response body's Close would read an endless stream to its end, and the
// error would never come back.
func sseClient(conn net.Conn, path string, rig *httpRig, k *Sink) error {
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n\r\n", path); err != nil {
		return err
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	body := bufio.NewReaderSize(resp.Body, 64<<10)
	// An epoch-qualified id ("<epoch>-<seq>", replaybus's default) must
	// carry the epoch the answer announced.
	epoch := []byte(resp.Header.Get("X-Event-Epoch"))
	var (
		id                   uint64
		hasID, resync, synth bool
		sessOK               = true
		wantSess             = []byte(`"session":"` + k.sess + `"`)
		wantChan             = []byte(`"channel":"` + k.sess + `"`)
		resyncType           = []byte(frame.TypeStateResyncRequired)
		startType            = []byte(resume.TypeStreamStart)
		offsetField          = []byte(`"offset":`)
		sessionPresent       = []byte(`"session":"`)
		channelPresent       = []byte(`"channel":"`)
	)
	for {
		line, err := body.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return fmt.Errorf("line longer than 64 KiB")
			}
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if resync {
				k.Gap()
			}
			if hasID && !synth {
				if sessOK {
					k.Event(id + rig.idOffset)
				} else {
					k.foreign++
				}
			}
			id, hasID, resync, synth, sessOK = 0, false, false, false, true
		case bytes.HasPrefix(line, []byte("id:")):
			if rig.offsetIn {
				continue
			}
			v := bytes.TrimLeft(line[3:], " ")
			if i := bytes.LastIndexByte(v, '-'); i >= 0 {
				if !bytes.Equal(v[:i], epoch) {
					return fmt.Errorf("id %q is not of the epoch %q the answer announced", v, epoch)
				}
				v = v[i+1:]
			}
			if len(v) == 0 {
				return fmt.Errorf("id line %q has no number", line)
			}
			var n uint64
			for _, c := range v {
				if c < '0' || c > '9' {
					return fmt.Errorf("id %q is not a number", v)
				}
				n = n*10 + uint64(c-'0')
			}
			id, hasID = n, true
		case bytes.HasPrefix(line, []byte("event:")):
			typ := bytes.TrimLeft(line[6:], " ")
			resync = bytes.Equal(typ, resyncType)
			synth = bytes.Equal(typ, startType)
		case bytes.HasPrefix(line, []byte("data:")):
			if rig.named && k.sess != "" {
				switch {
				case rig.offsetIn && bytes.Contains(line, channelPresent):
					sessOK = bytes.Contains(line, wantChan)
				case !rig.offsetIn && bytes.Contains(line, sessionPresent):
					sessOK = bytes.Contains(line, wantSess)
				}
			}
			if rig.offsetIn {
				if i := bytes.Index(line, offsetField); i >= 0 {
					var n uint64
					for i += len(offsetField); i < len(line) && line[i] >= '0' && line[i] <= '9'; i++ {
						n = n*10 + uint64(line[i]-'0')
					}
					id, hasID = n, true
				}
			}
		}
	}
}

// runW8 measures one system at S clients with N events.
func runW8(name string, S, N int, lossless bool) (w1Result, error) {
	rig, err := httpSystems[name](lossless)
	if err != nil {
		return w1Result{}, err
	}
	return runLoopback(name, S, N, rig.inst, rig.handler, func(addr string, k *Sink) (loopClient, error) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return loopClient{}, err
		}
		return loopClient{
			run:  func() error { return sseClient(conn, rig.path(k.sess), rig, k) },
			stop: func() { _ = conn.Close() },
		}, nil
	})
}

// loopClient is one client of a loopback run: run reads the stream until
// it ends and returns why; stop ends it from outside.
type loopClient struct {
	run  func() error
	stop func()
}

// runLoopback serves handler on 127.0.0.1, connects S clients with dial
// (each feeding its own sink, whose sess is the session), waits until every
// one of them receives, publishes N measured events to inst flat out and
// returns the figures of that window. It closes inst.
func runLoopback(name string, S, N int, inst Instance, handler http.Handler, dial func(addr string, k *Sink) (loopClient, error)) (w1Result, error) {
	var res w1Result
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		inst.Close()
		return res, err
	}
	// ErrorLog discarded: at the end of a run the clients hang up, and the
	// handlers' complaints about that (go-sse: "superfluous WriteHeader")
	// are not results.
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(ln) }()
	const sess = "w8"
	// The session exists before anyone subscribes (replaybus's handler
	// answers 404 for an unknown session).
	if _, err := inst.Publish(sess, []byte(`{"probe":true}`)); err != nil {
		_ = srv.Close()
		inst.Close()
		return res, err
	}
	sinks := make([]*Sink, S)
	clients := make([]loopClient, 0, S)
	var wg sync.WaitGroup
	var closing sync.Once
	stopped := make(chan struct{})
	shutdown := func() {
		closing.Do(func() {
			close(stopped)
			for _, c := range clients {
				c.stop()
			}
			wg.Wait()
			_ = srv.Close()
			inst.Close()
		})
	}
	for i := range sinks {
		k := newSink(int64(N))
		k.sess, k.contig = sess, true
		sinks[i] = k
		c, err := dial(ln.Addr().String(), k)
		if err != nil {
			shutdown()
			return res, err
		}
		clients = append(clients, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.run(); err != nil {
				select {
				case <-stopped:
				default:
					k.End(err.Error())
				}
			}
		}()
	}
	defer shutdown()
	pub, err := inst.Publisher(sess)
	if err != nil {
		return res, err
	}
	// Every client registered: probes until each has seen one.
	deadline := time.Now().Add(60 * time.Second)
	for {
		all := true
		for _, k := range sinks {
			if !k.seen.Load() {
				if k.ended.Load() {
					return res, fmt.Errorf("%s: client ended before the start: %v", name, k.reason.Load())
				}
				all = false
				break
			}
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%s: clients not registered after 60 s", name)
		}
		if _, err := pub([]byte(`{"probe":true}`)); err != nil {
			return res, err
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // the last probes drain
	base := inst.LastID(sess)
	for _, k := range sinks {
		k.arm(base)
	}
	w, err := publishMeasured([]func([]byte) (uint64, error){pub}, N, sinks, 3*quiet) // over TCP a starved client may pause longer
	if err != nil {
		return res, err
	}
	t := sumSinks(sinks)
	if t.ended > 0 {
		for _, k := range sinks {
			if k.ended.Load() {
				progress("W8 %s: %d of %d clients ended early, e.g.: %v", name, t.ended, S, k.reason.Load())
				break
			}
		}
	}
	return fanoutResult(name, w, t, int64(N)*int64(S))
}
