package nats

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/backend"
	"github.com/replaybus/replaybus/eventbus/producer"
)

// Idempotent producers over JetStream (backend.ProducerBackend).
//
// The record of producer P in session S is the last message on its own
// subject of the stream, <prefix>.$P.<S>.<P> (ids escaped as for session
// subjects; "$P" is no escaped session id, so the subject is no
// session's): {"epoch":E,"seq":N}, and the event that accepted N is the
// message just before it. Its revision is that message's stream sequence
// (0: no record). A stamped publish is one atomic batch of two messages
// (JetStream's atomic batch publish, NATS 2.12+): the event, on the
// session's subject, with a Nats-Msg-Id derived from (S, P, E, N); then the
// new record, with Nats-Expected-Last-Subject-Sequence set to the revision
// the bus checked the stamp against. JetStream stores both or neither, so
// the check and the event are one step whichever node publishes: a record
// that moved meanwhile (a retry, a zombie, another node) fails the batch
// (backend.ErrProducerConflict) and the bus checks again. The record lives
// in the stream, so every node and every restart sees it; the Nats-Msg-Id
// makes JetStream itself refuse a repeat within the stream's Duplicates
// window (2 minutes by default) even if the record were gone.
//
// Every node's consumer reads the record messages with the events and
// skips them (they are no session's): an event id is followed by a gap of
// one where a record was stored.

var _ backend.ProducerBackend = (*Backend)(nil)

// producerToken is the subject token under the prefix that holds the
// producers' records; escapeToken never produces it.
const producerToken = "$P"

// JetStream error codes a stamped publish meets.
const (
	errCodeWrongLastSeq      = 10071 // wrong last sequence: N
	errCodeWrongLastSeqConst = 10164 // wrong last sequence (a concurrent write in a cluster)
	errCodeDupMsgIDInProcess = 10158 // duplicate message id is in process (its batch not yet applied, in a cluster)
	errCodeBatchDupMsgID     = 10201 // atomic publish batch contains duplicate message id
	errCodeBatchInflight     = 10210 // atomic publish too many inflight
)

// producerRecord is the body of a record message.
type producerRecord struct {
	Epoch uint64 `json:"epoch"`
	Seq   uint64 `json:"seq"`
}

// producerSubject is the subject of producer id's record in session.
func (be *Backend) producerSubject(session, id string) (string, error) {
	subj := be.o.prefix + "." + producerToken + "." + escapeToken(session) + "." + escapeToken(id)
	if len(subj) > MaxSubjectLen {
		return "", fmt.Errorf("nats: session %q and producer %q give a record subject of %d bytes, over %d: %w",
			session, id, len(subj), MaxSubjectLen, eventbus.ErrInvalid)
	}
	return subj, nil
}

// isProducerSubject reports whether subject holds a producer's record.
func (be *Backend) isProducerSubject(subject string) bool {
	rest, ok := strings.CutPrefix(subject, be.o.prefix)
	return ok && strings.HasPrefix(rest, "."+producerToken+".")
}

// producersReady says why the node cannot keep producer records, or nil.
func (be *Backend) producersReady(ctx context.Context) error {
	if err := be.ready(ctx); err != nil {
		return err
	}
	if info := be.stream.CachedInfo(); info == nil || !info.Config.AllowAtomicPublish {
		return fmt.Errorf("nats: stream %q has no atomic batch publish (NATS server 2.12 or later): %w", be.o.stream, producer.ErrUnsupported)
	}
	return nil
}

