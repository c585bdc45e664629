package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/centrifugal/centrifuge"
	"github.com/prometheus/client_golang/prometheus"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/adapters/ws"
	"github.com/replaybus/replaybus/eventbus"
)

// The server process: one system's handlers as a user embeds them, on its
// own port, and a control port for the harness (/stats, /publish, /round).
//
//	connscale serve -system replaybus|centrifuge [-nats urls]

// serveMain runs a server until SIGTERM; it prints its two addresses (the
// served one, then the control one) on stdout first.
func serveMain(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	system := fs.String("system", "replaybus", "replaybus, replaybus-hijack (sse.HandlerOptions.Hijack) or centrifuge")
	natsURLs := fs.String("nats", "", "run the replaybus bus over this NATS cluster (comma-separated URLs), stream R3 on file storage")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var (
		mux = http.NewServeMux()
		pub publisher
		err error
	)
	switch *system {
	case "replaybus", "replaybus-hijack":
		pub, err = serveReplaybus(ctx, mux, *natsURLs, *system == "replaybus-hijack")
	case "centrifuge":
		pub, err = serveCentrifuge(mux)
	default:
		err = fmt.Errorf("unknown system %q", *system)
	}
	if err != nil {
		return err
	}
	defer pub.close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("%s %s\n", ln.Addr(), ctl.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ConnContext: sse.LimitSendBuffer(sse.DefaultSendBuffer)}
	go func() { _ = srv.Serve(ln) }()
	cmux := http.NewServeMux()
	cmux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(readStats())
	})
	cmux.HandleFunc("POST /publish", func(w http.ResponseWriter, r *http.Request) {
		// n events to one session at rate per second, each carrying its
		// publish time: the active session among the idle ones.
		q := r.URL.Query()
		n, _ := strconv.Atoi(q.Get("n"))
		rate, _ := strconv.Atoi(q.Get("rate"))
		session := q.Get("session")
		tick := time.NewTicker(time.Second / time.Duration(max(rate, 1)))
		defer tick.Stop()
		for i := range n {
			<-tick.C
			data := fmt.Sprintf(`{"i":%d,"t":%d}`, i, time.Now().UnixNano())
			if err := pub.publish(session, []byte(data)); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
	})
	cmux.HandleFunc("POST /create", func(w http.ResponseWriter, r *http.Request) {
		// Sessions s<first> … s<first+n-1> and "active", as an agent
		// server creates a session before its clients subscribe (the
		// handlers answer 404 for a session nobody created).
		q := r.URL.Query()
		first, _ := strconv.Atoi(q.Get("first"))
		n, _ := strconv.Atoi(q.Get("n"))
		if err := pub.create(first, n); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	cmux.HandleFunc("POST /round", func(w http.ResponseWriter, r *http.Request) {
		// One event of round r to each of sessions s<first> … s<first+n-1>.
		q := r.URL.Query()
		round, _ := strconv.Atoi(q.Get("r"))
		first, _ := strconv.Atoi(q.Get("first"))
		n, _ := strconv.Atoi(q.Get("n"))
		if err := pub.round(r.Context(), round, first, n); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	cmux.HandleFunc("GET /debug/pprof/", pprof.Index)
	cmux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	csrv := &http.Server{Handler: cmux}
	go func() { _ = csrv.Serve(ctl) }()
	<-ctx.Done()
	_ = csrv.Close()
	pub.closeStreams()
	return srv.Close()
}

// publisher is what the control port needs of a system.
type publisher interface {
	create(first, n int) error
	publish(session string, data []byte) error
	round(ctx context.Context, r, first, n int) error
	closeStreams() // ends the streams (hijacked WebSockets too)
	close()
}

// stats is a server process's memory and CPU, read after a GC.
type stats struct {
	HeapInuse, StackInuse, Sys uint64
	RSS                        uint64 // bytes, /proc/self/status VmRSS
	Goroutines                 int
	CPU                        time.Duration // user + system so far
}

func readStats() stats {
	// Each GC halves the stack of a goroutine that uses less than a
	// quarter of it: a few cycles give the stacks a long-running idle
	// server settles at (its runtime forces a GC every 2 minutes).
	for range 4 {
		runtime.GC()
	}
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return stats{HeapInuse: m.HeapInuse, StackInuse: m.StackInuse, Sys: m.Sys, RSS: selfRSS(),
		Goroutines: runtime.NumGoroutine(), CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
}

// selfRSS reads VmRSS of this process.
func selfRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// rbServer is replaybus: the bus (in memory, or a node over NATS) with
// adapters/sse and adapters/ws on their documented routes, every option at
// its default but, for "replaybus-hijack", sse.HandlerOptions.Hijack.
type rbServer struct {
	bus *eventbus.Bus
	sse *sse.Handler
	ws  *ws.Handler
}

func serveReplaybus(ctx context.Context, mux *http.ServeMux, natsURLs string, hijack bool) (publisher, error) {
	s := &rbServer{}
	var err error
	if natsURLs == "" {
		s.bus, err = eventbus.New(eventbus.Options{})
	} else {
		s.bus, err = rbnats.Connect(ctx, natsURLs, eventbus.Options{}, rbnats.WithReplicas(3))
	}
	if err != nil {
		return nil, err
	}
	if s.sse, err = sse.NewHandler(s.bus, sse.HandlerOptions{Hijack: hijack}); err != nil {
		return nil, err
	}
	if s.ws, err = ws.NewHandler(s.bus, ws.HandlerOptions{}); err != nil {
		return nil, err
	}
	mux.Handle(sse.Pattern, s.sse)
	mux.Handle(ws.Pattern, s.ws)
	return s, nil
}

func (s *rbServer) create(first, n int) error {
	if err := s.bus.CreateSession("active", ""); err != nil {
		return err
	}
	// In parallel: over NATS each create waits for JetStream's ack.
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	next := make(chan int)
	for range 64 {
		wg.Go(func() {
			for i := range next {
				if err := s.bus.CreateSession(fmt.Sprintf("s%d", i), ""); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := first; i < first+n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func (s *rbServer) publish(session string, data []byte) error {
	_, err := s.bus.PublishJSON(session, "msg", data)
	return err
}

func (s *rbServer) round(ctx context.Context, r, first, n int) error {
	pl, err := eventbus.NewPipeline(s.bus, eventbus.PipelineOptions{})
	if err != nil {
		return err
	}
	for i := first; i < first+n; i++ {
		if err := pl.Publish(fmt.Sprintf("s%d", i), "msg", json.RawMessage(fmt.Appendf(nil, `{"r":%d}`, r))); err != nil {
			return err
		}
	}
	return pl.Flush(ctx)
}

func (s *rbServer) closeStreams() { _ = s.ws.Close(); _ = s.sse.Close() }
func (s *rbServer) close()        { _ = s.bus.Close() }

// cfServer is centrifuge: a Node with its memory broker, its SSE handler
// (unidirectional) and its WebSocket handler; a connection subscribes
// server-side to the channel named by ?s= (ConnectReply.Subscriptions,
// with recovery), as bench/'s centrifuge system does. Pings every 15 s, the
// heartbeat of replaybus's handlers (centrifuge's default is 25 s); the
// SSE stream has no pong (a unidirectional client cannot answer).
type cfServer struct{ node *centrifuge.Node }

type cfChannelKey struct{}

func serveCentrifuge(mux *http.ServeMux) (publisher, error) {
	node, err := centrifuge.New(centrifuge.Config{
		LogLevel: centrifuge.LogLevelNone,
		Metrics:  centrifuge.MetricsConfig{RegistererGatherer: prometheus.NewRegistry()},
	})
	if err != nil {
		return nil, err
	}
	broker, err := centrifuge.NewMemoryBroker(node, centrifuge.MemoryBrokerConfig{})
	if err != nil {
		return nil, err
	}
	node.SetBroker(broker)
	node.OnConnecting(func(ctx context.Context, e centrifuge.ConnectEvent) (centrifuge.ConnectReply, error) {
		ch, _ := ctx.Value(cfChannelKey{}).(string)
		return centrifuge.ConnectReply{
			Credentials:   &centrifuge.Credentials{UserID: "scale"},
			Subscriptions: map[string]centrifuge.SubscribeOptions{ch: {EnableRecovery: true}},
		}, nil
	})
	node.OnConnect(func(*centrifuge.Client) {})
	if err := node.Run(); err != nil {
		return nil, err
	}
	withChannel := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), cfChannelKey{}, r.URL.Query().Get("s"))))
		})
	}
	ping := centrifuge.PingPongConfig{PingInterval: 15 * time.Second}
	mux.Handle("/connection/uni_sse", withChannel(centrifuge.NewSSEHandler(node, centrifuge.SSEConfig{
		PingPongConfig: centrifuge.PingPongConfig{PingInterval: 15 * time.Second, PongTimeout: -1},
	})))
	mux.Handle("/connection/websocket", withChannel(centrifuge.NewWebsocketHandler(node, centrifuge.WebsocketConfig{
		PingPongConfig: ping, WriteTimeout: ws.DefaultWriteTimeout,
	})))
	return &cfServer{node: node}, nil
}

func (s *cfServer) create(int, int) error { return nil } // a channel needs no creating

func (s *cfServer) publish(session string, data []byte) error {
	_, err := s.node.Publish(session, data, centrifuge.WithHistory(100, time.Hour))
	return err
}

func (s *cfServer) round(_ context.Context, r, first, n int) error {
	for i := first; i < first+n; i++ {
		if err := s.publish(fmt.Sprintf("s%d", i), fmt.Appendf(nil, `{"r":%d}`, r)); err != nil {
			return err
		}
	}
	return nil
}

func (s *cfServer) closeStreams() {}
func (s *cfServer) close()        { _ = s.node.Shutdown(context.Background()) }
