package eventbus

import (
	"time"

	"github.com/replaybus/replaybus/eventbus/observe"
	"github.com/replaybus/replaybus/scope"
)

// expireLoop frees idle sessions and forgets old tombstones every quarter of
// the session TTL (at most once a minute), until Close.
func (b *Bus) expireLoop() {
	defer close(b.ttl.done)
	every := min(b.cfg.SessionTTL, b.cfg.ClosedRetention) / 4
	if every > time.Minute {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.ttl.stop:
			return
		case <-t.C:
			b.ExpireIdle()
		}
	}
}

// ExpireIdle frees every session that has been idle — no publish, no
// subscriber of its own, no child — for at least the session TTL, and
// forgets closed-session ids older than the TTL. The expiry goroutine calls
// it periodically; call it yourself to force a sweep. It returns how many
// sessions it expired. An expired session's id can be used again (a new
// session), and a resume that needed its events is told with ring_evicted.
func (b *Bus) ExpireIdle() int {
	defer b.idx.flush() // after b.mu is released
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0
	}
	now := b.nowNanos()
	ttl := int64(b.cfg.SessionTTL)
	var idle []*session
	b.mem.tree.Each(func(n *scope.Node[*session]) {
		x := n.Value
		if x.info.nsubs.Load() == 0 && n.NumChildren() == 0 && now-x.active.Load() >= ttl {
			idle = append(idle, x)
		}
	})
	for _, x := range idle {
		b.closeLocked(x, false)
		b.mem.stats.Expired++
		if b.cfg.Diagnostics != nil || b.cfg.Logger != nil {
			b.idx.diagnose(observe.DiagSessionExpired, &Subscription{sess: x}, &record{})
		}
	}
	b.expireKeptLocked(now)
	for id, m := range b.mem.lost {
		if now-m.at >= ttl {
			b.mem.forgotten = max(b.mem.forgotten, m.id)
			delete(b.mem.lost, id)
		}
	}
	for id, at := range b.mem.tombs {
		if now-at >= ttl {
			delete(b.mem.tombs, id)
		}
	}
	return len(idle)
}
