package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/replaybus/replaybus/tools/internal/natscluster"
)

// stream is the JetStream stream of the example server (adapters/nats's
// default) and prefix its subject prefix.
const (
	stream = "REPLAYBUS"
	prefix = "replaybus."
)

// Config is one harness run.
type Config struct {
	// Seed drives every random choice (fault order, pauses, partition
	// lengths, which node a producer starts on); the same seed replays the
	// same schedule.
	Seed uint64
	// Kills, StepDowns and Partitions are the faults to inject: SIGKILL
	// of the stream's leader, a graceful step-down, the leader cut off
	// from the other servers.
	Kills, StepDowns, Partitions int
	// Budget bounds the fault phase; faults not begun by then are
	// skipped (and reported).
	Budget time.Duration
	// Producers (one session each), Window (requests in flight per
	// producer) and Subscribers (per session per node).
	Producers, Window, Subscribers int
	// Sync is the NATS servers' sync_interval ("" for their default) and
	// Storage the stream's ("file" or "memory").
	Sync, Storage string
	// Dir holds the servers' data and every process's log.
	Dir string
	// NATSServer and AgentServer are the binaries.
	NATSServer, AgentServer string
	// Log receives progress lines.
	Log io.Writer
}

// faultRecord is one injected fault.
type faultRecord struct {
	Kind      string // kill, stepdown, partition
	Server    string // the leader it hit
	At        time.Time
	NewLeader string
	Election  time.Duration // until the API named another leader
	Err       string
}

// Report is a run's outcome.
type Report struct {
	Seed     uint64
	Faults   []faultRecord
	Skipped  int
	Verdict  verdict
	Duration time.Duration
	// Per fault kind: how long after the fault every producer had an
	// ack of a request sent after it, and every subscriber an event
	// sent after it.
	PublishResume, ReadResume map[string][]time.Duration
	// Delivery lag (first send → receipt) over every delivery.
	LagP50, LagP99, LagMax time.Duration
	ProducerFailures       map[string]int
	SubscriberErrors       []string
	Problems               []string // setup or teardown failures
}

// Failed lists why the run failed; empty when it proved everything.
func (r *Report) Failed() []string {
	return append(append([]string(nil), r.Problems...), r.Verdict.Failed...)
}

