package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/coalesce"
	"github.com/replaybus/replaybus/config"
	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/examples/agentserver/demo"
	"github.com/replaybus/replaybus/examples/agentserver/server"
	"github.com/replaybus/replaybus/scope"
)

// shutdownTimeout bounds the graceful part of a shutdown.
const shutdownTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stderr, nil)
	if code := report(err, os.Stderr); code != 0 {
		os.Exit(code)
	}
}

// report writes err to stderr, unless the flag package already did, and
// returns the exit status: 0 for nil, 2 for a usage error, else 1.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		if !ue.printed {
			fmt.Fprintln(stderr, err)
		}
		return 2
	}
	fmt.Fprintln(stderr, "agentserver:", err)
	return 1
}

// usageError is a bad flag or configuration: exit status 2. printed: the
// flag package has already written it (with the usage) to stderr.
type usageError struct {
	msg     string
	printed bool
}

func (e usageError) Error() string { return e.msg }

// maxDemoRate bounds -demo-rate (text deltas per second per agent).
const maxDemoRate = 100_000

// flags are the command-line settings.
type flags struct {
	addr     string
	demo     bool
	rate     float64
	level    slog.Level
	epochIDs bool
	nats     natsFlags
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("agentserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// Loopback by default: the server has no authentication, and any host
	// on the network could otherwise publish to or close a developer's
	// sessions. PORT (set by container platforms) keeps all interfaces.
	defAddr := "127.0.0.1:8080"
	if p := os.Getenv("PORT"); p != "" {
		defAddr = ":" + p
	}
	fs.StringVar(&f.addr, "addr", defAddr, "listen address (a bare :port listens on every interface); :$PORT when PORT is set")
	fs.BoolVar(&f.demo, "demo", false, "run a simulated agent with two sub-agents on session \"demo\"")
	fs.Float64Var(&f.rate, "demo-rate", demo.DefaultTokensPerSecond, "text deltas per second per agent, of the demo and of the model that answers POST /session/{id}/messages; above 0 and at most 100000")
	fs.TextVar(&f.level, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	fs.BoolVar(&f.epochIDs, "epoch-ids", true, "write SSE ids as <epoch>-<seq> so browsers detect a server restart")
	f.nats.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: agentserver [flags]\n\nServes a replaybus event bus over HTTP — SSE, WebSocket and Durable Streams — with a live page at /.\n"+
			"The bus is configured by the %s* environment variables.\n\nRoutes:\n", config.Prefix)
		for _, r := range server.Routes() {
			fmt.Fprintf(stderr, "  %-28s %s\n", r.Request, r.Doc)
		}
		fmt.Fprintf(stderr, "\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, err
		}
		return f, usageError{msg: err.Error(), printed: true} // flag wrote it and the usage
	}
	if err := f.nats.check(fs); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, usageError{msg: fmt.Sprintf("agentserver: unexpected arguments %q", fs.Args())}
	}
	// NaN and +Inf made every delay zero (a run published at once), a
	// negative or zero rate silently meant the default.
	if !(f.rate > 0 && f.rate <= maxDemoRate) {
		return f, usageError{msg: fmt.Sprintf("agentserver: invalid -demo-rate %v (want a number of deltas per second above 0, at most %d)", f.rate, maxDemoRate)}
	}
	return f, nil
}

// configError lists every configuration problem, one per line.
func configError(err error) error {
	var b strings.Builder
	b.WriteString("agentserver: invalid configuration:")
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		for _, e := range joined.Unwrap() {
			b.WriteString("\n  - " + e.Error())
		}
	} else {
		b.WriteString("\n  - " + err.Error())
	}
	return usageError{msg: b.String()}
}