// ProducerState implements [backend.ProducerBackend]: the last message on
// the producer's record subject, asked of the stream (one request). Errors:
// [eventbus.ErrInvalid] for an over-long subject, producer.ErrUnsupported
// on a server without atomic batch publish, the stream's errors wrapped.
func (be *Backend) ProducerState(ctx context.Context, session, id string) (producer.State, uint64, error) {
	if err := be.producersReady(ctx); err != nil {
		return producer.State{}, 0, err
	}
	subj, err := be.producerSubject(session, id)
	if err != nil {
		return producer.State{}, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, be.o.publishTimeout)
	defer cancel()
	var m *jetstream.RawStreamMsg
	for n := 0; ; n++ {
		// A read, asked of the stream's leader: tried again after an
		// election (leader.go).
		actx, cancelA, retry := be.attempt(ctx, attemptTimeout(n))
		m, err = be.stream.GetLastMsgForSubject(actx, subj)
		cancelA()
		if unavailable(err) && be.pauseForLeader(ctx) || err != nil && retry() {
			continue
		}
		break
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return producer.State{}, 0, nil
	}
	if err != nil {
		return producer.State{}, 0, fmt.Errorf("nats: reading producer record %q: %w", subj, err)
	}
	var rec producerRecord
	if err := json.Unmarshal(m.Data, &rec); err != nil || m.Sequence < 2 {
		return producer.State{}, 0, fmt.Errorf("nats: malformed producer record %q at %d: %.80q", subj, m.Sequence, m.Data)
	}
	return producer.State{Epoch: rec.Epoch, LastSeq: rec.Seq, LastID: m.Sequence - 1}, m.Sequence, nil
}

// AppendProducer implements [backend.ProducerBackend]: one atomic batch
// of the event and the producer's new record, the record under
// Nats-Expected-Last-Subject-Sequence rev, the event with a Nats-Msg-Id of
// (session, producer, epoch, sequence). It waits for the batch's ack
// (bounded by ctx and the publish timeout) and returns the event's id and
// the record's new revision (the next stream sequence).
// Errors: [backend.ErrProducerConflict] when the record moved (or in a
// cluster is being written, or the same event is, or too many batches are
// in flight on the stream: read the record again and try again); a
// *producer.Error with producer.ErrDuplicate (LastID 0) when JetStream
// already holds the event's Nats-Msg-Id; otherwise Append's.
func (be *Backend) AppendProducer(ctx context.Context, path []string, ev backend.Record, p producer.Stamp, rev uint64) (id, newRev uint64, err error) {
	session := path[len(path)-1]
	if err := be.producersReady(ctx); err != nil {
		return 0, 0, err
	}
	recSubj, err := be.producerSubject(session, p.ID)
	if err != nil {
		return 0, 0, err
	}
	subject := subjectFor(be.o.prefix, path)
	if len(subject) > MaxSubjectLen {
		return 0, 0, fmt.Errorf("nats: session path %q gives a subject of %d bytes, over %d: %w",
			path, len(subject), MaxSubjectLen, eventbus.ErrInvalid)
	}
	body := make([]byte, 0, envelopeSize(ev.Type, ev.Origin, ev.ContentType, ev.Data))
	body = appendEnvelope(body, ev.Type, ev.Time.UnixNano(), ev.Origin, ev.ContentType, ev.Data)
	rec, _ := json.Marshal(producerRecord{Epoch: p.Epoch, Seq: p.Seq})
	rctx, cancel := context.WithTimeout(ctx, be.o.publishTimeout)
	defer cancel()
	// The batch is safe to send again (leader.go): the event's Nats-Msg-Id
	// makes JetStream refuse a second copy, and the record's expected last
	// sequence a second record. So a try that a leader election (or its
	// timeout) cut short, or that no stream received, is sent again with a
	// new batch id until the publish timeout.
	for attempt := 0; ; attempt++ {
		seq, again, err := be.appendBatch(rctx, attempt, subject, recSubj, body, rec, session, p, rev)
		if !again {
			if errors.Is(err, ErrStreamLost) {
				be.loseStream(err) // an ack from another stream, as for Append
			}
			if err != nil {
				return 0, 0, err
			}
			return seq - 1, seq, nil // the event is the batch's first message, the record its second
		}
	}
}

