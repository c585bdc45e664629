package eventbus_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
)

// TestReviewNextBeforeDeadlineOutsideInt64: a deadline that Unix
// nanoseconds in an int64 cannot hold (after 2262 or before 1678) must mean
// what it says, as it does for context.WithDeadline: one centuries away
// waits (time.Time.UnixNano wrapped it to a past instant, and NextBefore
// returned ErrTimeout at once — a heartbeat loop given "no deadline" as the
// year 3000 spun), one centuries ago is past (it wrapped to a future
// instant, and NextBefore blocked instead of returning ErrTimeout). In a
// synctest bubble, so "returns at once" and "is still waiting" are facts,
// not timings.
func TestReviewNextBeforeDeadlineOutsideInt64(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := newBus(t, eventbus.Options{})
		sub := subscribe(t, bus, "s", eventbus.SubscribeOptions{NoReplay: true})

		for _, past := range []time.Time{time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)} {
			done := make(chan error, 1)
			go func() { _, err := sub.NextBefore(past); done <- err }()
			synctest.Wait()
			select {
			case err := <-done:
				assert.ErrorIs(t, err, eventbus.ErrTimeout, "deadline %v", past)
			default:
				publish(t, bus, "s", 1) // let it go, then fail
				<-done
				t.Errorf("NextBefore(%v) with nothing queued waits instead of returning ErrTimeout", past)
			}
		}

		for _, future := range []time.Time{time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(1<<62, 0)} {
			type result struct {
				ev  eventbus.Event
				err error
			}
			done := make(chan result, 1)
			go func() { ev, err := sub.NextBefore(future); done <- result{ev, err} }()
			synctest.Wait()
			select {
			case r := <-done:
				t.Errorf("NextBefore(%v) with nothing queued returned at once: %v", future, r.err)
				continue
			default:
			}
			id := publish(t, bus, "s", 1)[0]
			r := <-done
			require.NoError(t, r.err)
			assert.Equal(t, id, r.ev.ID)
		}
		sub.Close()
	})
}
