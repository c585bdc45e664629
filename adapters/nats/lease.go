package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/replaybus/replaybus/eventbus/backend"
)

// Leases (backend.LeaseBackend) over a JetStream key-value bucket, one
// per bus beside its stream: <stream>_LEASES. The bucket is made with a
// LimitMarkerTTL, which lets a message carry its own TTL (Nats-TTL,
// NATS server 2.11+) and makes the server write a delete marker when a
// key's last message expires — a marker every watcher reads, in order
// with the other keys' changes. Keys:
//
//	n.<node>                  the node's liveness: TTL = the lease, renewed every lease/4
//	t.<node>.<session>.<turn> a turn the node runs (no TTL)
//	p.<node>.<session>        the node's part of the session's presence (no TTL)
//
// (session and turn ids escaped as subject tokens, with '=' for '%').
// Only the node's key expires: one renewal per node, however many turns
// and sessions it holds. Every node watches the whole bucket and keeps
// the map of who holds what. When a node's key goes — its marker (the
// node was killed or cut off for a lease: no renewal), or the purge its
// graceful Close writes — every other node reports each of its turns to
// its bus (Feed.TurnLost: the first turn_end{producer_lost} is stored,
// any other is refused by the log) and drops its presence parts
// (Feed.Presence with nil), then purges those keys, each under a revision
// check so that only one node's purge lands. A node that starts reads the
// whole bucket before Start returns: it gets every live part, and treats
// the turns and parts of a node without a key as that node's death.
//
// Timing: a node killed at K renewed after K - lease/4; its key expires a
// lease after that renewal (the server's expiry timer fires at the next
// TTL; its wheel has 1 s slots, so allow up to a second more), and the
// marker reaches the watchers in milliseconds: producer_lost is stored
// ¾ lease to a lease (+ up to 1 s) after the kill, inside the 2 × lease
// the bus promises for leases from 2 s (docs/distributed.md, "Turns and
// presence across nodes"). A node whose own key expired while it lived (stalled for a
// lease, cut off from NATS) learns it from the marker: it writes its key
// again and shares its presence parts again; its turns were ended for it.

// leaseBucketSuffix names the bucket of a stream's leases.
const leaseBucketSuffix = "_LEASES"

// leaseMarkerTTL is how long the bucket keeps expiry markers and purges:
// a watcher disconnected for less than that reads them when it resumes.
const leaseMarkerTTL = 10 * time.Minute

// leaseRef is what a key names: its kind ('n', 't', 'p'), the node, the
// session and the turn.
type leaseRef struct {
	kind          byte
	node, session string
	turn          string
}

// leaseHeld is one key in the watcher's map, with its revision (for the
// purge under a revision check).
type leaseHeld struct {
	ref leaseRef
	rev uint64
}

// leaseTurnValue is a turn key's value (for people reading the bucket).
type leaseTurnValue struct {
	Session string `json:"session"`
	Turn    string `json:"turn"`
}

// leases is a node's side of the bucket.
type leases struct {
	be     *Backend
	kv     jetstream.KeyValue
	bucket string
	node   string
	lease  time.Duration
	log    *slog.Logger

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	feed    backend.Feed
	closing bool
	own     map[string][]byte               // this node's part keys → value, to share again after an expiry
	turns   map[string]bool                 // this node's turn keys
	live    map[string]bool                 // nodes with a key
	held    map[string]map[string]leaseHeld // node → turn and part keys
	synced  bool                            // the watcher read the whole bucket
	renewed chan struct{}                   // the node's key must be written again now
}

// newLeases makes or updates the bucket of be's stream.
func newLeases(ctx context.Context, be *Backend, lease time.Duration) (*leases, error) {
	bucket := be.o.stream + leaseBucketSuffix
	kv, err := be.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         bucket,
		Description:    "replaybus leases: nodes, the turns they run, their parts of presence",
		History:        1,
		Storage:        be.o.storage,
		Replicas:       be.o.replicas,
		LimitMarkerTTL: leaseMarkerTTL,
	})
	if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
		// A server before 2.11: no per-message TTL, so no leases. The
		// node runs without them (turns and presence stay per node).
		be.log.Warn("replaybus/nats: the NATS server has no per-message TTL (2.11+): no turn leases, presence not shared",
			slog.String("bucket", bucket))
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("nats: creating or updating lease bucket %q (%d replicas; per-message TTL needs NATS server 2.11+): %w",
			bucket, be.o.replicas, err)
	}
	l := &leases{be: be, kv: kv, bucket: bucket, node: nuid.Next(), lease: lease, log: be.log,
		own: map[string][]byte{}, turns: map[string]bool{}, live: map[string]bool{}, held: map[string]map[string]leaseHeld{},
		renewed: make(chan struct{}, 1)}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l, nil
}

