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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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

// natsFlags are the -nats… flags: the bus over NATS JetStream (see
// docs/distributed.md) instead of the in-memory default. Over NATS the demo
// agents publish through an eventbus.Pipeline (up to 256 acks in flight per
// agent, flushed at the end of each turn) rather than waiting for every
// JetStream ack; POST …/events stays a synchronous Publish, since it
// answers with the event's id. The stream's retention comes from
// AGENTPOOL_EVENTBUS_NATS_RETENTION and AGENTPOOL_EVENTBUS_NATS_MAX_AGE
// (config.LoadNATS), passed as rbnats.WithRetention and rbnats.WithMaxAge;
// its replicas and storage, and the embedded server's sync policy, from
// -nats-replicas, -nats-storage and -nats-sync, each of which wins over its
// AGENTPOOL_EVENTBUS_NATS_* variable.
type natsFlags struct {
	url      string // "", "embedded" or nats://…
	dir      string
	listen   string // the embedded server's client address
	replicas int    // 0: not given
	storage  string // "": not given
	sync     config.NATSSync
	cluster  string // the embedded server's route address; "": no cluster
	routes   string // the other embedded servers' route URLs, comma-separated
	set      map[string]bool
}

func (n *natsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&n.url, "nats", "", `run the bus over NATS JetStream: "embedded" starts an in-process server (see -nats-listen), nats://host:port[,…] uses an external server or cluster (default: in-memory bus)`)
	fs.StringVar(&n.dir, "nats-dir", "", "JetStream data folder of -nats embedded (default $TMPDIR/replaybus-nats)")
	fs.StringVar(&n.listen, "nats-listen", DefaultNATSListen, "client address of the -nats embedded server, host:port (loopback by default: the server has no authentication; port 0 picks a free one)")
	fs.IntVar(&n.replicas, "nats-replicas", 0, "servers of the NATS cluster that hold every event, 1-5 (default $AGENTPOOL_EVENTBUS_NATS_REPLICAS, else 1); 3 on a 3-server cluster survives the loss of any one")
	fs.StringVar(&n.storage, "nats-storage", "", "JetStream storage of the stream: file or memory (default $AGENTPOOL_EVENTBUS_NATS_STORAGE, else file)")
	fs.TextVar(&n.sync, "nats-sync", config.NATSSync{}, `when the -nats embedded server syncs JetStream to disk: "always" (before every ack) or an interval such as 1s (default $AGENTPOOL_EVENTBUS_NATS_SYNC, else nats-server's 2m); see docs/distributed.md`)
	fs.StringVar(&n.cluster, "nats-cluster", "", "route address host:port of the -nats embedded server, which joins a NATS cluster with the servers of -nats-routes (default: no cluster)")
	fs.StringVar(&n.routes, "nats-routes", "", "the other servers of -nats-cluster, comma-separated nats-route://host:port URLs")
}

// embeddedOnly are the flags that configure the embedded server.
var embeddedOnly = []string{"nats-dir", "nats-listen", "nats-sync", "nats-cluster", "nats-routes"}

// check refuses the embedded server's flags without -nats embedded and the
// stream's without -nats (they would be ignored), a bad -nats-replicas or
// -nats-storage, and -nats-routes without -nats-cluster.
func (n *natsFlags) check(fs *flag.FlagSet) error {
	n.set = map[string]bool{}
	var err error
	fail := func(format string, args ...any) {
		if err == nil {
			err = usageError{msg: "agentserver: " + fmt.Sprintf(format, args...)}
		}
	}
	fs.Visit(func(f *flag.Flag) {
		n.set[f.Name] = true
		switch {
		case slices.Contains(embeddedOnly, f.Name) && n.url != "embedded":
			fail("-%s %q applies to -nats embedded only (-nats is %q)", f.Name, f.Value, n.url)
		case (f.Name == "nats-replicas" || f.Name == "nats-storage") && n.url == "":
			fail("-%s %q applies to the bus over NATS only (-nats is not set)", f.Name, f.Value)
		}
	})
	if n.set["nats-replicas"] && (n.replicas < 1 || n.replicas > 5) {
		fail("-nats-replicas %d: out of range [1, 5]", n.replicas)
	}
	if n.set["nats-storage"] && n.storage != "file" && n.storage != "memory" {
		fail("-nats-storage %q: want file or memory", n.storage)
	}
	if n.routes != "" && n.cluster == "" {
		fail("-nats-routes %q needs -nats-cluster (this server's own route address)", n.routes)
	}
	return err
}