// run is the whole program: it serves until ctx ends, then shuts down
// gracefully. ready, when set, is called with the listening address.
func run(ctx context.Context, args []string, stderr io.Writer, ready func(net.Addr)) error {
	f, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: f.level}))

	// The program's defaults, which every AGENTPOOL_EVENTBUS_* variable
	// set overrides: ACP replies are compacted in the replay buffer, so
	// that a page joining late gets a reply whole rather than from its
	// middle (AGENTPOOL_EVENTBUS_REPLAY_COMPACT=off turns it off).
	cfg, err := config.LoadWithDefaults(eventbus.Options{ReplayCompact: coalesce.ACP})
	if err != nil {
		return configError(err)
	}
	var transcript *server.Transcript
	if f.demo {
		// The demo's transcript is the bus's snapshot provider: a page
		// whose position is lost gets the text so far, then the rest.
		transcript = server.NewTranscript(server.TranscriptOptions{}) // 256 sessions, 64 KiB of text each
		cfg.Snapshots = transcript.Snapshot
	}
	// The stream's retention (AGENTPOOL_EVENTBUS_NATS_*): checked by
	// config.Load above, passed to adapters/nats by open.
	natsCfg, err := config.LoadNATS()
	if err != nil {
		return configError(err)
	}
	if natsCfg, err = f.nats.settle(natsCfg); err != nil {
		return err
	}
	nb, err := f.nats.open(ctx, cfg, natsCfg, log)
	if err != nil {
		return err
	}
	bus := nb.bus
	defer nb.stop() // after bus.Close
	defer bus.Close()

	opts := server.Options{Logger: log, SSE: sse.HandlerOptions{PlainIDs: !f.epochIDs}, Hello: true, Ready: nb.ready, AgentRate: f.rate}
	if f.demo {
		opts.DefaultSession, opts.DefaultScope, opts.Types = demo.DefaultParent, scope.Descendants, demo.Types
		// Before listening, so that a browser resuming after a restart
		// finds the session (and gets epoch_reset) instead of a 404.
		if err := bus.CreateSession(demo.DefaultParent, ""); err != nil {
			return err
		}
	}
	srv, err := server.New(bus, opts)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	baseCtx, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	var handler http.Handler = srv
	if listensOnLoopbackOnly(ln.Addr()) {
		handler = loopbackHosts(srv, server.DefaultBodyTimeout) // DNS rebinding: see loopbackHosts
	}
	hs := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		// A client that stops reading pins at most this much kernel
		// memory (Linux reserves twice it) before its stream is cut.
		ConnContext: sse.LimitSendBuffer(sse.DefaultSendBuffer),
		IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return baseCtx },
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// HTTP/1.1, and HTTP/2 without TLS for a client that starts with its
	// preface (h2c prior knowledge: curl --http2-prior-knowledge): one
	// connection carries many streams. A preface read as HTTP/1 got an
	// answer the client could not read.
	hs.Protocols = new(http.Protocols)
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
	// Shutdown waits for handlers to return; SSE streams return when the
	// SSE handler is closed.
	hs.RegisterOnShutdown(func() { _ = srv.Close() })

	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	log.Info("agentserver listening", "url", pageURL(ln.Addr()), "addr", ln.Addr().String(), "epoch", bus.Epoch(), "demo", f.demo,
		"replay_buffer_size", cfg.ReplayBufferSize, "max_queue_size", cfg.MaxQueueSize, "overflow_policy", overflowPolicy(cfg.OverflowPolicy),
		"replay_compact", cfg.ReplayCompact != nil)
	if ready != nil {
		ready(ln.Addr())
	}

	var wg sync.WaitGroup
	demoCtx, stopDemo := context.WithCancel(ctx)
	defer stopDemo()
	if transcript != nil {
		read, err := transcript.Follow(demoCtx, bus, demo.DefaultParent)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = read() // ends with the demo's context or the bus
		}()
	}
	if f.demo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := demo.Run(demoCtx, bus, demo.Options{TokensPerSecond: f.rate, Logger: log}); err != nil {
				log.Error("demo stopped", "error", err)
			}
		}()
	}

	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-serveErr:
		stopDemo()
		wg.Wait()
		_ = srv.StopAgents(context.Background()) // each reply returns as its turn ends
		return err
	}
	stopDemo()
	wg.Wait()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	// The model's replies are producers too: their turns end (cancelled,
	// "agentserver: shutting down") before the bus closes.
	if err := srv.StopAgents(sctx); err != nil {
		log.Warn("agent replies not all stopped in time", "error", err)
	}
	err = hs.Shutdown(sctx)
	cancelBase()
	if err != nil {
		log.Warn("graceful shutdown incomplete; closing", "error", err)
		_ = hs.Close()
	}
	<-serveErr // http.ErrServerClosed
	// WebSockets are hijacked: Shutdown does not wait for them. Wait until
	// each has sent its 1001 close frame (and had the answer, or the close
	// grace passed); a process that exited before saw browsers report 1006.
	if err := srv.WS().Shutdown(sctx); err != nil {
		log.Warn("WebSockets not all closed in time", "error", err)
	}
	// The Durable Streams subscriptions' webhook deliveries are outbound:
	// Shutdown did not wait for them either.
	if err := srv.Durable().Shutdown(sctx); err != nil {
		log.Warn("Durable Streams deliveries not all ended in time", "error", err)
	}
	_ = bus.Close()
	log.Info("stopped", "published", bus.Stats().Published)
	return nil
}

// overflowPolicy is the start-up log's overflow_policy: the policy set, or
// what an unset one means (it printed overflow_policy="").
func overflowPolicy(p eventbus.OverflowPolicy) string {
	if p == "" {
		return "unset (drop_oldest in process, drop_subscriber for the SSE and WebSocket streams)"
	}
	return string(p)
}

// pageURL is the address to open in a browser for a server listening on
// addr: localhost for an unspecified host (":8080", "[::]:8080").
func pageURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/"
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}
