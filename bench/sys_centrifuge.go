package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/centrifugal/centrifuge"
	"github.com/prometheus/client_golang/prometheus"
)

// centrifuge: one Node with its MemoryBroker; a session is a channel, every
// publish goes with WithHistory(ring, 1h) (the broker's in-memory history
// stream), and a subscriber is a Client on an in-process unidirectional JSON
// transport, connected with Client.Connect and subscribed server-side
// (ConnectReply.Subscriptions, EnableRecovery) the way centrifuge's own
// unidirectional SSE/HTTP-stream handlers do. Publish goes Node.Publish →
// MemoryBroker (history) → Hub broadcast (one encoding per protocol shared by
// every subscriber) → each Client's writer queue → its writer goroutine →
// Transport.Write, which parses the offset out of the push and records it.
// That is centrifuge's hub path minus the socket write. A resume (W3) reads
// its replay with Node.History first, centrifuge's history API at its
// fastest, and then connects recovering from the last offset
// (cfTransport.history).
type cfInstance struct {
	node *centrifuge.Node
	ring int

	mu      sync.Mutex
	last    map[string]*cfChannel
	clients []func() error
	trans   []*cfTransport
	ctx     context.Context
	cancel  context.CancelFunc
	stall   chan struct{}
}

type cfChannelKey struct{}

func openCentrifuge(o Opts) (Instance, error) {
	cfg := centrifuge.Config{
		LogLevel: centrifuge.LogLevelNone,
		Metrics:  centrifuge.MetricsConfig{RegistererGatherer: prometheus.NewRegistry()},
	}
	if o.Lossless {
		cfg.ClientQueueMaxSize = 1 << 30
	}
	node, err := centrifuge.New(cfg)
	if err != nil {
		return nil, err
	}
	broker, err := centrifuge.NewMemoryBroker(node, centrifuge.MemoryBrokerConfig{})
	if err != nil {
		return nil, err
	}
	node.SetBroker(broker)
	node.OnConnecting(func(ctx context.Context, e centrifuge.ConnectEvent) (centrifuge.ConnectReply, error) {
		ch, _ := ctx.Value(cfChannelKey{}).(string)
		return centrifuge.ConnectReply{
			Credentials:   &centrifuge.Credentials{UserID: "bench"},
			Subscriptions: map[string]centrifuge.SubscribeOptions{ch: {EnableRecovery: true}},
		}, nil
	})
	node.OnConnect(func(*centrifuge.Client) {})
	if err := node.Run(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &cfInstance{node: node, ring: max(o.Ring, 1), last: make(map[string]*cfChannel),
		ctx: ctx, cancel: cancel, stall: make(chan struct{})}, nil
}

// cfChannel is the harness's bookkeeping for one channel: the newest
// offset and the stream's epoch, kept with atomics so that it costs the
// publish path next to nothing.
type cfChannel struct {
	name  string
	last  atomic.Uint64
	epoch atomic.Pointer[string]
}

func (c *cfInstance) channel(session string) *cfChannel {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.last[session]
	if ch == nil {
		ch = &cfChannel{name: session}
		c.last[session] = ch
	}
	return ch
}

func (c *cfInstance) Publish(session string, data []byte) (uint64, error) {
	return c.publish(c.channel(session), data)
}

func (c *cfInstance) Publisher(session string) (func([]byte) (uint64, error), error) {
	ch := c.channel(session)
	return func(data []byte) (uint64, error) { return c.publish(ch, data) }, nil
}

func (c *cfInstance) publish(ch *cfChannel, data []byte) (uint64, error) {
	res, err := c.node.Publish(ch.name, data, centrifuge.WithHistory(c.ring, time.Hour))
	if err != nil {
		return 0, err
	}
	if ch.epoch.Load() == nil {
		e := res.Epoch
		ch.epoch.CompareAndSwap(nil, &e)
	}
	for {
		old := ch.last.Load()
		if res.Offset <= old || ch.last.CompareAndSwap(old, res.Offset) {
			break
		}
	}
	return res.Offset, nil
}

type cfTransport struct {
	k     *Sink
	stall <-chan struct{}
	mu    sync.Mutex
	dead  bool // set by the instance's Close: no Sink call afterwards
}

func (t *cfTransport) Name() string                      { return "bench" }
func (t *cfTransport) AcceptProtocol() string            { return "h1" }
func (t *cfTransport) Protocol() centrifuge.ProtocolType { return centrifuge.ProtocolTypeJSON }
func (t *cfTransport) ProtocolVersion() centrifuge.ProtocolVersion {
	return centrifuge.ProtocolVersion2
}
func (t *cfTransport) Unidirectional() bool      { return true }
func (t *cfTransport) Emulation() bool           { return false }
func (t *cfTransport) DisabledPushFlags() uint64 { return 0 }
func (t *cfTransport) PingPongConfig() centrifuge.PingPongConfig {
	return centrifuge.PingPongConfig{PingInterval: -1, PongTimeout: -1}
}

func (t *cfTransport) Write(b []byte) error { return t.WriteMany(b) }

var (
	cfOffsetKey    = []byte(`"offset":`)
	cfChannelField = []byte(`"channel":"`)
)

func (t *cfTransport) WriteMany(msgs ...[]byte) error {
	if t.stall != nil {
		<-t.stall
		return errors.New("closed")
	}
	at := now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dead {
		return errors.New("closed")
	}
	for _, b := range msgs {
		if bytes.HasPrefix(b, []byte(`{"connect"`)) {
			t.connect(b, at)
			continue
		}
		if t.k.sess != "" {
			// Session identity: the push names its channel.
			if j := bytes.Index(b, cfChannelField); j >= 0 {
				rest := b[j+len(cfChannelField):]
				if e := bytes.IndexByte(rest, '"'); e < 0 || string(rest[:e]) != t.k.sess {
					t.k.foreign++
					continue
				}
			}
		}
		i := bytes.Index(b, cfOffsetKey)
		if i < 0 {
			continue // a push without a publication
		}
		var off uint64
		for i += len(cfOffsetKey); i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			off = off*10 + uint64(b[i]-'0')
		}
		t.k.Event(off)
	}
	return nil
}