// keyToken escapes an id into a key token: escapeToken's %XX as =XX (a
// key may not hold '%'; '=' is no byte escapeToken keeps).
func keyToken(id string) string { return strings.ReplaceAll(escapeToken(id), "%", "=") }

func unkeyToken(tok string) (string, error) {
	if strings.Contains(tok, "%") {
		return "", fmt.Errorf("%w: %q", errBadToken, tok)
	}
	return unescapeToken(strings.ReplaceAll(tok, "=", "%"))
}

func (l *leases) nodeKey() string { return "n." + l.node }

func (l *leases) turnKey(session, turn string) string {
	return "t." + l.node + "." + keyToken(session) + "." + keyToken(turn)
}

func (l *leases) partKey(session string) string {
	return "p." + l.node + "." + keyToken(session)
}

// parseLeaseKey reads a key of the bucket; false for one it does not know.
func parseLeaseKey(key string) (leaseRef, bool) {
	tok := strings.Split(key, ".")
	var r leaseRef
	var err error
	switch {
	case len(tok) == 2 && tok[0] == "n":
		return leaseRef{kind: 'n', node: tok[1]}, true
	case len(tok) == 4 && tok[0] == "t":
		r = leaseRef{kind: 't', node: tok[1]}
		if r.session, err = unkeyToken(tok[2]); err == nil {
			r.turn, err = unkeyToken(tok[3])
		}
	case len(tok) == 3 && tok[0] == "p":
		r = leaseRef{kind: 'p', node: tok[1]}
		r.session, err = unkeyToken(tok[2])
	default:
		return r, false
	}
	return r, err == nil
}

// start writes the node's key, then reads the whole bucket (every live
// part reaches feed before it returns; ctx bounds it) and keeps watching
// it, and renews the key until close.
func (l *leases) start(ctx context.Context, feed backend.Feed) error {
	l.mu.Lock()
	l.feed = feed
	l.mu.Unlock()
	if err := l.renew(ctx); err != nil {
		return fmt.Errorf("nats: writing the node's lease in %q: %w", l.bucket, err)
	}
	w, err := l.kv.WatchAll(l.ctx)
	if err != nil {
		return fmt.Errorf("nats: watching lease bucket %q: %w", l.bucket, err)
	}
	synced := make(chan struct{})
	l.wg.Add(2)
	go l.watch(w, synced)
	go l.keepAlive()
	select {
	case <-synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("nats: reading lease bucket %q: %w", l.bucket, ctx.Err())
	}
}

// renew writes the node's key with the lease as its TTL.
func (l *leases) renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.be.o.publishTimeout)
	defer cancel()
	_, err := l.be.js.Publish(ctx, "$KV."+l.bucket+"."+l.nodeKey(), []byte(l.node), jetstream.WithMsgTTL(l.lease))
	return err
}

// keepAlive renews the node's key every lease/4 (at once when the watcher
// saw it expire), a failed renewal again after 100 ms.
func (l *leases) keepAlive() {
	defer l.wg.Done()
	every := l.lease / 4
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		again := false
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		case <-l.renewed:
			again = true
		}
		wait := every
		if err := l.renew(l.ctx); err != nil {
			if l.ctx.Err() != nil {
				return
			}
			l.log.Warn("replaybus/nats: renewing the node's lease", slog.String("bucket", l.bucket), slog.Any("err", err))
			wait = 100 * time.Millisecond
		} else if again {
			l.reshare()
		}
		t.Reset(wait)
	}
}

// reshare writes this node's presence parts again: its key had expired,
// and the other nodes dropped them.
func (l *leases) reshare() {
	l.mu.Lock()
	parts := make(map[string][]byte, len(l.own))
	for k, v := range l.own {
		parts[k] = v
	}
	l.mu.Unlock()
	for k, v := range parts {
		ctx, cancel := context.WithTimeout(l.ctx, l.be.o.publishTimeout)
		_, _ = l.kv.Put(ctx, k, v)
		cancel()
	}
}

// watch applies the bucket's changes until close; it closes synced once
// it has read the whole bucket.
func (l *leases) watch(w jetstream.KeyWatcher, synced chan struct{}) {
	defer l.wg.Done()
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-l.ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				l.sync()
				close(synced)
				continue
			}
			l.apply(e)
		}
	}
}

