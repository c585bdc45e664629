package nats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/backend"
)

// ErrNoAck: JetStream did not acknowledge a publish within the publish
// timeout (or the connection was lost meanwhile). The event may or may not
// be stored.
var ErrNoAck = errors.New("nats: no ack within the publish timeout (the event may or may not be stored)")

// ErrNoStream: no stream answered a publish (the stream is missing, or has
// no leader during an election); the event was not stored.
var ErrNoStream = errors.New("nats: no stream responded (the event was not stored)")

// acker publishes events to JetStream and matches the acks, for the
// synchronous Append and the pipelined AppendAsync alike: each message
// carries a reply subject <inbox>.<token> that one subscription of the node
// receives. It is the lean path of JetStream's own async publish: no
// per-message timer, no retry (a retry would reorder one caller's events),
// no headers, the ack read without a full JSON decode, and no channel per
// message unless a Wait has to block for it.
type acker struct {
	nc      *nats.Conn
	stream  string
	timeout time.Duration
	prefix  string      // <inbox>.
	lost    func(error) // called with every ErrStreamLost a Wait returns
	bodies  sync.Pool   // *[]byte: message bodies, reused once sent
	sub     *nats.Subscription

	mu      sync.Mutex
	next    uint64
	pending map[uint64]*pendingAck
}

func newAcker(nc *nats.Conn, stream string, timeout time.Duration, lost func(error)) (*acker, error) {
	a := &acker{nc: nc, stream: stream, timeout: timeout, prefix: nc.NewInbox() + ".", lost: lost, pending: make(map[uint64]*pendingAck)}
	sub, err := nc.Subscribe(a.prefix+"*", a.handle)
	if err != nil {
		return nil, fmt.Errorf("nats: subscribing to publish acks: %w", err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	a.sub = sub
	return a, nil
}

// close stops the ack subscription and fails every publish still waiting
// for its ack (the event may or may not be stored), so that no Wait or
// Flush sits out the publish timeout after the node closed.
func (a *acker) close() {
	_ = a.sub.Unsubscribe()
	a.mu.Lock()
	defer a.mu.Unlock()
	for t, p := range a.pending {
		delete(a.pending, t)
		p.settleLocked(0, fmt.Errorf("%w: %q: node closed before the ack (%w)", ErrNoAck, p.subject, eventbus.ErrClosed))
	}
}

// pendingAck is one publish waiting for its ack; it implements
// [backend.PendingAppend].
type pendingAck struct {
	a        *acker
	token    uint64
	subject  string
	deadline time.Time
	done     atomic.Bool   // seq and err are set
	wake     chan struct{} // made by a Wait that blocks, closed once done; under a.mu
	seq      uint64
	err      error
}

// settleLocked sets the outcome and wakes a blocked Wait. a.mu held.
func (p *pendingAck) settleLocked(seq uint64, err error) {
	p.seq, p.err = seq, err
	p.done.Store(true)
	if p.wake != nil {
		close(p.wake)
	}
}

// send publishes the envelope of ev to subject and returns the pending
// ack. An error means the message was not sent.
func (a *acker) send(subject string, ev *backend.Record) (*pendingAck, error) {
	p := &pendingAck{a: a, subject: subject}
	a.mu.Lock()
	if len(a.pending) >= maxAsyncPending {
		a.mu.Unlock()
		return nil, fmt.Errorf("nats: %d publishes of this node awaiting their ack", maxAsyncPending)
	}
	a.next++
	p.token = a.next
	now := time.Now()
	p.deadline = now.Add(a.timeout)
	if a.next%sweepEvery == 0 {
		a.sweepLocked(now)
	}
	a.pending[p.token] = p
	a.mu.Unlock()
	var rb [64]byte
	reply := string(strconv.AppendUint(append(rb[:0], a.prefix...), p.token, 36))
	// nats.go copies the body into its write buffer before PublishRequest
	// returns, so the buffer is reused.
	bp, _ := a.bodies.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	body := slices.Grow((*bp)[:0], envelopeSize(ev.Type, ev.Origin, ev.ContentType, ev.Data))
	body = appendEnvelope(body, ev.Type, ev.Time.UnixNano(), ev.Origin, ev.ContentType, ev.Data)
	err := a.nc.PublishRequest(subject, reply, body)
	if cap(body) <= maxPooledBody {
		*bp = body
		a.bodies.Put(bp)
	}
	if err != nil {
		a.forget(p.token)
		return nil, fmt.Errorf("nats: publishing to %q: %w", subject, err)
	}
	return p, nil
}

// maxPooledBody bounds the bodies kept for reuse (larger ones are left to
// the GC), so that one large event does not pin its buffer.
const maxPooledBody = 64 << 10

// sweepEvery is how often (in sends) send drops the acks nobody will wait
// for any more: a pipeline dropped with events in flight whose acks never
// came (a lost connection). Their Wait, if called, reports ErrNoAck.
const sweepEvery = 1024

func (a *acker) sweepLocked(now time.Time) {
	for t, p := range a.pending {
		if now.After(p.deadline.Add(a.timeout)) {
			delete(a.pending, t)
		}
	}
}

func (a *acker) forget(token uint64) {
	a.mu.Lock()
	delete(a.pending, token)
	a.mu.Unlock()
}

// handle is the ack subscription's callback (one goroutine, in order).
func (a *acker) handle(m *nats.Msg) {
	token, err := strconv.ParseUint(m.Subject[len(a.prefix):], 36, 64)
	if err != nil {
		return
	}
	seq, err := a.parse(m)
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.pending[token]; p != nil { // else: timed out already
		delete(a.pending, token)
		p.settleLocked(seq, err)
	}
}

// parse reads a JetStream publish ack: {"stream":"S","seq":N,…} or
// {"error":{…}}, or a no-responders status.
func (a *acker) parse(m *nats.Msg) (uint64, error) {
	if len(m.Data) == 0 {
		if m.Header.Get("Status") == "503" {
			return 0, ErrNoStream
		}
		return 0, fmt.Errorf("nats: empty publish ack (status %q)", m.Header.Get("Status"))
	}
	if !bytes.Contains(m.Data, []byte(`"error"`)) {
		stream, okS := stringField(m.Data, `"stream":"`)
		seq, okQ := uintField(m.Data, `"seq":`)
		if okS && okQ {
			if string(stream) != a.stream {
				return 0, fmt.Errorf("%w: %q: stored by stream %q", ErrStreamLost, a.stream, stream)
			}
			return seq, nil
		}
	}
	var r struct {
		Stream string `json:"stream"`
		Seq    uint64 `json:"seq"`
		Error  *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return 0, fmt.Errorf("nats: malformed publish ack %.80q", m.Data)
	}
	if r.Error != nil {
		return 0, fmt.Errorf("nats: publish refused: %s (code %d, err_code %d)", r.Error.Description, r.Error.Code, r.Error.ErrCode)
	}
	if r.Stream != a.stream {
		return 0, fmt.Errorf("%w: %q: stored by stream %q", ErrStreamLost, a.stream, r.Stream)
	}
	return r.Seq, nil
}

// stringField returns the bytes after key up to the next quote.
func stringField(b []byte, key string) ([]byte, bool) {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return nil, false
	}
	b = b[i+len(key):]
	j := bytes.IndexByte(b, '"')
	if j < 0 || bytes.IndexByte(b[:j], '\\') >= 0 {
		return nil, false
	}
	return b[:j], true
}

// uintField parses the decimal number after key.
func uintField(b []byte, key string) (uint64, bool) {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false
	}
	b = b[i+len(key):]
	j := 0
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if j == 0 || j > 19 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:j]), 10, 64)
	return n, err == nil
}

