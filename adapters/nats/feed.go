package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/backend"
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
	from     uint64          // the last sequence the node had handled at start
	last     uint64          // stream's LastSeq at start
	expected uint64          // sequences ≤ last missing at start
	skipped  uint64          // sequences ≤ last the consumer skipped so far
	full     map[string]bool // subjects at the limit at start, not yet reached
}

// Start implements [backend.Backend]: it checks the stream is the one the
// epoch came from, reads its state, and starts one ordered consumer over the
// whole stream (from its first retained message) that ingests every event
// into feed in sequence order, plus a goroutine watching the connection.
func (be *Backend) Start(ctx context.Context, feed backend.Feed) error {
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
	info, err := be.startInfo(ctx)
	if err != nil {
		return fmt.Errorf("nats: stream info of %q: %w", be.o.stream, err)
	}
	if !info.Created.Equal(be.created) {
		return fmt.Errorf("%w: %q was re-created while the node started", ErrStreamLost, be.o.stream)
	}
	var plan *catchUp
	if st := info.State; st.LastSeq > 0 {
		plan = &catchUp{from: be.processed.Load(), last: st.LastSeq, expected: st.LastSeq - st.Msgs, full: make(map[string]bool)}
		for subj, n := range st.Subjects {
			if be.mayHaveLost(n) {
				plan.full[subj] = true
			}
		}
	}
	be.consName = "replaybus_" + nuid.Next()
	be.status = be.nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CONNECTED, nats.CLOSED)
	// A deleted stream is noticed at once through its advisory; errors
	// (no permission for $JS.EVENT) only leave it to the consumer checks.
	be.advSig = make(chan struct{}, 1)
	be.kick = make(chan struct{}, 1)
	be.adv, _ = be.nc.Subscribe("$JS.EVENT.ADVISORY.STREAM.DELETED."+be.o.stream, func(*nats.Msg) {
		select {
		case be.advSig <- struct{}{}:
		default:
		}
	})
	be.wg.Add(2)
	go be.watch(be.status)
	go be.consume(plan)
	if be.leases == nil {
		return nil
	}
	return be.leases.start(ctx, feed)
}

// startInfo asks for the stream's state (its subjects' counts), from the
// stream's leader: a stream just created on a cluster that is still
// forming may have none yet, so the request is tried again after an
// election or its try's timeout (leader.go), for up to 30 s within ctx.
func (be *Backend) startInfo(ctx context.Context) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for n := 0; ; n++ {
		actx, cancelA, retry := be.attempt(ctx, attemptTimeout(n))
		info, err := be.stream.Info(actx, jetstream.WithSubjectFilter(be.o.prefix+".>"))
		cancelA()
		if unavailable(err) && be.pauseForLeader(ctx) || err != nil && retry() {
			continue
		}
		return info, err
	}
}

// confirmStream checks the stream's identity when it is unconfirmed since
// a reconnect or a consumer reset (see checkStream); it reports whether
// the node may go on using the stream.
func (be *Backend) confirmStream(ctx context.Context) bool {
	if !be.verify.Load() {
		return be.lost.Load() == nil
	}
	if !be.checkStream(ctx) {
		return false
	}
	be.verify.Store(false)
	return true
}

// checkStream compares the stream's identity with the node's; a missing or
// re-created stream loses it. It reports whether ingesting may go on, and
// gives up (false) when ctx or the backend is done, so that a Publish waits
// no longer than its own deadline.
func (be *Backend) checkStream(ctx context.Context) bool {
	for attempt := 0; ; attempt++ {
		if be.lost.Load() != nil || be.ctx.Err() != nil || ctx.Err() != nil {
			return false
		}
		// Asked of the stream's leader: tried again at once after an
		// election (leader.go).
		ictx, cancel, retry := be.attempt(ctx, attemptTimeout(attempt))
		info, err := be.stream.Info(ictx)
		cancel()
		if err != nil && retry() {
			continue
		}
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
		case <-ctx.Done():
			return false
		case <-time.After(min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second)):
		}
	}
}