// leaseAction is what the watcher tells the feed, outside l.mu.
type leaseAction struct {
	lost    []leaseRef // turns whose node went
	parts   []leaseRef // parts that went (Presence nil)
	part    *leaseRef  // a part that changed
	value   []byte
	cleanup []leaseHeld // keys of a node that went, to purge
}

// apply takes one change of the bucket.
func (l *leases) apply(e jetstream.KeyValueEntry) {
	ref, ok := parseLeaseKey(e.Key())
	if !ok {
		return
	}
	put := e.Operation() == jetstream.KeyValuePut
	var a leaseAction
	l.mu.Lock()
	switch ref.kind {
	case 'n':
		if put {
			l.live[ref.node] = true
			break
		}
		delete(l.live, ref.node)
		if ref.node == l.node {
			if !l.closing {
				// Expired while this node lives: write it again.
				select {
				case l.renewed <- struct{}{}:
				default:
				}
			}
			break
		}
		if l.synced {
			l.goneLocked(ref.node, &a)
		}
	default:
		keys := l.held[ref.node]
		if put {
			if keys == nil {
				keys = map[string]leaseHeld{}
				l.held[ref.node] = keys
			}
			keys[e.Key()] = leaseHeld{ref: ref, rev: e.Revision()}
			if ref.kind == 'p' && ref.node != l.node {
				a.part, a.value = &ref, e.Value()
			}
			if l.synced && !l.live[ref.node] && ref.node != l.node {
				// Written by a node whose lease is gone (it wrote just
				// before it died): gone with it.
				l.goneLocked(ref.node, &a)
			}
			break
		}
		if _, ok := keys[e.Key()]; ok {
			delete(keys, e.Key())
			if len(keys) == 0 {
				delete(l.held, ref.node)
			}
			if ref.kind == 'p' && ref.node != l.node {
				a.parts = append(a.parts, ref)
			}
		}
	}
	feed := l.feed
	l.mu.Unlock()
	l.act(feed, a)
}

// sync ends the watcher's first read: the turns and parts of nodes
// without a key are gone.
func (l *leases) sync() {
	var a leaseAction
	l.mu.Lock()
	l.synced = true
	for node := range l.held {
		if !l.live[node] && node != l.node {
			l.goneLocked(node, &a)
		}
	}
	feed := l.feed
	l.mu.Unlock()
	l.act(feed, a)
}

// goneLocked takes node's turns and parts out of the map into a. l.mu is
// held.
func (l *leases) goneLocked(node string, a *leaseAction) {
	for _, h := range l.held[node] {
		if h.ref.kind == 't' {
			a.lost = append(a.lost, h.ref)
		} else {
			a.parts = append(a.parts, h.ref)
		}
		a.cleanup = append(a.cleanup, h)
	}
	delete(l.held, node)
}

// act hands a to the feed and purges the keys of a node that went.
func (l *leases) act(feed backend.Feed, a leaseAction) {
	if feed == nil {
		return
	}
	if a.part != nil {
		feed.Presence(a.part.node, a.part.session, a.value)
	}
	for _, r := range a.parts {
		feed.Presence(r.node, r.session, nil)
	}
	for _, r := range a.lost {
		feed.TurnLost(r.session, r.turn)
	}
	if len(a.cleanup) == 0 {
		return
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for _, h := range a.cleanup {
			key := keyOf(h.ref)
			// Under the revision this node saw: one node's purge lands,
			// the others' fail; a key written again meanwhile stays.
			ctx, cancel := context.WithTimeout(l.ctx, l.be.o.publishTimeout)
			_ = l.kv.Purge(ctx, key, jetstream.LastRevision(h.rev), jetstream.PurgeTTL(leaseMarkerTTL))
			cancel()
		}
	}()
}

// keyOf is the key r names.
func keyOf(r leaseRef) string {
	switch r.kind {
	case 't':
		return "t." + r.node + "." + keyToken(r.session) + "." + keyToken(r.turn)
	case 'p':
		return "p." + r.node + "." + keyToken(r.session)
	}
	return "n." + r.node
}

// holdTurn writes the key of turn of session.
func (l *leases) holdTurn(ctx context.Context, session, turn string) error {
	v, _ := json.Marshal(leaseTurnValue{Session: session, Turn: turn})
	key := l.turnKey(session, turn)
	l.mu.Lock()
	l.turns[key] = true
	l.mu.Unlock()
	_, err := l.kv.Put(ctx, key, v)
	return err
}

