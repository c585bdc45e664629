package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/replaybus/replaybus/tools/internal/natscluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(command(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// command is the program: it parses args, builds what is missing, runs the
// harness and prints the report; it returns the exit status (0: every
// property held, 1: one did not or the run failed, 2: bad flags).
func command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := Config{Log: stderr}
	seed := fs.Uint64("seed", 0, "seed of the fault schedule (0: one from the clock, printed)")
	fs.IntVar(&cfg.Kills, "kills", 30, "SIGKILLs of the stream's leader")
	fs.IntVar(&cfg.StepDowns, "stepdowns", 30, "graceful leader step-downs")
	fs.IntVar(&cfg.Partitions, "partitions", 10, "partitions of the leader from the other servers")
	fs.DurationVar(&cfg.Budget, "budget", 8*time.Minute+30*time.Second, "bound on the fault phase")
	fs.IntVar(&cfg.Producers, "producers", 4, "idempotent producers, one session each")
	fs.IntVar(&cfg.Window, "window", 16, "requests in flight per producer (HTTP/1.1 pipelining)")
	fs.IntVar(&cfg.Subscribers, "subscribers", 1, "live SSE subscribers per session on each node")
	fs.StringVar(&cfg.Sync, "sync", "", `the NATS servers' sync_interval: "always", a Go duration, or "" for nats-server's default`)
	fs.StringVar(&cfg.Storage, "storage", "file", "the stream's storage: file or memory")
	dir := fs.String("dir", "", "folder for the servers' data and the logs (default: a new temporary folder, removed after a run that passed)")
	fs.StringVar(&cfg.NATSServer, "nats-server", "", "nats-server binary (default: built with go build from the module version in go.sum)")
	fs.StringVar(&cfg.AgentServer, "agentserver", "", "examples/agentserver binary (default: built with go build)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if cfg.Storage != "file" && cfg.Storage != "memory" {
		fmt.Fprintf(stderr, "failover: -storage %q: want file or memory\n", cfg.Storage)
		return 2
	}
	cfg.Seed = *seed
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	fmt.Fprintf(stdout, "seed %d\n", cfg.Seed)
	keep := *dir != ""
	if !keep {
		d, err := os.MkdirTemp("", "replaybus-failover-*")
		if err != nil {
			fmt.Fprintln(stderr, "failover:", err)
			return 1
		}
		*dir = d
	}
	cfg.Dir = *dir
	if err := buildBinaries(ctx, &cfg); err != nil {
		fmt.Fprintln(stderr, "failover:", err)
		return 1
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "failover: %v (data and logs in %s)\n", err, cfg.Dir)
		return 1
	}
	printReport(stdout, rep)
	if failed := rep.Failed(); len(failed) > 0 {
		fmt.Fprintf(stdout, "FAILED (data and logs in %s):\n  %s\n", cfg.Dir, strings.Join(failed, "\n  "))
		return 1
	}
	if !keep {
		_ = os.RemoveAll(cfg.Dir)
	}
	fmt.Fprintln(stdout, "PASS")
	return 0
}

// buildBinaries builds nats-server and the example server into cfg.Dir
// when no binary was given.
func buildBinaries(ctx context.Context, cfg *Config) error {
	var err error
	if cfg.NATSServer == "" {
		if cfg.NATSServer, err = natscluster.Build(ctx, cfg.Dir); err != nil {
			return err
		}
	}
	if cfg.AgentServer == "" {
		cfg.AgentServer, err = natscluster.GoBuild(ctx, cfg.Dir, "agentserver", "github.com/replaybus/replaybus/examples/agentserver")
	}
	return err
}

// printReport writes the report's figures.
func printReport(w io.Writer, r *Report) {
	count := map[string]int{}
	errs := 0
	for _, f := range r.Faults {
		if f.Err == "" {
			count[f.Kind]++
		} else {
			errs++
		}
	}
	v := r.Verdict
	fmt.Fprintf(w, "run: %v, seed %d\n", r.Duration.Round(time.Second), r.Seed)
	fmt.Fprintf(w, "faults: %d leader SIGKILLs, %d step-downs, %d leader partitions (%d failed to inject, %d left out by the budget)\n",
		count[kindKill], count[kindStepDown], count[kindPartition], errs, r.Skipped)
	fmt.Fprintf(w, "events: %d acknowledged (%d as duplicates of a resend, %d while a leader was cut off), %d stored\n",
		v.Acked, v.AckedDup, v.AckedPartitioned, v.Stored)
	fmt.Fprintf(w, "checked: lost %d, ack holding another event %d, producer sequences stored twice %d, out of order %d\n",
		len(v.Lost), len(v.AckMismatch), len(v.DupStored), len(v.ProducerOrder))
	fmt.Fprintf(w, "subscribers: %d deliveries; duplicated %d, reordered %d, phantom %d; gap frames %d covering %d events; silent gaps %d\n",
		v.Delivered, v.Duplicated, v.Reordered, v.Phantom, v.AnnouncedGaps, v.AnnouncedMissing, v.SilentGaps)
	for _, k := range []string{kindKill, kindStepDown, kindPartition} {
		pub, read := r.PublishResume[k], r.ReadResume[k]
		if len(pub) == 0 {
			continue
		}
		fmt.Fprintf(w, "after %-9s publishing resumed p50 %v p99 %v max %v; every subscriber read p50 %v p99 %v max %v\n", k,
			dur(percentile(pub, 50)), dur(percentile(pub, 99)), dur(percentile(pub, 100)),
			dur(percentile(read, 50)), dur(percentile(read, 99)), dur(percentile(read, 100)))
	}
	fmt.Fprintf(w, "delivery lag (first send to receipt): p50 %v p99 %v max %v\n", dur(r.LagP50), dur(r.LagP99), dur(r.LagMax))
	if len(r.ProducerFailures) > 0 {
		var parts []string
		for k, n := range r.ProducerFailures {
			parts = append(parts, fmt.Sprintf("%d× %s", n, k))
		}
		slices.Sort(parts)
		fmt.Fprintf(w, "producer reconnects: %s\n", strings.Join(parts, "; "))
	}
	for _, e := range r.SubscriberErrors {
		fmt.Fprintf(w, "subscriber error: %s\n", e)
	}
}

// dur rounds a duration for the report ("never" for noResume).
func dur(d time.Duration) string {
	switch {
	case d == noResume:
		return "never"
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(100 * time.Microsecond).String()
}