// Wait implements [backend.PendingAppend]: the stream sequence once the
// ack arrived; [ErrNoAck] once the publish timeout since the send has
// passed; ctx's error (still pending) when ctx ends first. An ack from
// another stream (ours deleted, another took over the subjects:
// [ErrStreamLost]) also loses the stream for the node; the check stands in
// for an expected-stream header on every publish.
func (p *pendingAck) Wait(ctx context.Context) (uint64, error) {
	seq, err := p.wait(ctx)
	if errors.Is(err, ErrStreamLost) {
		p.a.lost(err)
	}
	return seq, err
}

func (p *pendingAck) wait(ctx context.Context) (uint64, error) {
	if p.done.Load() {
		return p.seq, p.err
	}
	p.a.mu.Lock()
	if p.done.Load() {
		p.a.mu.Unlock()
		return p.seq, p.err
	}
	if p.wake == nil {
		p.wake = make(chan struct{})
	}
	wake := p.wake
	p.a.mu.Unlock()
	d := time.Until(p.deadline)
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-wake:
			return p.seq, p.err
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-t.C:
		}
	}
	p.a.forget(p.token)
	if p.done.Load() { // the ack won the race
		return p.seq, p.err
	}
	return 0, fmt.Errorf("%w: %q after %v", ErrNoAck, p.subject, p.a.timeout)
}