// appendBatch sends the n-th try of a stamped publish's batch and waits
// for its ack within the try's time; again reports that the try ended
// without an answer worth returning (an election, no responders, the
// try's timeout) while rctx still runs.
func (be *Backend) appendBatch(rctx context.Context, n int, subject, recSubj string, body, rec []byte, session string, p producer.Stamp, rev uint64) (seq uint64, again bool, err error) {
	batch := nuid.Next()
	first := &nats.Msg{Subject: subject, Data: body, Header: nats.Header{
		"Nats-Batch-Id":       {batch},
		"Nats-Batch-Sequence": {"1"},
		jetstream.MsgIDHeader: {msgID(session, p)},
	}}
	commit := &nats.Msg{Subject: recSubj, Data: rec, Header: nats.Header{
		"Nats-Batch-Id":                     {batch},
		"Nats-Batch-Sequence":               {"2"},
		"Nats-Batch-Commit":                 {"1"},
		jetstream.ExpectedLastSubjSeqHeader: {strconv.FormatUint(rev, 10)},
	}}
	// One connection delivers the two in order; only the commit asks for
	// an ack, the batch's.
	if err := be.nc.PublishMsg(first); err != nil {
		return 0, false, fmt.Errorf("nats: publishing to %q: %w", subject, err)
	}
	actx, cancel, retry := be.attempt(rctx, attemptTimeout(n))
	resp, err := be.nc.RequestMsgWithContext(actx, commit)
	cancel()
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		if be.pauseForLeader(rctx) {
			return 0, true, nil
		}
		return 0, false, ErrNoStream
	case err != nil && retry():
		return 0, true, nil
	case err != nil && rctx.Err() != nil:
		return 0, false, fmt.Errorf("%w: %q: %w", ErrNoAck, subject, err)
	case err != nil:
		return 0, false, fmt.Errorf("nats: publishing to %q: %w", subject, err)
	}
	seq, err = be.parseBatchAck(resp.Data, session, p)
	var pe *producer.Error
	if n > 0 && (errors.As(err, &pe) || errors.Is(err, backend.ErrProducerConflict)) {
		// An earlier try may have been stored after all: the bus reads
		// the record again, which then names that try's event.
		return 0, false, fmt.Errorf("%w: an earlier try of this publish may be stored (%w)", backend.ErrProducerConflict, err)
	}
	return seq, false, err
}

// parseBatchAck reads the ack of a stamped publish's batch: the record's
// stream sequence, or what refused the batch.
func (be *Backend) parseBatchAck(data []byte, session string, p producer.Stamp) (uint64, error) {
	var r struct {
		Stream string `json:"stream"`
		Seq    uint64 `json:"seq"`
		Count  int    `json:"count"`
		Error  *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return 0, fmt.Errorf("nats: malformed publish ack %.80q", data)
	}
	if e := r.Error; e != nil {
		switch e.ErrCode {
		case errCodeWrongLastSeq, errCodeWrongLastSeqConst, errCodeDupMsgIDInProcess, errCodeBatchInflight:
			return 0, fmt.Errorf("%w: %s (err_code %d)", backend.ErrProducerConflict, e.Description, e.ErrCode)
		case errCodeBatchDupMsgID:
			return 0, &producer.Error{Kind: producer.ErrDuplicate, Session: session, Stamp: p, State: producer.State{Epoch: p.Epoch, LastSeq: p.Seq}}
		}
		return 0, fmt.Errorf("nats: publish refused: %s (code %d, err_code %d)", e.Description, e.Code, e.ErrCode)
	}
	if r.Stream != be.o.stream {
		return 0, fmt.Errorf("%w: %q: stored by stream %q", ErrStreamLost, be.o.stream, r.Stream)
	}
	if r.Count != 2 || r.Seq < 2 {
		return 0, fmt.Errorf("nats: unexpected batch ack %.80q", data)
	}
	return r.Seq, nil
}

// msgID is the Nats-Msg-Id of producer p's event in session: a digest of
// the four, so that its length is bounded whatever the ids.
func msgID(session string, p producer.Stamp) string {
	h := sha256.New()
	h.Write([]byte(session))
	h.Write([]byte{0})
	h.Write([]byte(p.ID))
	fmt.Fprintf(h, "\x00%d\x00%d", p.Epoch, p.Seq)
	return "rbp-" + hex.EncodeToString(h.Sum(nil)[:16])
}
