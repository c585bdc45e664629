package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// producer is one idempotent producer (Producer-Id, -Epoch, -Seq) that
// publishes to its own session over HTTP/1.1 pipelining: it keeps up to
// window requests written ahead on one connection, which the server
// answers in order. On any failure (a 5xx, a broken connection, no answer
// within the read timeout) it drops the connection, moves to the other
// node, and sends again from its first unacknowledged sequence; a repeat
// of a stored sequence is answered "duplicate" (acknowledged once), a
// sequence past the stored ones 409 (sent again after the earlier one).
type producer struct {
	id, session string
	nodes       []string // host:port of each bus node
	window      int
	partitioned func() bool // a server is cut off now

	mu      sync.Mutex
	sent    []int64 // per sequence: first send (Unix ns); 0 not yet
	acked   []bool
	acks    []ack
	ackedAt []ackTime
	next    uint64 // first sequence not yet sent on this connection
	unacked uint64 // lowest sequence not acknowledged
	node    int
	fails   int
	errs    map[string]int // failure reasons, counted
	fatal   error

	lastSent atomic.Int64 // the latest first-send time among the acknowledged sequences
}

// ackTime is when a sequence was acknowledged, with when it was first sent.
type ackTime struct {
	Sent, At int64 // Unix ns
}

func newProducer(id, session string, nodes []string, window, first int, partitioned func() bool) *producer {
	return &producer{id: id, session: session, nodes: nodes, window: window, node: first % len(nodes),
		partitioned: partitioned, errs: map[string]int{}}
}

