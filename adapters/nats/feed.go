package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/replaybus/replaybus/eventbus"
)

// catchUp is what the node knows about the stream it starts on, to tell the
// bus which sessions may have lost events before the node saw them.
//
// JetStream drops a subject's oldest message only when the subject holds
// MaxMsgsPerSubject messages, and a full subject stays full. So at start,
// a subject below the limit has lost nothing, and a full one may have lost
// everything before its first retained message: that one gets
// Feed.Evicted(path, first-1) when the consumer reaches it (conservative).
// Messages deleted while the node catches up show up as more skipped
// sequences than the stream had missing at start (LastSeq - Msgs).
type catchUp struct {
	last     uint64          // stream's LastSeq at start
	expected uint64          // sequences ≤ last missing at start
	skipped  uint64          // sequences ≤ last the consumer skipped so far
	full     map[string]bool // subjects at the limit at start, not yet reached
}

// Start implements [eventbus.Backend]: it checks the stream is the one the
// epoch came from, reads its state, and starts one ordered consumer over the
// whole stream (from its first retained message) that ingests every event
// into feed in sequence order, plus a goroutine watching the connection.
func (be *Backend) Start(ctx context.Context, feed eventbus.Feed) error {
	be.startMu.Lock()
	defer be.startMu.Unlock()
	if be.closed {
		return eventbus.ErrClosed
	}
	if be.started {
		return errors.New("nats: backend already started")
	}
	be.started = true
	be.feed = feed
	info, err := be.stream.Info(ctx, jetstream.WithSubjectFilter(be.o.prefix+".>"))
	if err != nil {
		return fmt.Errorf("nats: stream info of %q: %w", be.o.stream, err)
	}
	if !info.Created.Equal(be.created) {
		return fmt.Errorf("%w: %q was re-created while the node started", ErrStreamLost, be.o.stream)
	}
	var plan *catchUp
	if st := info.State; st.LastSeq > 0 {
		plan = &catchUp{last: st.LastSeq, expected: st.LastSeq - st.Msgs, full: make(map[string]bool)}
		for subj, n := range st.Subjects {
			if n >= uint64(be.limit) {
				plan.full[subj] = true
			}
		}
	}
	cons, err := be.js.OrderedConsumer(ctx, be.o.stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("nats: ordered consumer on %q: %w", be.o.stream, err)
	}
	it, err := cons.Messages(jetstream.PullHeartbeat(be.o.heartbeat), jetstream.PullExpiry(4*be.o.heartbeat))
	if err != nil {
		return fmt.Errorf("nats: consuming %q: %w", be.o.stream, err)
	}
	be.cons, be.iter = cons, it
	be.status = be.nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CONNECTED, nats.CLOSED)
	// A deleted stream is noticed at once through its advisory; errors
	// (no permission for $JS.EVENT) only leave it to the consumer checks.
	be.advSig = make(chan struct{}, 1)
	be.adv, _ = be.nc.Subscribe("$JS.EVENT.ADVISORY.STREAM.DELETED."+be.o.stream, func(*nats.Msg) {
		select {
		case be.advSig <- struct{}{}:
		default:
		}
	})
	be.wg.Add(2)
	go be.watch(be.status)
	go be.consume(it, plan)
	return nil
}

// checkStream compares the stream's identity with the node's; a missing or
// re-created stream loses it. It reports whether ingesting may go on.
func (be *Backend) checkStream() bool {
	for attempt := 0; ; attempt++ {
		if be.lost.Load() != nil || be.ctx.Err() != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(be.ctx, 5*time.Second)
		info, err := be.stream.Info(ctx)
		cancel()
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			be.loseStream(err)
			return false
		case err == nil && !info.Created.Equal(be.created):
			be.loseStream(fmt.Errorf("created %v, the node started on the one created %v", info.Created, be.created))
			return false
		case err == nil:
			return true
		}
		be.log.Warn("replaybus/nats: checking stream", slog.String("stream", be.o.stream), slog.Any("err", err))
		select {
		case <-be.ctx.Done():
			return false
		case <-time.After(min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second)):
		}
	}
}

