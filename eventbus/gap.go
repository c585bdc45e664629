package eventbus

// Gaps a backend's feed notices while subscribers are live (issue: a lagging
// NATS node hid a gap from a subscriber that was already live). A resume
// after such a gap is told by the replay buffer's eviction mark
// (ring_evicted); a subscriber that is live when the gap happens is told by
// a state_resync_required{feed_gap} frame queued at that point among its
// live events, never counted against its live limits.

// announceGapLocked queues a feed_gap frame for every live subscriber whose
// scope covers x (the lists fanOutLocked walks): events of x with ids up to
// upTo were lost before this node received them. A subscriber whose queue
// already ends with a feed_gap frame has that frame extended instead, so a
// gap in many sessions at once is one frame per subscriber. b.mu must be
// held exclusively (the backend's feed).
func (b *Bus) announceGapLocked(x *session, upTo uint64) {
	now := b.nowNanos()
	push := func(l subList, skip *session) {
		for _, s := range l {
			if skip != nil && s.sess == skip {
				continue
			}
			s.mu.Lock()
			if !s.ended && s.q.PushGap(s.sess.id, upTo, now) {
				s.wakeLocked()
				b.cnt.resyncs.Add(1)
			}
			s.mu.Unlock()
		}
	}
	push(x.own, nil)
	p := x.parent()
	for a := p; a != nil; a = a.parent() {
		push(a.desc, nil)
	}
	push(x.childSubtree, nil)
	if p != nil {
		push(p.childSubtree, x)
	}
	push(b.all.list, nil)
}
