package eventbus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
	"github.com/replaybus/replaybus/eventbus/frame"
	"github.com/replaybus/replaybus/internal/testkit"
)

// waitFor bounds every blocking read of a test; nothing in the bus should
// take more than a few milliseconds.
const waitFor = testkit.WaitFor

// newBus returns a bus closed at the end of the test; subscribe subscribes
// and closes the subscription at the end of the test; next reads one frame,
// failing the test when none comes in time. The coalesce tests use the
// same ones.
var (
	newBus    = testkit.NewBus
	subscribe = testkit.Subscribe
	next      = testkit.Next
)

// publish publishes n events of type "msg" with data {"n":i} to session and
// returns their ids.
func publish(t testing.TB, b *eventbus.Bus, session string, n int) []uint64 {
	t.Helper()
	ids := make([]uint64, 0, n)
	for i := 0; i < n; i++ {
		ev, err := b.Publish(session, "msg", map[string]int{"n": i})
		require.NoError(t, err)
		ids = append(ids, ev.ID)
	}
	return ids
}

// readN reads n frames.
func readN(t testing.TB, s *eventbus.Subscription, n int) []eventbus.Event {
	t.Helper()
	out := make([]eventbus.Event, 0, n)
	for len(out) < n {
		out = append(out, next(t, s))
	}
	return out
}

// drain returns every frame queued now, without blocking.
func drain(s *eventbus.Subscription) []eventbus.Event {
	var out []eventbus.Event
	for {
		ev, ok := s.TryNext()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

// readToEnd reads until the subscription ends and returns the frames and
// the end reason.
func readToEnd(t testing.TB, s *eventbus.Subscription) ([]eventbus.Event, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var out []eventbus.Event
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			require.NotErrorIs(t, err, context.DeadlineExceeded, "subscription did not end; read %v", describe(out))
			return out, err
		}
		out = append(out, ev)
	}
}

// ids returns the ids of the real events among evs.
func ids(evs []eventbus.Event) []uint64 {
	out := []uint64{}
	for _, e := range evs {
		if e.ID != 0 {
			out = append(out, e.ID)
		}
	}
	return out
}

// seq returns lo, lo+1, …, hi.
func seq(lo, hi uint64) []uint64 {
	out := []uint64{}
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

// describe renders frames compactly for table comparisons: a real event is
// its id ("7"), with "r" when replayed ("7r") and ":type" unless it is
// "msg"; a synthetic frame is its type, with the reason for resync frames
// ("state_resync_required:ring_evicted").
func describe(evs []eventbus.Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		var s string
		switch {
		case e.ID != 0:
			s = fmt.Sprint(e.ID)
			if e.Replay {
				s += "r"
			}
			if e.Type != "msg" {
				s += ":" + e.Type
			}
		case e.Type == frame.TypeStateResyncRequired:
			s = e.Type + ":" + decode[frame.ResyncData](nil, e).Reason
		default:
			s = e.Type
		}
		out = append(out, s)
	}
	return out
}

// decode unmarshals a frame's data. t may be nil (panics on error).
func decode[T any](t testing.TB, e eventbus.Event) T {
	var v T
	if err := json.Unmarshal(e.Data, &v); err != nil {
		if t == nil {
			panic(err)
		}
		t.Helper()
		require.NoError(t, err, "decoding %s frame %s", e.Type, e.Data)
	}
	return v
}

// find returns the first frame of type typ among evs.
func find(t testing.TB, evs []eventbus.Event, typ string) eventbus.Event {
	t.Helper()
	for _, e := range evs {
		if e.Type == typ {
			return e
		}
	}
	require.Failf(t, "frame missing", "no %s frame in %v", typ, describe(evs))
	return eventbus.Event{}
}

// count returns how many frames of type typ are among evs.
func count(evs []eventbus.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// payload returns a JSON string value whose encoding is exactly size bytes.
func payload(size int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("x", size-2) + `"`)
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// ended reports whether s has ended (Done closed).
func ended(s *eventbus.Subscription) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}

// waitEnded waits until s has ended.
func waitEnded(t testing.TB, s *eventbus.Subscription) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(waitFor):
		require.FailNow(t, "subscription did not end")
	}
}

// diagRecord is one record of Options.Diagnostics, its attributes read
// back.
type diagRecord struct {
	Kind       string // the message without "eventbus: "
	Session    string
	Subscriber uint64
	Name       string
	EventID    uint64
	EventType  string
	Queue      frame.QueueFigures
}

// diagRecorder is a slog.Handler that keeps every Options.Diagnostics
// record; safe for concurrent use.
type diagRecorder struct {
	mu   sync.Mutex
	recs []diagRecord
}

func (d *diagRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (d *diagRecorder) WithAttrs([]slog.Attr) slog.Handler       { return d }
func (d *diagRecorder) WithGroup(string) slog.Handler            { return d }
func (d *diagRecorder) Handle(_ context.Context, r slog.Record) error {
	x := diagRecord{Kind: strings.TrimPrefix(r.Message, "eventbus: ")}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "session":
			x.Session = a.Value.String()
		case "subscriber":
			x.Subscriber = a.Value.Uint64()
		case "name":
			x.Name = a.Value.String()
		case "event_id":
			x.EventID = a.Value.Uint64()
		case "event_type":
			x.EventType = a.Value.String()
		case "queue_size":
			x.Queue.QueueSize = int(a.Value.Int64())
		case "max_queued":
			x.Queue.MaxQueued = int(a.Value.Int64())
		case "queued_bytes":
			x.Queue.QueuedBytes = a.Value.Int64()
		case "max_queued_bytes":
			x.Queue.MaxQueuedBytes = a.Value.Int64()
		}
		return true
	})
	d.mu.Lock()
	d.recs = append(d.recs, x)
	d.mu.Unlock()
	return nil
}

// all returns the records so far.
func (d *diagRecorder) all() []diagRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]diagRecord(nil), d.recs...)
}
