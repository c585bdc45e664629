package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

func main() {
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "serve":
		err = serveMain(os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "clients":
		err = clientsMain(os.Args[2:])
	default:
		err = command(context.Background(), os.Args[1:], os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "connscale:", err)
		os.Exit(1)
	}
}

// command runs the scenarios the flags name and prints their figures.
func command(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("connscale", flag.ContinueOnError)
	scenario := fs.String("scenario", "single", "single (idle connections on one process, each system and transport) or cluster (50k over NATS, one node killed)")
	n := fs.Int("n", 10_000, "single: idle connections per run")
	systems := fs.String("systems", "replaybus,replaybus-hijack,centrifuge", "single: the systems, in the order of the first round (replaybus-hijack: sse.HandlerOptions.Hijack; its WebSocket is replaybus's)")
	transports := fs.String("transports", "sse,ws", "single: the transports")
	rounds := fs.Int("rounds", 1, "single: rounds (the systems alternate their order)")
	idle := fs.Duration("idle", 30*time.Second, "single: how long idle CPU is measured (two SSE heartbeats: 30 s)")
	total := fs.Int("total", 50_000, "cluster: connections across the three nodes")
	dir := fs.String("dir", "", "folder for the processes' logs and data (default: a new temporary one)")
	natsBin := fs.String("nats-server", "", "cluster: nats-server binary (default: built with go build)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "replaybus-connscale-*")
		if err != nil {
			return err
		}
		*dir = d
	} else if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(out, "logs in %s\n", *dir)
	switch *scenario {
	case "single":
		sys := strings.Split(*systems, ",")
		for r := range *rounds {
			order := slices.Concat(sys[r%len(sys):], sys[:r%len(sys)])
			for _, tr := range strings.Split(*transports, ",") {
				for _, s := range order {
					if s == "replaybus-hijack" && tr != "sse" {
						continue // the WebSocket handler is hijacked by coder/websocket anyway
					}
					res, err := runSingle(*dir, s, tr, *n, *idle)
					if err != nil {
						return fmt.Errorf("%s %s: %w", s, tr, err)
					}
					fmt.Fprintln(out, res)
				}
			}
		}
		return nil
	case "cluster":
		return runCluster(ctx, out, *dir, *natsBin, *total)
	}
	return fmt.Errorf("unknown scenario %q", *scenario)
}

// singleResult is one system's figures for n idle connections.
type singleResult struct {
	system, transport string
	n                 int
	heap, stack, rss  float64 // bytes per connection
	idleCPU           float64 // share of one core
	p50, p99, max     time.Duration
	latencies         int
}

func (r singleResult) String() string {
	return fmt.Sprintf("%-10s %-3s %6d conns: heap %5.1f KB + stacks %5.1f KB, RSS %5.1f KB per connection; idle CPU %.2f%% of a core; active session p50 %v p99 %v max %v (%d events)",
		r.system, r.transport, r.n, r.heap/1024, r.stack/1024, r.rss/1024, 100*r.idleCPU, r.p50, r.p99, r.max, r.latencies)
}

// clientsPerProcess bounds one client process's connections (20,000 open
// files per process on this machine; each connection is one).
const clientsPerProcess = 10_000

// runSingle measures one system and transport with n idle connections
// on one server process.
func runSingle(dir, system, transport string, n int, idle time.Duration) (singleResult, error) {
	res := singleResult{system: system, transport: transport, n: n}
	tag := system + "-" + transport
	srv, err := startChild(dir, tag+"-server", "serve", "-system", system)
	if err != nil {
		return res, err
	}
	defer srv.stop()
	ctl := "http://" + srv.addrs[1]
	if err := post(fmt.Sprintf("%s/create?first=0&n=%d", ctl, n)); err != nil {
		return res, err
	}
	var before stats
	if err := get(ctl+"/stats", &before); err != nil {
		return res, err
	}
	var clients []*child
	defer func() {
		for _, c := range clients {
			c.stop()
		}
	}()
	for first := 0; first < n; first += clientsPerProcess {
		args := []string{"clients", "-system", system, "-transport", transport, "-addrs", srv.addrs[0],
			"-first", fmt.Sprint(first), "-n", fmt.Sprint(min(clientsPerProcess, n-first))}
		if first == 0 {
			args = append(args, "-active")
		}
		c, err := startChild(dir, fmt.Sprintf("%s-clients%d", tag, first/clientsPerProcess), args...)
		if err != nil {
			return res, err
		}
		clients = append(clients, c)
	}
	if err := waitOpen(clients, n+1, 5*time.Minute); err != nil {
		return res, err
	}
	time.Sleep(5 * time.Second) // the last handshakes' garbage and the first writes settle
	var after stats
	if err := get(ctl+"/stats", &after); err != nil {
		return res, err
	}
	res.heap = (float64(after.HeapInuse) - float64(before.HeapInuse)) / float64(n)
	res.stack = (float64(after.StackInuse) - float64(before.StackInuse)) / float64(n)
	res.rss = (float64(after.RSS) - float64(before.RSS)) / float64(n)

	cpu0, t0 := srv.cpu(), time.Now()
	time.Sleep(idle)
	res.idleCPU = (srv.cpu() - cpu0).Seconds() / time.Since(t0).Seconds()

	// The active session: 20 events per second for 15 s among the idle
	// connections, each timed from its publish to its receipt.
	if err := post(ctl + "/publish?session=active&n=300&rate=20"); err != nil {
		return res, err
	}
	time.Sleep(time.Second)
	var st clientStatus
	if err := get("http://"+clients[0].addrs[0]+"/status", &st); err != nil {
		return res, err
	}
	res.latencies = len(st.LatencyUs)
	if len(st.LatencyUs) > 0 {
		res.p50 = time.Duration(st.LatencyUs[len(st.LatencyUs)/2]) * time.Microsecond
		res.p99 = time.Duration(st.LatencyUs[len(st.LatencyUs)*99/100]) * time.Microsecond
		res.max = time.Duration(st.LatencyUs[len(st.LatencyUs)-1]) * time.Microsecond
	}
	if res.latencies < 300 {
		return res, fmt.Errorf("the active session received %d of 300 events", res.latencies)
	}
	return res, nil
}

// waitOpen waits until the client processes hold want open streams.
func waitOpen(clients []*child, want int, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		open := 0
		var errs map[string]int64
		for _, c := range clients {
			var st clientStatus
			if err := get("http://"+c.addrs[0]+"/status", &st); err != nil {
				return err
			}
			open += st.Open
			errs = st.Errors
		}
		if open >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d streams open after %v (errors of the last process: %v)", open, want, bound, errs)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