// consume is the node's one consumer loop: every message, in stream order,
// into the feed. It reads through a plain ephemeral consumer of its own
// (the ordered-consumer recipe: no acks, memory storage, one replica) and
// re-creates it from the last sequence it handled whenever it breaks — a
// missed delivery, missed heartbeats, a lost server, a reconnect (the
// server may have restarted without the consumer) — so that Close can
// always stop it at once.
func (be *Backend) consume(plan *catchUp) {
	defer be.wg.Done()
	for attempt := 0; be.ctx.Err() == nil && be.lost.Load() == nil; attempt++ {
		err := be.consumeOnce(&plan)
		if be.ctx.Err() != nil || be.lost.Load() != nil {
			return
		}
		if err != nil {
			be.log.Warn("replaybus/nats: consumer", slog.String("stream", be.o.stream), slog.Any("err", err))
		}
		select {
		case <-be.ctx.Done():
			return
		case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second)):
		}
	}
}

var errConsumerGap = errors.New("nats: consumer skipped a delivery")

// consumeOnce creates a consumer from the sequence after the last one
// handled and reads it until it fails.
func (be *Backend) consumeOnce(plan **catchUp) error {
	be.serial++
	name := fmt.Sprintf("%s_%d", be.consName, be.serial)
	cfg := jetstream.ConsumerConfig{
		Name:              name,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       be.processed.Load() + 1,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: time.Minute,
	}
	// The request goes to the meta leader, which places the consumer on a
	// server of the stream: tried again after an election, or after 1 s
	// (2 s, …): a server that just died may be chosen until the cluster
	// sees it gone, and then the request goes unanswered (leader.go).
	var cons jetstream.Consumer
	var err error
	for n := 0; n < 4; n++ {
		actx, cancel, retry := be.attempt(be.ctx, attemptTimeout(n))
		cons, err = be.js.CreateOrUpdateConsumer(actx, be.o.stream, cfg)
		cancel()
		if unavailable(err) && be.pauseForLeader(be.ctx) || err != nil && retry() {
			continue
		}
		break
	}
	if err != nil {
		return fmt.Errorf("creating consumer: %w", err)
	}
	defer func() {
		if be.nc.IsConnected() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = be.js.DeleteConsumer(ctx, be.o.stream, name)
			cancel()
		}
	}()
	// The consumer reads the stream the node started on, not one
	// re-created since. (Checked here for the consumer alone: publishes
	// wait for a check only after a reconnect or a deletion advisory, not
	// for every new consumer, which a leader change of the stream makes.)
	if !be.checkStream(be.ctx) {
		return nil
	}
	// The messages arrive on nats.go's delivery goroutine of the consumer
	// (Consume: no timer per message, unlike Messages' Next); the first
	// failure stops the ingest and is reported on errc.
	errc := make(chan error, 1)
	report := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	var delivered uint64
	var failed bool // touched by the delivery goroutine only
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		if failed {
			return
		}
		meta, err := msg.Metadata()
		switch {
		case err != nil:
		case meta.Sequence.Consumer != delivered+1:
			err = errConsumerGap
		case !be.confirmStream(be.ctx):
		default:
			delivered = meta.Sequence.Consumer
			*plan = be.handle(msg, meta.Sequence.Stream, *plan)
			return
		}
		failed = true
		report(err)
	}, jetstream.PullHeartbeat(be.o.heartbeat), jetstream.PullExpiry(4*be.o.heartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			// Two missed heartbeats: the consumer may be gone (a
			// restarted server); re-create it. Other errors that end the
			// consumption close it (cc.Closed below).
			if errors.Is(err, jetstream.ErrNoHeartbeat) {
				report(err)
			}
		}))
	if err != nil {
		return fmt.Errorf("consuming: %w", err)
	}
	closed := cc.Closed()
	// After Stop, the delivery goroutine's last call has returned once
	// closed is: plan is the caller's again.
	defer func() { cc.Stop(); <-closed }()
	select {
	case <-be.kick: // a reconnect before this consumer existed
	default:
	}
	select {
	case <-be.ctx.Done():
		return nil
	case <-be.kick:
		// A reconnect: re-create the consumer at once (see watch).
		return nil
	case <-closed:
		return errors.New("consumption ended")
	case err := <-errc:
		return err
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
	path, perr := be.pathOf(subject)
	// Sequences skipped between the last message and this one were
	// deleted before the node read them.
	lagAfter, lagUpTo := last, uint64(0)
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
				// Messages were deleted somewhere during the catch-up.
				lagAfter, lagUpTo = plan.from, plan.last
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
		be.markLag(lagAfter, lagUpTo)
	}
	if perr == nil {
		if ev, err := be.decode(msg.Data(), seq); err == nil {
			be.feed.Ingest(path, ev)
		} else {
			be.log.Warn("replaybus/nats: skipping undecodable message", slog.Uint64("seq", seq), slog.String("subject", subject))
		}
	} else if !be.isProducerSubject(subject) { // a producer's record is no event (producer.go)
		be.log.Warn("replaybus/nats: skipping message", slog.Uint64("seq", seq), slog.Any("err", perr))
	}
	be.processed.Store(seq)
	return plan
}

