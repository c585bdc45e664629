package eventbus_test

import (
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
)

// Idle sessions expire after the TTL by the bus's own goroutine; a
// subscriber or a child keeps a session alive. Runs on synctest's clock.
func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		diags := &diagRecorder{}
		b := newBus(t, eventbus.Options{SessionTTL: time.Second, Diagnostics: slog.New(diags)})
		publish(t, b, "idle", 1)
		publish(t, b, "watched", 1)
		s := subscribe(t, b, "watched", eventbus.SubscribeOptions{})
		require.NoError(t, b.CreateSession("parent", ""))
		require.NoError(t, b.CreateSession("child", "parent"))

		time.Sleep(900 * time.Millisecond)
		synctest.Wait()
		assert.True(t, b.SessionExists("idle"), "not idle for the TTL yet")

		time.Sleep(600 * time.Millisecond)
		synctest.Wait()
		assert.False(t, b.SessionExists("idle"))
		assert.False(t, b.SessionExists("child"))
		assert.True(t, b.SessionExists("watched"), "a subscriber keeps it")
		// The parent outlives its child by at most one sweep (TTL/4).
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		assert.False(t, b.SessionExists("parent"))

		// An expired id is free again: a new session.
		ev, err := b.Publish("idle", "msg", nil)
		require.NoError(t, err)
		assert.Equal(t, uint64(3), ev.ID)

		s.Close()
		time.Sleep(900 * time.Millisecond)
		synctest.Wait()
		assert.True(t, b.SessionExists("watched"), "idle for less than the TTL since its last subscriber left")
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		assert.False(t, b.SessionExists("watched"))
		assert.False(t, b.SessionExists("idle"))
		st := b.Stats()
		assert.Equal(t, uint64(5), st.Expired)
		assert.Zero(t, st.Sessions)
		assert.Empty(t, b.Sessions())
		var kinds []string
		for _, d := range diags.all() {
			kinds = append(kinds, d.Kind)
		}
		assert.Contains(t, kinds, "session_expired")
	})
}
