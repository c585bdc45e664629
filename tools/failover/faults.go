package main

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/replaybus/replaybus/tools/internal/natscluster"
)

// The faults, each aimed at the stream's leader as the JetStream API names
// it at that moment (never a server picked by guess):
//
//   - kill: SIGKILL of the leader's process, then, once another server
//     leads, the process started again on its data (what a crash does);
//   - stepdown: $JS.API.STREAM.LEADER.STEPDOWN, a graceful hand-over;
//   - partition: every route of the leader cut (its clients stay
//     connected), held until the other two elected a leader and a few
//     seconds more, then healed: the old leader, in a minority, must not
//     acknowledge anything meanwhile.
//
// Before each fault the system must be whole again: the stream has a
// leader, both other replicas are current, every server's /healthz answers
// 200, and every producer and every subscriber has seen an event sent after
// the previous fault (so that each fault's resume times are its own, not
// the tail of the one before).

const (
	kindKill      = "kill"
	kindStepDown  = "stepdown"
	kindPartition = "partition"
)

// injectFaults runs the seeded schedule and returns what it did and how
// many faults the budget left out.
func injectFaults(ctx context.Context, cfg Config, rng *rand.Rand, cl *natscluster.Cluster, admin *natscluster.Admin,
	partitioned *atomic.Bool, settled func(since time.Time) bool, logf func(string, ...any)) ([]faultRecord, int) {
	var kinds []string
	for range cfg.Kills {
		kinds = append(kinds, kindKill)
	}
	for range cfg.StepDowns {
		kinds = append(kinds, kindStepDown)
	}
	for range cfg.Partitions {
		kinds = append(kinds, kindPartition)
	}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	// Every random draw is made up front, so that the schedule does not
	// depend on how long anything took.
	pauses := make([]time.Duration, len(kinds))
	holds := make([]time.Duration, len(kinds))
	for i := range kinds {
		pauses[i] = time.Duration(100+rng.IntN(500)) * time.Millisecond
		holds[i] = time.Duration(500+rng.IntN(1500)) * time.Millisecond
	}
	deadline := time.Now().Add(cfg.Budget)
	var done []faultRecord
	for i, kind := range kinds {
		if ctx.Err() != nil || time.Now().After(deadline) {
			logf("budget used: %d faults left out", len(kinds)-i)
			return done, len(kinds) - i
		}
		if len(done) > 0 {
			since := done[len(done)-1].At
			for deadline := time.Now().Add(60 * time.Second); !settled(since) && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
		}
		hctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		err := admin.WaitStreamHealthy(hctx, stream, 3)
		cancel()
		if err != nil {
			done = append(done, faultRecord{Kind: kind, At: time.Now(), Err: "cluster not whole before the fault: " + err.Error()})
			logf("%s #%d: %v", kind, i+1, err)
			continue
		}
		time.Sleep(pauses[i])
		leader, err := admin.Leader(ctx, stream)
		if err != nil {
			done = append(done, faultRecord{Kind: kind, At: time.Now(), Err: "finding the leader: " + err.Error()})
			continue
		}
		f := faultRecord{Kind: kind, Server: leader.Name}
		switch kind {
		case kindKill:
			f.At = time.Now()
			leader.Kill()
			f.NewLeader, f.Election = newLeader(ctx, admin, leader, f.At, 60*time.Second)
			time.Sleep(holds[i] / 4) // down a little longer than the election
			if err := leader.Start(); err != nil {
				f.Err = "restarting: " + err.Error()
			}
		case kindStepDown:
			f.At = time.Now()
			if err := admin.StepDown(ctx, stream); err != nil {
				f.Err = err.Error()
				break
			}
			f.NewLeader, f.Election = newLeader(ctx, admin, leader, f.At, 30*time.Second)
		case kindPartition:
			f.At = time.Now()
			cl.Isolate(leader.Index)
			partitioned.Store(true)
			f.NewLeader, f.Election = newLeader(ctx, admin, leader, f.At, 60*time.Second)
			time.Sleep(holds[i])
			cl.Heal(leader.Index)
			partitioned.Store(false)
		}
		if f.NewLeader == "" && f.Err == "" {
			f.Err = "no other leader elected"
		}
		logf("%-9s #%-2d leader %s -> %s in %v %s", kind, i+1, f.Server, f.NewLeader, f.Election.Round(time.Millisecond), f.Err)
		done = append(done, f)
	}
	return done, 0
}

// newLeader waits until the API, asked of the servers other than old,
// names another leader; it returns it and how long after t0 it was first
// seen ("" when none within bound).
func newLeader(ctx context.Context, admin *natscluster.Admin, old *natscluster.Server, t0 time.Time, bound time.Duration) (string, time.Duration) {
	deadline := t0.Add(bound)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		l, err := admin.Leader(ctx, stream, old.Index)
		if err == nil && l != old {
			return l.Name, time.Since(t0)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "", 0
}