// run publishes until stop is closed, then until every sent sequence is
// acknowledged (or ctx ends).
func (p *producer) run(ctx context.Context, stop <-chan struct{}) {
	for ctx.Err() == nil {
		p.mu.Lock()
		drained := p.unacked >= uint64(len(p.sent)) && chanClosed(stop)
		fatal := p.fatal
		p.mu.Unlock()
		if drained || fatal != nil {
			return
		}
		err := p.connection(ctx, stop)
		if err == nil {
			continue
		}
		p.mu.Lock()
		p.fails++
		p.errs[reasonOf(err)]++
		p.next = p.unacked // send again from the first unacknowledged
		p.node = (p.node + 1) % len(p.nodes)
		p.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func chanClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// reasonOf shortens an error for the failure counts.
func reasonOf(err error) string {
	var ne net.Error
	switch {
	case asNetTimeout(err, &ne):
		return "timeout"
	case err == io.EOF, err == io.ErrUnexpectedEOF:
		return "connection closed"
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

func asNetTimeout(err error, ne *net.Error) bool {
	e, ok := err.(net.Error)
	if ok {
		*ne = e
	}
	return ok && e.Timeout()
}

// readTimeout bounds the wait for one answer: the bus's publish timeout is
// 5 s, so an answer later than this means a stuck connection.
const readTimeout = 20 * time.Second

// connection runs one pipelined connection until it fails, or until stop
// is closed and everything sent on it is answered (nil).
func (p *producer) connection(ctx context.Context, stop <-chan struct{}) error {
	p.mu.Lock()
	addr := p.nodes[p.node]
	p.mu.Unlock()
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	stopConn := context.AfterFunc(ctx, func() { conn.Close() })
	defer stopConn()

	type sentReq struct{ seq uint64 }
	inflight := make(chan sentReq, p.window) // its capacity is the window
	werr := make(chan error, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	// In this order on return: the writer is told, the connection closed
	// (a write in progress fails), and the writer gone before run moves
	// p.next back.
	defer wg.Wait()
	defer conn.Close()
	defer close(done)
	wg.Add(1)
	go func() { // the writer: keep the window full
		defer wg.Done()
		bw := bufio.NewWriter(conn)
		for {
			p.mu.Lock()
			seq := p.next
			// After stop, only what was sent before is sent again.
			if p.fatal != nil || chanClosed(stop) && seq >= uint64(len(p.sent)) {
				p.mu.Unlock()
				close(inflight)
				return
			}
			p.next++
			for uint64(len(p.sent)) <= seq {
				p.sent = append(p.sent, 0)
				p.acked = append(p.acked, false)
			}
			if p.sent[seq] == 0 {
				p.sent[seq] = time.Now().UnixNano()
			}
			sentAt := p.sent[seq]
			p.mu.Unlock()
			select {
			case inflight <- sentReq{seq}:
			case <-done:
				return
			}
			body, _ := json.Marshal(map[string]any{"type": "chaos", "data": payload{P: p.id, S: seq, T: sentAt}})
			fmt.Fprintf(bw, "POST /session/%s/events HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
				"Producer-Id: %s\r\nProducer-Epoch: 1\r\nProducer-Seq: %d\r\nContent-Length: %d\r\n\r\n",
				p.session, addr, p.id, seq, len(body))
			bw.Write(body)
			if err := bw.Flush(); err != nil {
				select {
				case werr <- err:
				default:
				}
				return
			}
		}
	}()

	br := bufio.NewReader(conn)
	for {
		var r sentReq
		var ok bool
		select {
		case r, ok = <-inflight:
		case err := <-werr:
			return err
		}
		if !ok {
			return nil // stopped, and everything sent was answered
		}
		_ = conn.SetReadDeadline(time.Now().Add(readTimeout))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		now := time.Now().UnixNano()
		switch resp.StatusCode {
		case http.StatusAccepted, http.StatusOK:
			var a struct {
				ID        uint64 `json:"id"`
				Duplicate bool   `json:"duplicate"`
			}
			if err := json.Unmarshal(b, &a); err != nil {
				return p.setFatal(fmt.Errorf("seq %d: answer %q: %w", r.seq, b, err))
			}
			if got := resp.Header.Get("Producer-Seq"); !a.Duplicate && got != strconv.FormatUint(r.seq, 10) {
				return p.setFatal(fmt.Errorf("seq %d: answered for Producer-Seq %q", r.seq, got))
			}
			id := a.ID
			if a.Duplicate {
				id = 0
			}
			p.settle(r.seq, id, now)
		case http.StatusConflict:
			// A gap: an earlier sequence failed and this one came
			// after it. Nothing stored; sent again from the first
			// unacknowledged one.
			if !bytes.Contains(b, []byte("producer_seq_gap")) {
				return p.setFatal(fmt.Errorf("seq %d: 409 %s", r.seq, b))
			}
			return fmt.Errorf("409 producer_seq_gap")
		default:
			if resp.StatusCode >= 500 {
				return fmt.Errorf("%d %.300s", resp.StatusCode, b)
			}
			return p.setFatal(fmt.Errorf("seq %d: %d %s", r.seq, resp.StatusCode, b))
		}
	}
}

// settle records the ack of seq (id 0: a duplicate).
func (p *producer) settle(seq, id uint64, now int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.acked[seq] {
		return // acknowledged before (a resend answered duplicate)
	}
	p.acked[seq] = true
	p.acks = append(p.acks, ack{Key: key{p.id, seq}, ID: id, Partitioned: p.partitioned()})
	p.ackedAt = append(p.ackedAt, ackTime{Sent: p.sent[seq], At: now})
	if p.sent[seq] > p.lastSent.Load() {
		p.lastSent.Store(p.sent[seq])
	}
	for p.unacked < uint64(len(p.acked)) && p.acked[p.unacked] {
		p.unacked++
	}
}

func (p *producer) setFatal(err error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fatal == nil {
		p.fatal = fmt.Errorf("producer %s: %w", p.id, err)
	}
	return p.fatal
}

// snapshot returns the acks and their times so far.
func (p *producer) snapshot() ([]ack, []ackTime) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ack(nil), p.acks...), append([]ackTime(nil), p.ackedAt...)
}