// consume is the node's one consumer loop: every message, in stream order,
// into the feed.
func (be *Backend) consume(it jetstream.MessagesContext, plan *catchUp) {
	defer be.wg.Done()
	consumer := ""
	for {
		msg, err := it.Next()
		if err != nil {
			if be.ctx.Err() != nil || be.lost.Load() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return
			}
			be.log.Warn("replaybus/nats: consumer", slog.String("stream", be.o.stream), slog.Any("err", err))
			select {
			case <-be.ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		meta, err := msg.Metadata()
		if err != nil {
			continue
		}
		// A new consumer name means the ordered consumer was re-created:
		// make sure it still reads the stream the node started on.
		if meta.Consumer != consumer {
			if consumer != "" {
				be.verify.Store(true)
			}
			consumer = meta.Consumer
		}
		if be.verify.Swap(false) && !be.checkStream() {
			return
		}
		plan = be.handle(msg, meta.Sequence.Stream, plan)
	}
}

// handle ingests one message with stream sequence seq.
func (be *Backend) handle(msg jetstream.Msg, seq uint64, plan *catchUp) *catchUp {
	last := be.processed.Load()
	if seq <= last {
		return plan // a consumer restart delivered it again
	}
	be.feedMu.Lock()
	defer be.feedMu.Unlock()
	subject := msg.Subject()
	path, perr := pathOf(be.o.prefix, subject)
	// Sequences skipped between the last message and this one were
	// deleted before the node read them.
	var lagUpTo uint64
	if plan != nil {
		if gapEnd := min(seq-1, plan.last); gapEnd > last {
			plan.skipped += gapEnd - last
		}
		if perr == nil && plan.full[subject] {
			delete(plan.full, subject)
			be.feed.Evicted(path, seq-1)
		}
		if seq >= plan.last {
			if plan.skipped > plan.expected {
				lagUpTo = plan.last // messages were deleted while catching up
			}
			if seq > plan.last+1 && seq-1 > last {
				lagUpTo = seq - 1
			}
			plan = nil
		}
	} else if seq > last+1 {
		lagUpTo = seq - 1
	}
	if lagUpTo > 0 {
		be.markLag(lagUpTo)
	}
	if perr == nil {
		var env envelope
		if err := json.Unmarshal(msg.Data(), &env); err == nil && env.Type != "" {
			be.feed.Ingest(path, eventbus.Event{
				ID: seq, Session: path[len(path)-1], Type: env.Type, Data: env.Data,
				Time: time.Unix(0, env.Time), Origin: env.Origin,
			})
		} else {
			be.log.Warn("replaybus/nats: skipping undecodable message", slog.Uint64("seq", seq), slog.String("subject", subject))
		}
	} else {
		be.log.Warn("replaybus/nats: skipping message", slog.Uint64("seq", seq), slog.Any("err", perr))
	}
	be.processed.Store(seq)
	return plan
}

// markLag handles events deleted from the stream before this node read
// them (it fell more than MaxMsgsPerSubject behind on some session): it
// does not know which sessions lost them, so every session whose subject
// is at the limit is marked as having lost events up to upTo; a resume
// from before that gets ring_evicted instead of a silent gap. feedMu held.
func (be *Backend) markLag(upTo uint64) {
	be.log.Warn("replaybus/nats: events deleted before this node read them", slog.String("stream", be.o.stream), slog.Uint64("up_to", upTo))
	for attempt := 0; attempt < 5; attempt++ {
		ctx, cancel := context.WithTimeout(be.ctx, 5*time.Second)
		info, err := be.stream.Info(ctx, jetstream.WithSubjectFilter(be.o.prefix+".>"))
		cancel()
		if err == nil {
			for subj, n := range info.State.Subjects {
				if n < uint64(be.limit) {
					continue
				}
				if path, err := pathOf(be.o.prefix, subj); err == nil {
					be.feed.Evicted(path, upTo)
				}
			}
			return
		}
		if be.ctx.Err() != nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