// Run runs the harness once.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	start := time.Now()
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	logf := func(format string, args ...any) {
		fmt.Fprintf(cfg.Log, "%7.1fs  "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
	}
	rep := &Report{Seed: cfg.Seed, PublishResume: map[string][]time.Duration{}, ReadResume: map[string][]time.Duration{}}

	cl, err := natscluster.Start(ctx, natscluster.Config{Bin: cfg.NATSServer, Dir: cfg.Dir, Size: 3, Sync: cfg.Sync})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	admin := cl.NewAdmin()
	defer admin.Close()
	logf("3 nats-server processes up (sync %q): %s", cfg.Sync, cl.ClientURLs())

	var nodes []*busNode
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	for _, name := range []string{"nodeA", "nodeB"} {
		var n *busNode
		// A free port may be taken by another process before the node
		// listens on it: a node that exits at start is started again.
		for range 3 {
			if n, err = startNode(ctx, cfg.AgentServer, cfg.Dir, name, cl.ClientURLs(), 3, cfg.Storage); !errors.Is(err, errNodeExited) {
				break
			}
		}
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	hctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = admin.WaitStreamHealthy(hctx, stream, 3)
	cancel()
	if err != nil {
		return nil, err
	}
	logf("2 bus nodes up: %s, %s; stream %s R3 %s storage", nodes[0].addr, nodes[1].addr, stream, cfg.Storage)

	sessions := make([]string, cfg.Producers)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("s%d", i)
		if err := createSession(nodes[0].addr, sessions[i]); err != nil {
			return nil, err
		}
	}
	for _, n := range nodes {
		if err := waitSessions(ctx, n.addr, sessions); err != nil {
			return nil, err
		}
	}

	var subWG sync.WaitGroup
	defer subWG.Wait() // after stopSubs, below
	subCtx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	client := sseClient()
	defer client.HTTPClient.CloseIdleConnections()
	defer httpc.CloseIdleConnections()
	var subs []*subscriber
	for _, s := range sessions {
		for _, n := range nodes {
			for k := range cfg.Subscribers {
				sub := newSubscriber(fmt.Sprintf("%s/%s/%d", n.name, s, k), s, "http://"+n.addr+"/session/"+s+"/events")
				subs = append(subs, sub)
				subWG.Go(func() { sub.run(subCtx, client) })
			}
		}
	}
	for _, s := range subs {
		select {
		case <-s.first:
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("subscriber %s got no first frame in 30s: %v", s.name, s.error())
		}
	}
	logf("%d live subscribers (%d per session per node)", len(subs), cfg.Subscribers)

	var partitioned atomic.Bool
	addrs := []string{nodes[0].addr, nodes[1].addr}
	var prods []*producer
	var prodWG sync.WaitGroup
	defer prodWG.Wait() // after cancelProds, below
	prodCtx, cancelProds := context.WithCancel(ctx)
	defer cancelProds()
	stop := make(chan struct{})
	for i, s := range sessions {
		p := newProducer(fmt.Sprintf("p%d", i), s, addrs, cfg.Window, rng.IntN(2), partitioned.Load)
		prods = append(prods, p)
		prodWG.Go(func() { p.run(prodCtx, stop) })
	}
	logf("%d pipelined idempotent producers (window %d), seed %d", len(prods), cfg.Window, cfg.Seed)
	time.Sleep(2 * time.Second)

	settled := func(since time.Time) bool {
		t0 := since.UnixNano()
		for _, p := range prods {
			if p.lastSent.Load() <= t0 {
				return false
			}
		}
		for _, s := range subs {
			if s.lastSent.Load() <= t0 {
				return false
			}
		}
		return true
	}
	rep.Faults, rep.Skipped = injectFaults(ctx, cfg, rng, cl, admin, &partitioned, settled, logf)

	time.Sleep(2 * time.Second)
	close(stop)
	drained := make(chan struct{})
	go func() { prodWG.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(60 * time.Second):
		rep.Problems = append(rep.Problems, "producers did not drain within 60s")
		cancelProds()
		<-drained
	}
	var acks []ack
	var ackTimes [][]ackTime
	rep.ProducerFailures = map[string]int{}
	for _, p := range prods {
		a, t := p.snapshot()
		acks = append(acks, a...)
		ackTimes = append(ackTimes, t)
		p.mu.Lock()
		for r, n := range p.errs {
			rep.ProducerFailures[r] += n
		}
		if p.fatal != nil {
			rep.Problems = append(rep.Problems, p.fatal.Error())
		}
		p.mu.Unlock()
	}
	logf("producers stopped: %d acknowledged", len(acks))

	hctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	err = admin.WaitStreamHealthy(hctx, stream, 3)
	cancel()
	if err != nil {
		rep.Problems = append(rep.Problems, "cluster not healthy at the end: "+err.Error())
	}
	st, err := readStream(ctx, cl.ClientURLs())
	if err != nil {
		return nil, fmt.Errorf("reading the stream: %w", err)
	}
	last := map[string]uint64{}
	for _, e := range st {
		last[e.Session] = e.ID
	}
	caught := time.Now().Add(90 * time.Second)
	for _, s := range subs {
		for s.lastID.Load() < last[s.session] && time.Now().Before(caught) && s.error() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		if s.lastID.Load() < last[s.session] {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %v: at id %d of %d (%v)", s.name, errNotCaughtUp, s.lastID.Load(), last[s.session], s.error()))
		}
	}
	stopSubs()
	subWG.Wait()
	var logs []subscriberLog
	var lags []int64
	for _, s := range subs {
		logs = append(logs, s.log())
		if err := s.error(); err != nil {
			rep.SubscriberErrors = append(rep.SubscriberErrors, s.name+": "+err.Error())
		}
		for _, d := range s.deliveries() {
			lags = append(lags, d.Recv-d.Sent)
		}
	}
	rep.Verdict = check(st, acks, logs)
	rep.LagP50 = time.Duration(percentile(lags, 50))
	rep.LagP99 = time.Duration(percentile(lags, 99))
	rep.LagMax = time.Duration(percentile(lags, 100))
	for _, f := range rep.Faults {
		t0 := f.At.UnixNano()
		var pub time.Duration
		for _, ts := range ackTimes {
			pub = max(pub, firstAfter(t0, ts, func(a ackTime) (int64, int64) { return a.Sent, a.At }))
		}
		var read time.Duration
		for _, s := range subs {
			read = max(read, firstAfter(t0, s.deliveries(), func(d delivery) (int64, int64) { return d.Sent, d.Recv }))
		}
		rep.PublishResume[f.Kind] = append(rep.PublishResume[f.Kind], pub)
		rep.ReadResume[f.Kind] = append(rep.ReadResume[f.Kind], read)
		slowest := ""
		for _, s := range subs {
			if firstAfter(t0, s.deliveries(), func(d delivery) (int64, int64) { return d.Sent, d.Recv }) == read {
				slowest = s.name
			}
		}
		logf("%-9s at %s on %s: publishing resumed after %v, reading after %v (last: %s)",
			f.Kind, f.At.Format("15:04:05.000"), f.Server, dur(pub), dur(read), slowest)
	}
	for _, n := range nodes {
		if !n.alive() {
			rep.Problems = append(rep.Problems, n.name+" exited during the run (see its log)")
		}
	}
	rep.Duration = time.Since(start)
	return rep, nil
}

