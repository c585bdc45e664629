package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replaybus/replaybus/adapters/sse"
	"github.com/replaybus/replaybus/eventbus/frame"
)

// payload is the data of every event the producers publish: the producer,
// its sequence, and when that sequence was first sent (Unix ns).
type payload struct {
	P string `json:"p"`
	S uint64 `json:"s"`
	T int64  `json:"t"`
}

// subscriber is one live SSE subscriber of a session on one node, reading
// through sse.Client, which resumes with Last-Event-ID after every broken
// stream (a node cut off from NATS ends its streams) as any client would.
type subscriber struct {
	name, session, url string

	mu    sync.Mutex
	items []item
	recv  []delivery // per event: when it was read and when it was sent
	err   error

	first    chan struct{} // closed at the first frame (the server's hello)
	lastID   atomic.Uint64
	lastSent atomic.Int64 // the latest send time among the events read
	connects atomic.Int64
}

// delivery is when one event reached a subscriber.
type delivery struct {
	Sent, Recv int64 // Unix ns
}

func newSubscriber(name, session, url string) *subscriber {
	return &subscriber{name: name, session: session, url: url, first: make(chan struct{})}
}

// run reads until ctx ends; it records every event and gap frame.
func (s *subscriber) run(ctx context.Context, client *sse.Client) {
	st := client.Subscribe(ctx, s.url, sse.StreamOptions{Session: s.session})
	defer st.Close()
	var once sync.Once
	for {
		ev, err := st.Next()
		if err != nil {
			if ctx.Err() == nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
			}
			return
		}
		once.Do(func() { close(s.first) })
		s.connects.Store(int64(st.Connects()))
		now := time.Now().UnixNano()
		switch {
		case ev.ID != 0:
			var p payload
			if err := json.Unmarshal(ev.Data, &p); err != nil {
				s.fail(fmt.Errorf("event %d: undecodable data %q: %w", ev.ID, ev.Data, err))
				return
			}
			s.mu.Lock()
			s.items = append(s.items, item{ID: ev.ID, Key: key{p.P, p.S}})
			s.recv = append(s.recv, delivery{Sent: p.T, Recv: now})
			s.mu.Unlock()
			s.lastID.Store(ev.ID)
			if p.T > s.lastSent.Load() {
				s.lastSent.Store(p.T)
			}
		case ev.Type == frame.TypeStateResyncRequired:
			var r frame.ResyncData
			if err := json.Unmarshal(ev.Data, &r); err != nil {
				s.fail(fmt.Errorf("undecodable %s %q: %w", ev.Type, ev.Data, err))
				return
			}
			s.mu.Lock()
			s.items = append(s.items, item{Gap: &gapFrame{Reason: r.Reason, After: r.LastDeliveredID, CompleteFrom: r.CompleteFromID}})
			s.mu.Unlock()
		}
	}
}

func (s *subscriber) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// log returns the subscriber's record for the checker.
func (s *subscriber) log() subscriberLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	return subscriberLog{Name: s.name, Session: s.session, Items: append([]item(nil), s.items...)}
}

// deliveries returns when each event arrived.
func (s *subscriber) deliveries() []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery(nil), s.recv...)
}

func (s *subscriber) error() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// sseClient is the subscribers' client: the stream's own retry and backoff
// (the server's retry: line, Retry-After), as a browser would, no timeout.
func sseClient() *sse.Client {
	return &sse.Client{HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

var errNotCaughtUp = errors.New("subscriber did not catch up")