// releaseTurn purges the key of turn of session.
func (l *leases) releaseTurn(ctx context.Context, session, turn string) error {
	key := l.turnKey(session, turn)
	l.mu.Lock()
	delete(l.turns, key)
	l.mu.Unlock()
	return l.purge(ctx, key)
}

// sharePart writes (or, for nil, purges) this node's part of session.
func (l *leases) sharePart(ctx context.Context, session string, part []byte) error {
	key := l.partKey(session)
	l.mu.Lock()
	if part == nil {
		delete(l.own, key)
	} else {
		l.own[key] = part
	}
	l.mu.Unlock()
	if part == nil {
		return l.purge(ctx, key)
	}
	_, err := l.kv.Put(ctx, key, part)
	return err
}

// purge drops key, its purge marker kept leaseMarkerTTL.
func (l *leases) purge(ctx context.Context, key string) error {
	return l.kv.Purge(ctx, key, jetstream.PurgeTTL(leaseMarkerTTL))
}

// close drops the node's keys — its turns, its parts, then its own key —
// bounded by the publish timeout (not tried while the connection is down),
// and stops the watcher and the renewals.
func (l *leases) close() {
	l.mu.Lock()
	l.closing = true
	var keys []string
	for k := range l.turns {
		keys = append(keys, k)
	}
	for k := range l.own {
		keys = append(keys, k)
	}
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
	if l.be.nc.Status() != nats.CONNECTED {
		// Over a connection that is down each purge would wait out the
		// publish timeout; the keys expire with their lease instead, and
		// the other nodes write producer_lost as for a node that died.
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.be.o.publishTimeout)
	defer cancel()
	seen := map[string]bool{}
	for _, k := range append(keys, l.nodeKey()) {
		if seen[k] {
			continue
		}
		seen[k] = true
		if err := l.purge(ctx, k); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			l.log.Debug("replaybus/nats: dropping a lease", slog.String("key", k), slog.Any("err", err))
		}
	}
}

// HoldTurn implements [backend.LeaseBackend]: it writes the key of turn
// of session under this node (t.<node>.<session>.<turn> in the lease
// bucket), alive while the node's own key is renewed (every lease/4, with
// the lease of eventbus.Options.TurnLease given to [NewBackend]; the lease
// argument is that same value). Once the node stops renewing, every other
// node calls Feed.TurnLost about a lease later (within 2 × lease). Errors, wrapped: NATS
// errors, ctx's.
func (be *Backend) HoldTurn(ctx context.Context, session, turn string, _ time.Duration) error {
	if be.leases == nil {
		return nil // a server before 2.11 (see NewBackend)
	}
	if err := be.leases.holdTurn(ctx, session, turn); err != nil {
		return fmt.Errorf("nats: holding turn %q of session %q in %q: %w", turn, session, be.leases.bucket, err)
	}
	return nil
}

// ReleaseTurn implements [backend.LeaseBackend]: it purges the turn's key.
// Errors, wrapped: NATS errors, ctx's.
func (be *Backend) ReleaseTurn(ctx context.Context, session, turn string) error {
	if be.leases == nil {
		return nil
	}
	if err := be.leases.releaseTurn(ctx, session, turn); err != nil {
		return fmt.Errorf("nats: releasing turn %q of session %q in %q: %w", turn, session, be.leases.bucket, err)
	}
	return nil
}

// SharePresence implements [backend.LeaseBackend]: it writes this node's
// part of session's presence (p.<node>.<session>; nil purges it), which
// every other node's watcher hands to its Feed.Presence within
// milliseconds; a node that starts later reads every part before Start
// returns. The part lives while the node's key does. Errors, wrapped: NATS
// errors, ctx's.
func (be *Backend) SharePresence(ctx context.Context, session string, part []byte, _ time.Duration) error {
	if be.leases == nil {
		return nil
	}
	if err := be.leases.sharePart(ctx, session, part); err != nil {
		return fmt.Errorf("nats: sharing presence of session %q in %q: %w", session, be.leases.bucket, err)
	}
	return nil
}

// Node returns this node's id in the lease bucket (22 characters of
// [A-Za-z0-9], new for every backend): the <node> of its keys; "" on a
// NATS server before 2.11, where the node runs without leases.
func (be *Backend) Node() string {
	if be.leases == nil {
		return ""
	}
	return be.leases.node
}