// firstAfter returns how long after t0 the first record sent after t0 was
// done (acknowledged or received); noResume when none was.
func firstAfter[T any](t0 int64, xs []T, at func(T) (sent, done int64)) time.Duration {
	best := int64(-1)
	for _, x := range xs {
		sent, done := at(x)
		if sent > t0 && (best < 0 || done < best) {
			best = done
		}
	}
	if best < 0 {
		return noResume
	}
	return time.Duration(best - t0)
}

// noResume stands for "never resumed" among resume times.
const noResume = time.Duration(1<<63 - 1)

// createSession creates session id through the node at addr.
func createSession(addr, id string) error {
	resp, err := httpc.Post("http://"+addr+"/sessions", "application/json", strings.NewReader(`{"id":"`+id+`"}`))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("creating session %s: %s %s", id, resp.Status, b)
	}
	return nil
}

// waitSessions waits until the node at addr lists every session.
func waitSessions(ctx context.Context, addr string, ids []string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := httpc.Get("http://" + addr + "/sessions")
		if err == nil {
			var list []struct {
				ID string `json:"id"`
			}
			err = json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
			have := map[string]bool{}
			for _, s := range list {
				have[s.ID] = true
			}
			all := err == nil
			for _, id := range ids {
				all = all && have[id]
			}
			if all {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s does not list the sessions after 30s (%v)", addr, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readStream reads every message the stream holds, through a consumer of
// its own, and returns the producers' events in id order. The payload is
// the tail of each message: adapters/nats stores an event as a small
// binary envelope followed by the JSON data as published; producer
// records (subjects <prefix>$P.…) are skipped.
func readStream(ctx context.Context, urls string) ([]stored, error) {
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	s, err := js.Stream(rctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(rctx)
	if err != nil {
		return nil, err
	}
	lastSeq := info.State.LastSeq
	cons, err := s.OrderedConsumer(rctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	var out []stored
	if info.State.Msgs == 0 {
		return out, nil
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, err
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(rctx))
		if err != nil {
			return nil, err
		}
		meta, err := m.Metadata()
		if err != nil {
			return nil, err
		}
		subj := m.Subject()
		if session, ok := strings.CutPrefix(subj, prefix); ok && !strings.HasPrefix(session, "$P.") {
			data := m.Data()
			i := bytes.LastIndex(data, []byte(`{"p":"`))
			var p payload
			switch {
			case i >= 0 && json.Unmarshal(data[i:], &p) == nil:
				out = append(out, stored{ID: meta.Sequence.Stream, Session: session, Key: key{p.P, p.S}})
			case !bytes.Contains(data, []byte("_replaybus.session_created")): // the bus's record of CreateSession
				return nil, fmt.Errorf("message %d on %s: no producer payload in %q", meta.Sequence.Stream, subj, data)
			}
		}
		if meta.Sequence.Stream >= lastSeq {
			return out, nil
		}
	}
}
