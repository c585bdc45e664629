package main

import (
	"sync"
)

// naive is the baseline the issue defines: one mutex-guarded ring per
// session and one buffered channel (capacity 1000) per subscriber, filled
// with non-blocking sends under the session lock (a full channel drops the
// event for that subscriber, silently).
type naiveEvent struct {
	id   uint64
	sess string
	data []byte
}

// chan is the lossless channel baseline beside the lossy naive one: the
// same ring and channels, but a full channel blocks the publisher (under
// the session lock, as go-sse's Joe blocks on a slow Send) instead of
// dropping, so nothing is ever lost and a stalled reader stalls publishing.
func openChan(o Opts) (Instance, error) {
	return &naiveInstance{ring: o.Ring, sessions: make(map[string]*naiveSession), done: make(chan struct{}), block: true}, nil
}

type naiveSession struct {
	id   string
	mu   sync.Mutex
	seq  uint64
	ring []naiveEvent
	head int
	n    int
	subs []chan naiveEvent
}

type naiveInstance struct {
	ring      int
	mu        sync.RWMutex
	sessions  map[string]*naiveSession
	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	block     bool // chan: a full channel blocks instead of dropping
}

const naiveChanCap = 1000

func openNaive(o Opts) (Instance, error) {
	return &naiveInstance{ring: o.Ring, sessions: make(map[string]*naiveSession), done: make(chan struct{})}, nil
}

func (b *naiveInstance) session(id string) *naiveSession {
	b.mu.RLock()
	x := b.sessions[id]
	b.mu.RUnlock()
	if x != nil {
		return x
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if x = b.sessions[id]; x == nil {
		x = &naiveSession{id: id}
		b.sessions[id] = x
	}
	return x
}

func (b *naiveInstance) Publish(session string, data []byte) (uint64, error) {
	return b.publish(b.session(session), data)
}

func (b *naiveInstance) Publisher(session string) (func([]byte) (uint64, error), error) {
	x := b.session(session)
	return func(data []byte) (uint64, error) { return b.publish(x, data) }, nil
}

func (b *naiveInstance) publish(x *naiveSession, data []byte) (uint64, error) {
	x.mu.Lock()
	x.seq++
	ev := naiveEvent{id: x.seq, sess: x.id, data: data}
	if x.n < b.ring {
		x.ring = append(x.ring, ev)
		x.n++
	} else {
		x.ring[x.head] = ev
		x.head = (x.head + 1) % b.ring
	}
	for _, ch := range x.subs {
		if b.block {
			select {
			case ch <- ev:
			case <-b.done:
			}
			continue
		}
		select {
		case ch <- ev:
		default: // full: dropped, nobody is told
		}
	}
	x.mu.Unlock()
	return ev.id, nil
}

func (b *naiveInstance) Subscribe(session string, so SubOpts, k *Sink) error {
	x := b.session(session)
	ch := make(chan naiveEvent, naiveChanCap)
	var snap []naiveEvent
	x.mu.Lock()
	if so.Replay {
		for i := 0; i < x.n; i++ {
			if ev := x.ring[(x.head+i)%len(x.ring)]; ev.id > so.Cursor {
				snap = append(snap, ev)
			}
		}
	}
	x.subs = append(x.subs, ch)
	x.mu.Unlock()
	if so.Stall {
		return nil
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for _, ev := range snap {
			k.EventIn(ev.sess, ev.id)
		}
		for {
			select {
			case ev := <-ch:
				k.EventIn(ev.sess, ev.id)
			case <-b.done:
				return
			}
		}
	}()
	return nil
}

func (b *naiveInstance) Sync(map[string][]*Sink) error { return nil }

func (b *naiveInstance) LastID(session string) uint64 {
	x := b.session(session)
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.seq
}

func (b *naiveInstance) Close() {
	b.closeOnce.Do(func() { close(b.done) })
	b.wg.Wait()
}
