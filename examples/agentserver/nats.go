package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/config"
	"github.com/replaybus/replaybus/eventbus"
)

// DefaultNATSListen is where -nats embedded listens unless -nats-listen says
// otherwise: loopback, on NATS's well-known port, so that a second node on
// the same machine joins with -nats nats://127.0.0.1:4222.
const DefaultNATSListen = "127.0.0.1:4222"

// natsReconnectWait is how long the node waits between attempts to reach a
// NATS server it lost (it tries for as long as it runs).
const natsReconnectWait = 250 * time.Millisecond

// natsFlags are -nats, -nats-dir and -nats-listen: the bus over NATS
// JetStream (see docs/distributed.md) instead of the in-memory default. Over
// NATS the demo agents publish through a eventbus.Pipeline (up to 256 acks
// in flight per agent, flushed at the end of each turn) rather than waiting
// for every JetStream ack; POST …/events stays a synchronous Publish, since
// it answers with the event's id. The stream's retention comes from
// AGENTPOOL_EVENTBUS_NATS_RETENTION and AGENTPOOL_EVENTBUS_NATS_MAX_AGE
// (config.LoadNATS), passed as rbnats.WithRetention and rbnats.WithMaxAge.
type natsFlags struct {
	url    string // "", "embedded" or nats://…
	dir    string
	listen string // the embedded server's client address
}

func (n *natsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&n.url, "nats", "", `run the bus over NATS JetStream: "embedded" starts an in-process server (see -nats-listen), nats://host:port[,…] uses an external server or cluster (default: in-memory bus)`)
	fs.StringVar(&n.dir, "nats-dir", "", "JetStream data folder of -nats embedded (default $TMPDIR/replaybus-nats)")
	fs.StringVar(&n.listen, "nats-listen", DefaultNATSListen, "client address of the -nats embedded server, host:port (loopback by default: the server has no authentication; port 0 picks a free one)")
}

// check refuses -nats-dir and -nats-listen without -nats embedded, which
// would ignore them.
func (n natsFlags) check(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if (f.Name == "nats-dir" || f.Name == "nats-listen") && n.url != "embedded" && err == nil {
			err = usageError{msg: fmt.Sprintf("agentserver: -%s %q applies to -nats embedded only (-nats is %q)", f.Name, f.Value, n.url)}
		}
	})
	return err
}

// natsBus is what open returns: the bus, a function that stops what open
// started once the bus is closed, and the backend's readiness (nil for the
// in-memory bus, which has no backend to lose).
type natsBus struct {
	bus   *eventbus.Bus
	stop  func()
	ready func() error
}

// open returns the bus. Configuration problems come back as usage errors.
func (n natsFlags) open(ctx context.Context, cfg eventbus.Options, natsCfg config.NATS, log *slog.Logger) (natsBus, error) {
	nb := natsBus{stop: func() {}}
	cfg.Logger = log
	if n.url == "" {
		bus, err := eventbus.New(cfg)
		if err != nil {
			return nb, configError(err)
		}
		nb.bus = bus
		return nb, nil
	}
	if err := cfg.Validate(); err != nil {
		return nb, configError(err)
	}
	url := n.url
	var srv *embedded.Server
	if n.url == "embedded" {
		host, port, err := splitListen(n.listen)
		if err != nil {
			return nb, usageError{msg: fmt.Sprintf("agentserver: -nats-listen %q: %v", n.listen, err)}
		}
		dir := n.dir
		if dir == "" {
			dir = filepath.Join(os.TempDir(), "replaybus-nats")
		}
		srv, err = embedded.RunServer(embedded.ServerConfig{Dir: dir, Host: host, Port: port})
		if err != nil {
			return nb, fmt.Errorf("embedded NATS server on %s: %w", n.listen, err)
		}
		url = srv.ClientURL()
		log.Info("embedded NATS server", "url", url, "dir", dir)
	} else if !strings.HasPrefix(n.url, "nats://") && !strings.HasPrefix(n.url, "tls://") {
		return nb, usageError{msg: fmt.Sprintf("agentserver: -nats %q: want embedded or nats://host:port", n.url)}
	}
	stopServer := func() {
		if srv != nil {
			srv.Shutdown()
		}
	}
	// The node dials the connection itself (rbnats.Connect would too) to
	// watch its state: it reconnects for as long as it runs, to the same
	// address, so a node whose NATS server restarts heals by itself, and
	// /healthz and the routes report the outage meanwhile.
	nc, err := nats.Connect(url, nats.Name("replaybus agentserver"), nats.MaxReconnects(-1),
		nats.ReconnectWait(natsReconnectWait),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("NATS connection lost; reconnecting", "url", url, "error", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("NATS connection back", "url", c.ConnectedUrl()) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("NATS connection", "error", err)
		}))
	if err != nil {
		stopServer()
		return nb, fmt.Errorf("connecting to NATS at %s: %w", url, err)
	}
	// NewBackend and eventbus.NewWithBackend rather than rbnats.New, to keep the
	// backend for its Ready.
	opts := []rbnats.Option{rbnats.WithLogger(log)}
	if natsCfg.Retention != 0 {
		opts = append(opts, rbnats.WithRetention(natsCfg.Retention))
	}
	if natsCfg.MaxAge != 0 {
		opts = append(opts, rbnats.WithMaxAge(natsCfg.MaxAge))
	}
	be, err := rbnats.NewBackend(ctx, nc, cfg, opts...)
	if err != nil {
		nc.Close()
		stopServer()
		return nb, err
	}
	bus, err := eventbus.NewWithBackend(ctx, cfg, be)
	if err != nil {
		_ = be.Close()
		nc.Close()
		stopServer()
		return nb, err
	}
	nb.bus = bus
	nb.stop = func() { nc.Close(); stopServer() }
	nb.ready = be.Ready
	return nb, nil
}

// splitListen parses a -nats-listen address: host:port with a port in
// 0–65535 (0: a free one) and a non-empty host.
func splitListen(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	if host == "" {
		return "", 0, errors.New("want host:port with a host (127.0.0.1 for loopback only, 0.0.0.0 for every interface)")
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q is not a number in 0–65535", p)
	}
	return host, int(port), nil
}
