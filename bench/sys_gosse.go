package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	sse "github.com/tmaxmax/go-sse"
)

// go-sse: one Joe per session, each with its own FiniteReplayer (go-sse's
// replayer is per provider, so a per-session ring needs a Joe per session),
// auto ids. A live subscriber is a goroutine blocked in Joe.Subscribe (as
// go-sse's own Server.ServeHTTP is) with a MessageWriter whose Send records
// the event: Joe calls Send and Flush synchronously from its one goroutine
// for every subscriber in turn, so this is go-sse's delivery path minus the
// socket write. go-sse has no per-subscriber queue: a Send that blocks stalls
// Joe and every publisher.
//
// A resuming subscriber (W3) is replayed by go-sse's own replayer at its
// fastest: its goroutine calls the session's FiniteReplayer.Replay itself
// (go-sse's documented Replayer API: Send per message, then one Flush, into
// the same MessageWriter go-sse's handler would pass), without the hop to
// Joe's goroutine, serialised with Joe's Put by the lock the Replayer
// contract asks for (one operation at a time); it then subscribes to Joe
// with the last replayed id, so that Joe replays what was published in
// between and the seam stays exact. See gsReplayer.
type gsSession struct {
	joe  *sse.Joe
	rp   *gsReplayer
	last atomic.Uint64 // auto id of the newest message + 1
}

// gsReplayer is a session's FiniteReplayer behind the lock that lets a
// subscriber's goroutine replay while Joe's goroutine puts. It also
// replays nothing to a subscription whose LastEventID is the newest id:
// go-sse v0.11.0's FiniteReplayer replays its whole buffer then (a client
// that is up to date would get every buffered event again), which the
// hand-off to Joe after a replay would otherwise hit.
type gsReplayer struct {
	mu     sync.Mutex
	r      *sse.FiniteReplayer
	newest sse.EventID
}

func (g *gsReplayer) Put(m *sse.Message, topics []string) (*sse.Message, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, err := g.r.Put(m, topics)
	if err == nil {
		g.newest = m.ID
	}
	return m, err
}

func (g *gsReplayer) Replay(sub sse.Subscription) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sub.LastEventID == g.newest {
		return nil
	}
	return g.r.Replay(sub)
}

type gsInstance struct {
	ring     int
	mu       sync.RWMutex
	sessions map[string]*gsSession
	ctx      context.Context
	cancel   context.CancelFunc
	stall    chan struct{}
	wg       sync.WaitGroup
}

func openGoSSE(o Opts) (Instance, error) {
	ctx, cancel := context.WithCancel(context.Background())
	return &gsInstance{ring: o.Ring, sessions: make(map[string]*gsSession), ctx: ctx, cancel: cancel, stall: make(chan struct{})}, nil
}

func (g *gsInstance) session(id string) (*gsSession, error) {
	g.mu.RLock()
	x := g.sessions[id]
	g.mu.RUnlock()
	if x != nil {
		return x, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if x = g.sessions[id]; x == nil {
		ring := max(g.ring, 2) // FiniteReplayer needs ≥ 2
		fr, err := sse.NewFiniteReplayer(ring, true)
		if err != nil {
			return nil, err
		}
		rp := &gsReplayer{r: fr}
		x = &gsSession{joe: &sse.Joe{Replayer: rp}, rp: rp}
		g.sessions[id] = x
	}
	return x, nil
}

var gsTopics = []string{sse.DefaultTopic}

func (g *gsInstance) Publish(session string, data []byte) (uint64, error) {
	x, err := g.session(session)
	if err != nil {
		return 0, err
	}
	return x.publish(data)
}

func (g *gsInstance) Publisher(session string) (func([]byte) (uint64, error), error) {
	x, err := g.session(session)
	if err != nil {
		return nil, err
	}
	return x.publish, nil
}

func (x *gsSession) publish(data []byte) (uint64, error) {
	m := &sse.Message{Type: sse.Type(eventType)}
	m.AppendData(string(data))
	if err := x.joe.Publish(m, gsTopics); err != nil {
		return 0, err
	}
	return x.last.Add(1), nil
}

type gsWriter struct {
	k      *Sink
	stall  <-chan struct{}
	lastID sse.EventID // the id of the last message sent
}

func (w *gsWriter) Send(m *sse.Message) error {
	if w.stall != nil {
		<-w.stall
		return errors.New("closed")
	}
	id, ok := parseDigits(m.ID.String())
	if !ok {
		return fmt.Errorf("go-sse: id %q is not a number", m.ID.String())
	}
	w.lastID = m.ID
	w.k.Event(id + 1)
	return nil
}

func (w *gsWriter) Flush() error { return nil }

func (g *gsInstance) Subscribe(session string, so SubOpts, k *Sink) error {
	x, err := g.session(session)
	if err != nil {
		return err
	}
	w := &gsWriter{k: k}
	if so.Stall {
		w.stall = g.stall
	}
	sub := sse.Subscription{Client: w, Topics: gsTopics}
	// The subscription's own context, as a request's.
	ctx, cancel := context.WithCancel(g.ctx)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer cancel()
		if so.Replay && so.Cursor > 0 {
			// The replay on this goroutine (see gsSession), then Joe from
			// the last id replayed.
			sub.LastEventID = sse.ID(strconv.FormatUint(so.Cursor-1, 10))
			if err := x.rp.Replay(sub); err != nil {
				k.End(err.Error())
				return
			}
			if w.lastID.IsSet() {
				sub.LastEventID = w.lastID
			}
		}
		if err := x.joe.Subscribe(ctx, sub); err != nil && !errors.Is(err, sse.ErrProviderClosed) {
			k.End(err.Error())
		}
	}()
	return nil
}

// Sync publishes probes until every sink saw one: Joe registers a
// subscription asynchronously on its own goroutine.
func (g *gsInstance) Sync(sinks map[string][]*Sink) error {
	probe := []byte(`{"probe":true}`)
	deadline := time.Now().Add(60 * time.Second)
	pending := make(map[string][]*Sink, len(sinks))
	for s, ks := range sinks {
		pending[s] = ks
	}
	for len(pending) > 0 {
		for s, ks := range pending {
			all := true
			for _, k := range ks {
				if !k.seen.Load() {
					all = false
					break
				}
			}
			if all {
				delete(pending, s)
				continue
			}
			if _, err := g.Publish(s, probe); err != nil {
				return err
			}
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("go-sse: %d sessions' subscribers not registered after 60s", len(pending))
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

func (g *gsInstance) LastID(session string) uint64 {
	x, err := g.session(session)
	if err != nil {
		return 0
	}
	return x.last.Load()
}

func (g *gsInstance) Close() {
	close(g.stall)
	g.cancel()
	g.mu.RLock()
	for _, x := range g.sessions {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = x.joe.Shutdown(ctx)
		cancel()
	}
	g.mu.RUnlock()
	g.wg.Wait()
}

// parseDigits parses a decimal id with a digit loop (as the centrifuge
// adapter reads offsets), cheaper than strconv on the delivery path.
func parseDigits(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}
