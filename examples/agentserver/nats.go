package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/adapters/nats/embedded"
	"github.com/replaybus/replaybus/config"
	"github.com/replaybus/replaybus/eventbus"
)

// natsFlags are -nats and -nats-dir: the bus over NATS JetStream (see
// docs/distributed.md) instead of the in-memory default. Over NATS the demo
// agents publish through an eventbus.Pipeline (up to 256 acks in flight per
// agent, flushed at the end of each turn) rather than waiting for every
// JetStream ack; POST …/events stays a synchronous Publish, since it
// answers with the event's id. The stream's retention comes from
// AGENTPOOL_EVENTBUS_NATS_RETENTION and AGENTPOOL_EVENTBUS_NATS_MAX_AGE.
type natsFlags struct {
	url string // "", "embedded" or nats://…
	dir string
}

func (n *natsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&n.url, "nats", "", `run the bus over NATS JetStream: "embedded" starts an in-process server, nats://host:port[,…] uses an external server or cluster (default: in-memory bus)`)
	fs.StringVar(&n.dir, "nats-dir", "", "JetStream data folder of -nats embedded (default $TMPDIR/replaybus-nats)")
}

// open returns the bus and a function that stops what open started after
// the bus is closed. Configuration problems come back as usage errors.
func (n natsFlags) open(ctx context.Context, cfg config.Config, log *slog.Logger) (*eventbus.Bus, func(), error) {
	nop := func() {}
	if n.url == "" {
		bus, err := eventbus.New(cfg, eventbus.WithLogger(log))
		if err != nil {
			return nil, nop, configError(err)
		}
		return bus, nop, nil
	}
	if err := cfg.Validate(); err != nil {
		return nil, nop, configError(err)
	}
	url, stop := n.url, nop
	if n.url == "embedded" {
		dir := n.dir
		if dir == "" {
			dir = filepath.Join(os.TempDir(), "replaybus-nats")
		}
		srv, err := embedded.RunServer(embedded.ServerConfig{Dir: dir})
		if err != nil {
			return nil, nop, err
		}
		url, stop = srv.ClientURL(), srv.Shutdown
		log.Info("embedded NATS server", "url", url, "dir", dir)
	} else if !strings.HasPrefix(n.url, "nats://") && !strings.HasPrefix(n.url, "tls://") {
		return nil, nop, usageError{msg: fmt.Sprintf("agentserver: -nats %q: want embedded or nats://host:port", n.url)}
	}
	bus, err := rbnats.Connect(ctx, url, cfg, rbnats.WithLogger(log), rbnats.WithBusOptions(eventbus.WithLogger(log)))
	if err != nil {
		stop()
		return nil, nop, err
	}
	return bus, stop, nil
}
