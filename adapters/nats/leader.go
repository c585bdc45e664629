package nats

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Leader changes of the stream.
//
// A request to a replicated stream (a publish waiting for its ack, a
// stream info, a message read) is answered by the stream's leader. When the
// leader changes — a step-down, the leader's server lost, a partition —
// what was in flight to the old one goes unanswered: without more, each
// such request would wait out its whole timeout (5 s) after the new leader
// is already serving. JetStream announces every election on
// $JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.<stream>; the node listens, and
// a request that is safe to repeat (a read, a stamped publish, which
// JetStream de-duplicates, a publish no stream received) is repeated as
// soon as a leader is elected, or after its attempt's timeout when the
// advisory cannot be received (no permission for $JS.EVENT).

// leaderSignal is closed and replaced at each leader election of the
// stream. Safe for concurrent use.
type leaderSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

func newLeaderSignal() *leaderSignal { return &leaderSignal{ch: make(chan struct{})} }

// wait returns a channel closed at the next election.
func (l *leaderSignal) wait() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ch
}

// elected wakes every waiter.
func (l *leaderSignal) elected() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.ch)
	l.ch = make(chan struct{})
}

// subscribeLeader listens for the stream's leader elections; an error
// (no permission) leaves the attempts to their timeouts.
func (be *Backend) subscribeLeader() {
	be.leadSub, _ = be.nc.Subscribe("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED."+be.o.stream, func(*nats.Msg) {
		be.leader.elected()
	})
}

// attempt returns a context for one try of a request that may be
// repeated: it ends with ctx, after d, or when the stream elects a leader
// (the request went to the old one), whichever comes first. Call cancel
// when the try is over; retry then reports whether it ended early for a
// reason worth another try (an election, or d) while ctx still runs.
func (be *Backend) attempt(ctx context.Context, d time.Duration) (actx context.Context, cancel context.CancelFunc, retry func() bool) {
	elected := be.leader.wait()
	actx, cancelT := context.WithTimeout(ctx, d)
	stop := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	var early bool // the try's context ended before the try did; set by cancel
	wg.Go(func() {
		select {
		case <-elected:
			cancelT()
		case <-stop:
		case <-actx.Done():
		}
	})
	cancel = func() {
		once.Do(func() {
			early = actx.Err() != nil
			close(stop)
			wg.Wait()
			cancelT()
		})
	}
	return actx, cancel, func() bool { return early && ctx.Err() == nil }
}

// attemptTimeout is how long the n-th try (from 0) of a repeatable request
// waits for its answer before it is repeated anyway: 1 s, 2 s, 4 s, …
// (the whole request stays bounded by its own deadline). Elections cut it
// short; the timeout only covers a node that cannot hear of them.
func attemptTimeout(n int) time.Duration {
	return time.Second << min(n, 4)
}

// unavailable reports whether a JetStream API request was refused because
// the cluster has no leader for it at the moment (no responders, or
// nats-server's JSClusterNotAvailErr, "JetStream system temporarily
// unavailable"): worth another try after an election.
func unavailable(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, nats.ErrNoResponders) || errors.As(err, &api) && api.ErrorCode == 10008
}

// pauseForLeader waits, after a request that no stream received (no
// responders: no leader at the moment), until a leader is elected, 100 ms
// pass, or ctx ends; it reports whether ctx still runs.
func (be *Backend) pauseForLeader(ctx context.Context) bool {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-be.leader.wait():
	case <-t.C:
	case <-ctx.Done():
	}
	return ctx.Err() == nil
}
