package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus/internal/queue"
	"github.com/replaybus/replaybus/eventbus/observe"
	"github.com/replaybus/replaybus/scope"
)

// subs stands for the delivery side's per-session state.
type subs struct{}

func newTestHistory(t *testing.T) *History[subs] {
	t.Helper()
	return NewHistory[subs](Config{Log: Options{Records: 4}, TTL: 100, ClosedRetention: 50, MaxRetained: 2})
}

// appendTo takes the next id and appends a record of typ to x, as a
// publish does.
func appendTo(h *History[subs], x *Session[subs], typ string, now int64) uint64 {
	r := &queue.Record{Session: x.ID, Type: typ, Nanos: now}
	r.ID = h.NextID()
	h.Append(x, r)
	return r.ID
}

func ids(logs []Log[*queue.Record]) (out []uint64) {
	for _, l := range logs {
		for _, r := range l.AppendAfter(nil, 0) {
			out = append(out, r.ID)
		}
	}
	return out
}

// The tree's shape lives in the history: a session added under a parent,
// a root attached late, the closing order of a cascade (children first,
// siblings by id), and a lookup that needs no lock agree with it.
func TestHistoryTree(t *testing.T) {
	h := newTestHistory(t)
	h.Lock()
	defer h.Unlock()
	root, err := h.Add("root", "", 1)
	require.NoError(t, err)
	b, err := h.Add("b", "root", 1)
	require.NoError(t, err)
	_, err = h.Add("a", "root", 1)
	require.NoError(t, err)
	late, err := h.Add("late", "", 1)
	require.NoError(t, err)
	_, err = h.Add("x", "nope", 1)
	require.ErrorIs(t, err, scope.ErrUnknownParent)

	require.NoError(t, h.Attach(late, "b"))
	require.ErrorIs(t, h.Attach(root, "late"), scope.ErrCycle)
	assert.Equal(t, b, late.Parent())
	assert.Same(t, root.TreeLock(), late.TreeLock(), "one tree, one lock")
	assert.Equal(t, []string{"root", "b", "late"}, late.Path())

	var order []string
	for _, x := range root.Subtree() {
		order = append(order, x.ID)
	}
	assert.Equal(t, []string{"a", "late", "b", "root"}, order)
	got, ok := h.Lookup("late")
	assert.True(t, ok)
	assert.Same(t, late, got)
	assert.Len(t, h.Sessions(), 4)
	info, ok := h.Info("late")
	require.True(t, ok)
	assert.Equal(t, observe.SessionInfo{ID: "late", Parent: "b"}, info)
	_, ok = h.Info("nope")
	assert.False(t, ok)
}

// A closed child's log stays readable for its ancestors' descendants
// scope until the retention passes; the subtree scope is told of it as
// lost; a reopened id takes its log back; a closed root's kept logs go,
// told to the all scope.
func TestHistoryRemoveKeepsLogsForAncestors(t *testing.T) {
	h := newTestHistory(t)
	h.Lock()
	defer h.Unlock()
	root, _ := h.Add("root", "", 1)
	kid, _ := h.Add("kid", "root", 1)
	sib, _ := h.Add("sib", "root", 1)
	appendTo(h, root, "m", 1)
	appendTo(h, kid, "m", 1)
	last := appendTo(h, kid, "session_closed", 2)

	p, kids := h.Remove(kid, 3)
	h.Tombstone("kid", 3)
	assert.Equal(t, root, p)
	assert.Empty(t, kids)
	assert.True(t, h.Tombstoned("kid"))
	assert.Nil(t, h.Get("kid"))

	logs, lost := h.ScopeLogs(root, scope.Descendants, nil)
	assert.Equal(t, []uint64{1, 2, 3}, ids(logs), "the kept log is read with the tree")
	assert.Zero(t, lost)
	_, lost = h.ScopeLogs(sib, scope.Subtree, nil)
	assert.Equal(t, last, lost, "a sibling's subtree scope is told at once")

	// Reopened: the log comes back with it.
	h.Untombstone("kid")
	again, err := h.Add("kid", "root", 4)
	require.NoError(t, err)
	logs, _ = h.ScopeLogs(again, scope.Session, nil)
	assert.Equal(t, []uint64{2, 3}, ids(logs))

	// The root closes: what it holds goes, and the all scope is told.
	h.Remove(again, 5)
	h.Remove(sib, 5)
	h.Remove(root, 5)
	_, lost = h.ScopeLogs(nil, scope.All, nil)
	assert.Equal(t, last, lost)
	assert.Empty(t, h.Sessions())
}

// Expire removes idle leaves only, forgets lost marks and tombstones
// after the TTL, and an id added again after its lost mark is forgotten
// still reports what was forgotten as evicted.
func TestHistoryExpire(t *testing.T) {
	h := newTestHistory(t)
	h.Lock()
	defer h.Unlock()
	p, _ := h.Add("p", "", 0)
	c, _ := h.Add("c", "p", 0)
	busy, _ := h.Add("busy", "", 0)
	busy.AddSubscribers(1)
	id := appendTo(h, c, "m", 0)

	gone := h.Expire(100)
	require.Len(t, gone, 1, "only the idle leaf goes first")
	assert.Equal(t, "c", gone[0].ID)
	assert.Equal(t, []*Session[subs]{p}, h.Expire(100), "then its parent, now a leaf")
	assert.Nil(t, h.Get("p"))
	assert.NotNil(t, h.Get("busy"), "a session with a subscriber never expires")

	again, err := h.Add("c", "", 150)
	require.NoError(t, err)
	logs, _ := h.ScopeLogs(again, scope.Session, nil)
	assert.Equal(t, id, logs[0].HighestEvicted(), "the id's earlier life is evicted, not silently gone")
	assert.Equal(t, []*Session[subs]{again}, h.Expire(300), "idle again; its lost mark is forgotten…")
	fresh, err := h.Add("d", "", 301)
	require.NoError(t, err)
	logs, _ = h.ScopeLogs(fresh, scope.Session, nil)
	assert.Equal(t, id, logs[0].HighestEvicted(), "…and counts for every new id after it")
}

// A session's producers' records are bounded and kept with it.
func TestHistoryProducers(t *testing.T) {
	h := newTestHistory(t)
	h.Lock()
	defer h.Unlock()
	x, _ := h.Add("s", "", 0)
	_, ok := x.Producer("p")
	assert.False(t, ok)
	x.SetProducer("p", ProducerRecord{Rev: 7})
	rec, ok := x.Producer("p")
	require.True(t, ok)
	assert.Equal(t, uint64(7), rec.Rev)
	assert.Equal(t, 1, x.Producers())
}
