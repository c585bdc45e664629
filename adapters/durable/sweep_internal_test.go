package durable

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/eventbus"
)

// The handler forgets what nobody can read any more without a request for
// it: a stream past its TTL, a record of another route's session the bus
// expired, a closed stream unseen for the bus's SessionTTL. A live stream
// stays.
func TestSweepDropsUnreadableRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus, err := eventbus.New(eventbus.Options{SessionTTL: time.Minute})
		require.NoError(t, err)
		defer bus.Close()
		h, err := NewHandler(bus, HandlerOptions{})
		require.NoError(t, err)
		do := func(method, name string, hdr ...string) int {
			r := httptest.NewRequest(method, Pattern+name, nil)
			for i := 0; i+1 < len(hdr); i += 2 {
				r.Header.Set(hdr[i], hdr[i+1])
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w.Code
		}
		require.Equal(t, http.StatusCreated, do(http.MethodPut, "ttl", "Stream-TTL", "1"))
		require.Equal(t, http.StatusCreated, do(http.MethodPut, "closed", "Stream-Closed", "true"))
		require.Equal(t, http.StatusCreated, do(http.MethodPut, "live"))
		_, err = bus.Publish("other", "tick", nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, do(http.MethodHead, "other"))
		require.Equal(t, 4, h.streams.Size())

		time.Sleep(2 * time.Second)
		do(http.MethodHead, "live")
		_, ok := h.streams.Load("ttl")
		assert.False(t, ok, "the TTL passed")
		assert.Equal(t, 3, h.streams.Size())

		// Past the bus's SessionTTL: it expired the idle sessions "other" and
		// "live"; "closed" was not seen for as long.
		time.Sleep(2 * time.Minute)
		bus.ExpireIdle()
		h.maybeSweep()
		for _, name := range []string{"other", "closed", "live"} {
			_, ok := h.streams.Load(name)
			assert.Equal(t, name == "live", ok, name)
		}
	})
}