// connect handles the connect push, which carries the recovered
// publications; they count as arrived when the push reached the transport.
func (t *cfTransport) connect(b []byte, at int64) {
	var push struct {
		Connect struct {
			Subs map[string]struct {
				Publications []struct {
					Offset uint64 `json:"offset"`
				} `json:"publications"`
			} `json:"subs"`
		} `json:"connect"`
	}
	if err := json.Unmarshal(b, &push); err != nil {
		return
	}
	t.k.stamp = at
	for _, s := range push.Connect.Subs {
		for _, p := range s.Publications {
			t.k.Event(p.Offset)
		}
	}
	t.k.stamp = 0
}

// history records the channel's publications after offset from the
// node's history (the replay of a resume) and returns the last offset
// recorded (offset when none).
func (t *cfTransport) history(node *centrifuge.Node, ch, epoch string, offset uint64) uint64 {
	res, err := node.History(ch, centrifuge.WithSince(&centrifuge.StreamPosition{Offset: offset, Epoch: epoch}),
		centrifuge.WithLimit(centrifuge.NoLimit))
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dead {
		return offset
	}
	if err != nil {
		t.k.End("history: " + err.Error())
		return offset
	}
	for _, p := range res.Publications {
		t.k.Event(p.Offset)
		offset = p.Offset
	}
	return offset
}

func (t *cfTransport) Close(d centrifuge.Disconnect) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.dead {
		t.k.End("disconnect: " + d.Reason)
	}
	return nil
}

func (c *cfInstance) Subscribe(session string, so SubOpts, k *Sink) error {
	t := &cfTransport{k: k}
	if so.Stall {
		t.stall = c.stall
	}
	// The subscription's own context, as a request's.
	reqCtx, cancel := context.WithCancel(c.ctx)
	ctx := context.WithValue(reqCtx, cfChannelKey{}, session)
	client, closeFn, err := centrifuge.NewClient(ctx, c.node, t)
	if err != nil {
		cancel()
		return err
	}
	c.mu.Lock()
	c.clients = append(c.clients, closeFn)
	c.trans = append(c.trans, t)
	c.mu.Unlock()
	if !so.Replay {
		client.Connect(centrifuge.ConnectRequest{})
	} else {
		// The replay through centrifuge's history API on the request's
		// goroutine (Node.History since the cursor: the broker's copy of
		// its publications, no client protocol encoding), then the
		// connect recovers from the last offset replayed, so that what
		// was published in between comes with the connect and the seam
		// stays exact.
		epoch := ""
		if e := c.channel(session).epoch.Load(); e != nil {
			epoch = *e
		}
		go func() {
			offset := t.history(c.node, session, epoch, so.Cursor)
			client.Connect(centrifuge.ConnectRequest{Subs: map[string]centrifuge.SubscribeRequest{
				session: {Recover: true, Epoch: epoch, Offset: offset},
			}})
		}()
	}
	// The application's goroutine for this connection (centrifuge's own SSE
	// handler keeps the request goroutine parked in a select while the
	// client's writer goroutine writes): every system here has one reader
	// goroutine per subscriber, so W7 counts it for centrifuge too.
	go func() { <-ctx.Done(); cancel() }()
	return nil
}

func (c *cfInstance) Sync(map[string][]*Sink) error { return nil }

func (c *cfInstance) LastID(session string) uint64 {
	return c.channel(session).last.Load()
}

func (c *cfInstance) Close() {
	c.mu.Lock()
	trans, clients := c.trans, c.clients
	c.mu.Unlock()
	for _, t := range trans {
		t.mu.Lock()
		t.dead = true
		t.mu.Unlock()
	}
	close(c.stall)
	for _, f := range clients {
		_ = f()
	}
	c.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_ = c.node.Shutdown(ctx)
	cancel()
}
