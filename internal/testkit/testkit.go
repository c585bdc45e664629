package testkit

import (
	"context"
	"flag"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/replaybus/replaybus/eventbus"
)

// WaitFor bounds every blocking read of a test (10 s); nothing in the bus
// should take more than a few milliseconds, so reaching it means a frame
// that never came, not a slow machine.
const WaitFor = 10 * time.Second

// NewBus returns a bus made with o, closed when the test ends; it fails the
// test at once if eventbus.New refuses o.
func NewBus(t testing.TB, o eventbus.Options) *eventbus.Bus {
	t.Helper()
	b, err := eventbus.New(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// Subscribe subscribes to session with o (a background context) and closes
// the subscription when the test ends; it fails the test at once if
// Subscribe refuses.
func Subscribe(t testing.TB, b *eventbus.Bus, session string, o eventbus.SubscribeOptions) *eventbus.Subscription {
	t.Helper()
	s, err := b.Subscribe(context.Background(), session, o)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// Next reads one frame of s, failing the test at once when none comes
// within [WaitFor] or the subscription ends.
func Next(t testing.TB, s *eventbus.Subscription) eventbus.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitFor)
	defer cancel()
	ev, err := s.Next(ctx)
	require.NoError(t, err)
	return ev
}

// ReplayIDs returns the ids of the events session's replay buffer holds
// (what a subscriber that joins now is replayed), the bus's own frames
// left out; it fails the test at once if the session does not exist.
func ReplayIDs(t testing.TB, b *eventbus.Bus, session string) []uint64 {
	t.Helper()
	sub, err := b.Subscribe(context.Background(), session, eventbus.SubscribeOptions{RequireSession: true})
	require.NoError(t, err)
	defer sub.Close()
	var ids []uint64
	for {
		ev, ok := sub.TryNext()
		if !ok {
			return ids
		}
		if ev.ID > 0 {
			ids = append(ids, ev.ID)
		}
	}
}

// Rapid is what a package's property tests run by default: Checks cases
// (-rapid.checks) of about Steps actions (-rapid.steps); zero keeps rapid's
// own default (100 cases, 30 steps).
type Rapid struct {
	Checks, Steps int
}

// Main runs a package's tests for its TestMain. It parses the flags, sets
// -rapid.checks and -rapid.steps to r's unless the command line or
// RAPID_CHECKS / RAPID_STEPS give them (or the tests do not use rapid), and
// -rapid.nofailfile unless asked otherwise (a failure prints its -rapid.seed; no testdata/rapid files
// litter the tree), then runs the tests under goleak.VerifyTestMain: a
// package whose tests leave a goroutine behind fails. It does not return.
func Main(m *testing.M, r Rapid) {
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	def := func(name, env, value string) {
		if _, ok := os.LookupEnv(env); set[name] || ok || flag.Lookup(name) == nil {
			return // given, or the package's tests do not link rapid
		}
		if err := flag.Set(name, value); err != nil {
			panic(err)
		}
	}
	if r.Checks > 0 {
		def("rapid.checks", "RAPID_CHECKS", strconv.Itoa(r.Checks))
	}
	if r.Steps > 0 {
		def("rapid.steps", "RAPID_STEPS", strconv.Itoa(r.Steps))
	}
	def("rapid.nofailfile", "RAPID_NOFAILFILE", "true")
	goleak.VerifyTestMain(m)
}

// SubscriberCounts returns how many subscribers were made on each session
// of b that has any, from [eventbus.Bus.Sessions].
func SubscriberCounts(b *eventbus.Bus) map[string]int {
	out := make(map[string]int)
	for _, s := range b.Sessions() {
		if s.Subscribers > 0 {
			out[s.ID] = s.Subscribers
		}
	}
	return out
}