// settle merges the flags with the AGENTPOOL_EVENTBUS_NATS_* values: a flag
// given wins over its variable. A sync policy from the environment while
// the NATS server is external is refused: that server's own configuration
// decides, and ignoring the variable would promise a durability it does not
// give.
func (n *natsFlags) settle(env config.NATS) (config.NATS, error) {
	if n.set["nats-replicas"] {
		env.Replicas = n.replicas
	}
	if n.set["nats-storage"] {
		env.Storage = n.storage
	}
	if n.set["nats-sync"] {
		env.Sync = n.sync
	}
	if env.Sync != (config.NATSSync{}) && n.url != "" && n.url != "embedded" {
		return env, usageError{msg: fmt.Sprintf("agentserver: %sNATS_SYNC=%s applies to -nats embedded only: "+
			"an external NATS server syncs as its own configuration says (jetstream { sync_interval: always })", config.Prefix, env.Sync)}
	}
	return env, nil
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
		sc := embedded.ServerConfig{Dir: dir, Host: host, Port: port,
			SyncAlways: natsCfg.Sync.Always, SyncInterval: natsCfg.Sync.Interval}
		if n.cluster != "" {
			chost, cport, err := splitListen(n.cluster)
			if err != nil {
				return nb, usageError{msg: fmt.Sprintf("agentserver: -nats-cluster %q: %v", n.cluster, err)}
			}
			if chost != host {
				return nb, usageError{msg: fmt.Sprintf("agentserver: -nats-cluster %q: the route address must be on the host of -nats-listen (%s)", n.cluster, host)}
			}
			sc.ClusterPort = cport
			for r := range strings.SplitSeq(n.routes, ",") {
				if r = strings.TrimSpace(r); r == "" {
					continue
				}
				if !strings.HasPrefix(r, "nats-route://") {
					return nb, usageError{msg: fmt.Sprintf("agentserver: -nats-routes: %q is not a nats-route://host:port URL", r)}
				}
				sc.Routes = append(sc.Routes, r)
			}
		}
		srv, err = embedded.RunServer(sc)
		if err != nil {
			return nb, fmt.Errorf("embedded NATS server on %s: %w", n.listen, err)
		}
		url = srv.ClientURL()
		log.Info("embedded NATS server", "url", url, "dir", dir, "sync", syncText(natsCfg.Sync), "route", srv.RouteURL())
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
	if natsCfg.Replicas != 0 {
		opts = append(opts, rbnats.WithReplicas(natsCfg.Replicas))
	}
	if natsCfg.Storage == "memory" {
		opts = append(opts, rbnats.WithStorage(jetstream.MemoryStorage))
	}
	be, err := newBackend(ctx, nc, cfg, opts, log)
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

// newBackend is rbnats.NewBackend, retried every second (until ctx ends)
// while the NATS cluster is still forming: the servers of a cluster start
// one by one, and until a meta leader is elected with enough servers for
// the stream's replicas, creating the stream times out or finds too few
// servers. Other errors return at once.
func newBackend(ctx context.Context, nc *nats.Conn, cfg eventbus.Options, opts []rbnats.Option, log *slog.Logger) (*rbnats.Backend, error) {
	for attempt := 1; ; attempt++ {
		be, err := rbnats.NewBackend(ctx, nc, cfg, opts...)
		if err == nil || !clusterForming(err) {
			return be, err
		}
		log.Warn("waiting for the NATS cluster to form", "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
}

// clusterForming reports whether err is what creating a stream answers
// while its NATS cluster has no JetStream meta leader yet (the request
// times out) or fewer servers than replicas.
func clusterForming(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		// nats-server's JSClusterNoPeersErr, JSClusterNotAvailErr,
		// JSInsufficientResourcesErr.
		switch api.ErrorCode {
		case 10005, 10008, 10023:
			return true
		}
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}

// syncText names a sync policy for the start-up log.
func syncText(s config.NATSSync) string {
	if t := s.String(); t != "" {
		return t
	}
	return "2m (nats-server's default)"
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