// maxFirstLookups bounds the per-session requests of one markLag.
const maxFirstLookups = 256

// markLag handles events deleted from the stream before this node read
// them: sequences after last up to upTo were skipped (the node fell more
// than the stream's per-session retention behind on some session, or was
// cut off from NATS while the stream moved on). It does not know which
// sessions lost them, so every session whose subject is at the limit may
// have: each is marked as having lost events up to upTo, or up to its first
// retained event when that is lower (what a subject loses is always older
// than what it keeps). A subject whose first retained event the node had
// already read lost nothing in this gap and is left alone (when the lookup
// is affordable). The bus announces the mark to live subscribers in scope
// (state_resync_required{feed_gap}) and to later resumes (ring_evicted).
// feedMu held.
func (be *Backend) markLag(last, upTo uint64) {
	be.log.Warn("replaybus/nats: events deleted before this node read them", slog.String("stream", be.o.stream),
		slog.Uint64("after", last), slog.Uint64("up_to", upTo))
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		ctx, cancel := context.WithTimeout(be.ctx, 5*time.Second)
		var info *jetstream.StreamInfo
		info, err = be.stream.Info(ctx, jetstream.WithSubjectFilter(be.o.prefix+".>"))
		cancel()
		if err == nil {
			var full []string
			for subj, n := range info.State.Subjects {
				if be.mayHaveLost(n) && !be.isProducerSubject(subj) { // a record is no session's
					full = append(full, subj)
				}
			}
			for _, subj := range full {
				path, err := pathOf(be.o.prefix, subj)
				if err != nil {
					continue
				}
				mark := upTo
				// What a subject lost lies before its first retained
				// event: ask for it while that costs few requests.
				if len(full) <= maxFirstLookups {
					ctx, cancel := context.WithTimeout(be.ctx, 2*time.Second)
					m, err := be.stream.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subj))
					cancel()
					if err == nil {
						mark = min(mark, m.Sequence-1)
					}
				}
				if mark > last {
					be.feed.Evicted(path, mark)
				}
			}
			return
		}
		if be.ctx.Err() != nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The stream could not be asked which sessions lost events: the
	// node's live subscribers must not go on as if nothing happened.
	be.feed.Fail(fmt.Errorf("nats: events %d..%d deleted before this node read them, and the stream cannot say whose: %w", last+1, upTo, err))
}

// pathOf is pathOf for the consumer goroutine, cached per subject.
func (be *Backend) pathOf(subject string) ([]string, error) {
	if p, ok := be.paths[subject]; ok {
		return p, nil
	}
	p, err := pathOf(be.o.prefix, subject)
	if err != nil {
		return nil, err
	}
	if be.paths == nil || len(be.paths) >= maxCached {
		be.paths = make(map[string][]string)
	}
	be.paths[subject] = p
	return p, nil
}

// decode turns the message body b at sequence seq into the record it
// stores: a byte payload (version 2) gets its media type back (the bus
// delivers one this process cannot intern as application/octet-stream); a
// malformed envelope is an error.
func (be *Backend) decode(b []byte, seq uint64) (backend.Record, error) {
	d, err := decodeEnvelope(b)
	if err != nil {
		return backend.Record{}, err
	}
	r := backend.Record{
		ID: seq, Type: be.intern(d.typ), Data: d.data,
		Time: time.Unix(0, d.nanos), Origin: string(d.origin),
	}
	if d.ctype != nil {
		r.ContentType = be.intern(d.ctype)
	}
	return r, nil
}

// intern returns typ as a string, shared between events of one type (or
// media type).
func (be *Backend) intern(typ []byte) string {
	if s, ok := be.types[string(typ)]; ok {
		return s
	}
	s := string(typ)
	if be.types == nil || len(be.types) >= maxCached {
		be.types = make(map[string]string)
	}
	be.types[s] = s
	return s
}

// mayHaveLost reports whether a subject holding n messages may have lost
// older ones: only a full subject can, unless MaxAge also deletes events, in
// which case any subject can (conservative: a resume from before its first
// retained event then gets ring_evicted).
func (be *Backend) mayHaveLost(n uint64) bool {
	return n >= uint64(be.perSubj) || be.o.maxAge > 0
}
