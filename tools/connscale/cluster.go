package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/replaybus/replaybus/tools/internal/natscluster"
)

// The cluster scenario: total SSE connections across three bus-node
// processes over one NATS cluster (three nats-server processes, the stream
// R3 on file storage), then one node SIGKILLed with its third of the
// clients on it.
//
// The open-file limit of 20,000 per process shapes it: the two survivors
// could not take the dead node's clients (25,000 each), so a fourth node,
// a spare with no clients, takes the reconnects, as a deployment's
// replacement capacity would. Every session gets one event per round
// (published through a pipeline on another node): round 0 before the kill,
// round 1 right after it (while the dead node's clients reconnect), round
// 2 once they have. Each client checks that it reads rounds 0, 1, 2 once
// each, in order; one that reconnected resumes with Last-Event-ID and must
// get round 1 from the spare's replay buffer whether it was published
// before or after it came back.

func runCluster(ctx context.Context, out io.Writer, dir, natsBin string, total int) error {
	logf := func(format string, args ...any) {
		fmt.Fprintf(out, time.Now().Format("15:04:05 ")+format+"\n", args...)
	}
	if natsBin == "" {
		var err error
		if natsBin, err = natscluster.Build(ctx, dir); err != nil {
			return err
		}
	}
	cl, err := natscluster.Start(ctx, natscluster.Config{Bin: natsBin, Dir: dir})
	if err != nil {
		return err
	}
	defer cl.Close()
	logf("3 nats-server processes: %s", cl.ClientURLs())
	var nodes []*child
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	for i := range 4 {
		n, err := startChild(dir, fmt.Sprintf("node%d", i), "serve", "-system", "replaybus", "-nats", cl.ClientURLs())
		if err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.addrs[0]
	}
	logf("4 bus nodes (3 serving, 1 spare): %s", strings.Join(addrs, " "))

	t := time.Now()
	if err := post(fmt.Sprintf("http://%s/create?first=0&n=%d", nodes[1].addrs[1], total)); err != nil {
		return err
	}
	logf("%d sessions created through node1 in %v", total, time.Since(t).Round(time.Millisecond))
	var clients []*child
	defer func() {
		for _, c := range clients {
			c.stop()
		}
	}()
	for first := 0; first < total; first += clientsPerProcess {
		c, err := startChild(dir, fmt.Sprintf("clients%d", first/clientsPerProcess), "clients", "-transport", "sse",
			"-addrs", strings.Join(addrs, ","), "-primaries", "3", "-first", fmt.Sprint(first), "-n", fmt.Sprint(min(clientsPerProcess, total-first)))
		if err != nil {
			return err
		}
		clients = append(clients, c)
	}
	start := time.Now()
	if err := waitOpen(clients, total, 15*time.Minute); err != nil {
		return err
	}
	logf("%d SSE streams open (%v to connect), %d per serving node", total, time.Since(start).Round(time.Second), total/3)
	for i, n := range nodes {
		var st stats
		if err := get("http://"+n.addrs[1]+"/stats", &st); err != nil {
			return err
		}
		logf("node%d: RSS %d MB, heap %d MB, stacks %d MB, %d goroutines", i, st.RSS>>20, st.HeapInuse>>20, st.StackInuse>>20, st.Goroutines)
	}

	round := func(r int, via *child) error {
		t := time.Now()
		if err := post(fmt.Sprintf("http://%s/round?r=%d&first=0&n=%d", via.addrs[1], r, total)); err != nil {
			return err
		}
		logf("round %d: %d events published through %s in %v", r, total, via.name, time.Since(t).Round(time.Millisecond))
		return nil
	}
	waitRound := func(r int, bound time.Duration) (clientStatus, error) {
		deadline := time.Now().Add(bound)
		for {
			sum := sumStatus(clients, 0)
			if len(sum.Rounds) > r && sum.Rounds[r] == total {
				return sum, nil
			}
			if time.Now().After(deadline) {
				got := 0
				if len(sum.Rounds) > r {
					got = sum.Rounds[r]
				}
				return sum, fmt.Errorf("round %d reached %d of %d clients in %v (open %d; errors %v)", r, got, total, bound, sum.Open, sum.Errors)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	if err := round(0, nodes[1]); err != nil {
		return err
	}
	if _, err := waitRound(0, 2*time.Minute); err != nil {
		return err
	}
	logf("round 0 read by every client")

	t0 := time.Now()
	nodes[0].kill()
	logf("node0 SIGKILLed with its %d clients", total/3)
	if err := round(1, nodes[1]); err != nil {
		return err
	}
	if _, err := waitRound(1, 3*time.Minute); err != nil {
		return err
	}
	sum := sumStatus(clients, t0.UnixNano())
	logf("round 1 read by every client, %v after the kill", time.Since(t0).Round(time.Millisecond))
	if err := round(2, nodes[2]); err != nil {
		return err
	}
	final, err := waitRound(2, 2*time.Minute)
	if err != nil {
		return err
	}
	pct := func(xs []int64, p int) int64 {
		if len(xs) == 0 {
			return 0
		}
		return xs[min(len(xs)-1, len(xs)*p/100)]
	}
	fmt.Fprintf(out, "cluster: %d SSE connections on 3 nodes; node0 killed: %d clients dropped, %d resumed on the spare: after the kill p50 %d ms, p99 %d ms, max %d ms\n",
		total, sum.Dropped, sum.Resumed, pct(sum.ResumeMs, 50), pct(sum.ResumeMs, 99), pct(sum.ResumeMs, 100))
	fmt.Fprintf(out, "cluster: rounds 0-2 read by %v clients; lost %d, duplicated %d, gap frames %d; open streams %d\n",
		final.Rounds[:3], final.Lost, final.Dup, final.Gaps, final.Open)
	if final.Lost != 0 || final.Dup != 0 || sum.Resumed != sum.Dropped || sum.Dropped == 0 {
		return fmt.Errorf("FAILED: lost %d, duplicated %d, resumed %d of %d", final.Lost, final.Dup, sum.Resumed, sum.Dropped)
	}
	return nil
}

// sumStatus adds up the client processes' status (resume times since
// since, Unix ns; 0: none).
func sumStatus(clients []*child, since int64) clientStatus {
	var sum clientStatus
	sum.Errors = map[string]int64{}
	for _, c := range clients {
		var st clientStatus
		if err := get(fmt.Sprintf("http://%s/status?since=%d", c.addrs[0], since), &st); err != nil {
			sum.Errors[err.Error()]++
			continue
		}
		sum.Conns += st.Conns
		sum.Open += st.Open
		sum.Lost += st.Lost
		sum.Dup += st.Dup
		sum.Gaps += st.Gaps
		sum.Dropped += st.Dropped
		sum.Resumed += st.Resumed
		sum.ResumeMs = append(sum.ResumeMs, st.ResumeMs...)
		for r, k := range st.Rounds {
			for len(sum.Rounds) <= r {
				sum.Rounds = append(sum.Rounds, 0)
			}
			sum.Rounds[r] += k
		}
		for k, v := range st.Errors {
			sum.Errors[k] += v
		}
	}
	slices.Sort(sum.ResumeMs)
	return sum
}
