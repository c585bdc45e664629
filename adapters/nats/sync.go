package nats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// How far the node is behind its stream (backend.Syncer, Backend.Sync).
// The stream's last sequence is no target to wait for: its message may be
// gone (deleted, purged, replaced, aged out) before the node read it, and
// then no consumer delivers it.

// LastID implements [backend.Syncer]: the id of the last event the stream
// still holds (0: none), asked of the server with one request (the last
// message under the prefix, its body included). It is a message this node
// reads, so a bus waiting for its feed to reach LastID does not wait for a
// message deleted, purged or aged out before the node read it (the
// stream's last sequence would name one); a producer's record, which is
// no event, counts as the event stored with it, the message before it.
// Errors, wrapped: [ErrDisconnected] at once while the connection is down
// (the request would wait out ctx), [ErrStreamLost], [eventbus.ErrClosed]
// after Close, NATS errors.
func (be *Backend) LastID(ctx context.Context) (uint64, error) {
	if err := be.Ready(); err != nil {
		return 0, fmt.Errorf("nats: last id of %q: %w", be.o.stream, err)
	}
	var m *jetstream.RawStreamMsg
	var err error
	for n := 0; ; n++ {
		// Asked of the stream's leader: tried again after an election
		// (leader.go), so that a resume during a failover waits for the
		// new leader rather than fail.
		actx, cancel, retry := be.attempt(ctx, attemptTimeout(n))
		m, err = be.stream.GetLastMsgForSubject(actx, be.o.prefix+".>")
		cancel()
		if unavailable(err) && be.pauseForLeader(ctx) || err != nil && retry() {
			continue
		}
		break
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("nats: last message of %q: %w", be.o.stream, err)
	}
	if be.isProducerSubject(m.Subject) {
		return m.Sequence - 1, nil // the record's event (producer.go)
	}
	return m.Sequence, nil
}

// Ingested returns the highest stream sequence this node's consumer has
// handled (events, producer records, skipped messages alike); the node
// lags while it is below [Backend.LastID]. Safe for concurrent use.
func (be *Backend) Ingested() uint64 { return be.processed.Load() }

// Sync waits until this node has ingested every message its stream held
// when Sync was called (from any node) and still holds, or ctx is done.
// Tests and tools use it to wait for a node that runs behind the others.
//
// It reads the stream's last sequence, then waits for the node's consumer
// to pass it. Messages the node never read may be gone meanwhile or before
// (deleted, purged, replaced, aged out by MaxAge), the last one included,
// and no consumer will deliver them: whenever the node has not moved for a
// while (10 ms, doubling up to 1 s), Sync asks the stream for the first
// message after the last one the node handled, and returns when there is
// none up to that last sequence. A message still held, in flight to the
// node or not yet sent, keeps it waiting. The node's consumer reads every
// subject under the prefix (producer records too), so what the stream
// holds is what the node reads.
//
// Errors, wrapped: ctx's error; [ErrDisconnected] at once while the node's
// connection is down (it cannot read); [ErrStreamLost];
// [eventbus.ErrClosed] after Close; NATS errors of the requests.
func (be *Backend) Sync(ctx context.Context) error {
	if err := be.Ready(); err != nil {
		return fmt.Errorf("nats: sync: %w", err)
	}
	info, err := be.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("nats: stream info of %q: %w", be.o.stream, err)
	}
	last := info.State.LastSeq
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	seen, since, wait := be.processed.Load(), time.Now(), syncRecheck
	for {
		done := be.processed.Load()
		if done >= last {
			return nil
		}
		if err := be.Ready(); err != nil {
			return fmt.Errorf("nats: sync to %d (at %d): %w", last, done, err)
		}
		if done != seen {
			seen, since, wait = done, time.Now(), syncRecheck
		} else if time.Since(since) >= wait {
			// Is anything the node has not read still held?
			m, err := be.stream.GetMsg(ctx, done+1, jetstream.WithGetMsgSubject(be.o.prefix+".>"))
			switch {
			case errors.Is(err, jetstream.ErrMsgNotFound):
				return nil // everything after done is gone
			case err != nil:
				return fmt.Errorf("nats: sync to %d (at %d): first message after %d: %w", last, done, done, err)
			case m.Sequence > last:
				return nil // what is left arrived after the call
			}
			since, wait = time.Now(), min(2*wait, time.Second)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nats: sync to %d (at %d): %w", last, be.processed.Load(), ctx.Err())
		case <-t.C:
		}
	}
}

// syncRecheck is how long Sync lets the node stand still before it asks
// the stream whether what the node waits for is still there.
const syncRecheck = 10 * time.Millisecond
