package backoff

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDelay(t *testing.T) {
	t.Parallel()
	const s = time.Second
	for _, tc := range []struct {
		name                 string
		base, ceiling, floor time.Duration
		doublings            int
		lo, hi               time.Duration
	}{
		{"first attempt", s, 30 * s, 0, 0, s / 2, s},
		{"doubled twice", s, 30 * s, 0, 2, 2 * s, 4 * s},
		{"capped by the ceiling", s, 30 * s, 0, 10, 15 * s, 30 * s},
		{"ceiling below base keeps base", 4 * s, s, 0, 3, 2 * s, 4 * s},
		{"negative doublings", s, 30 * s, 0, -1, s / 2, s},
		{"Retry-After is a floor", s, 30 * s, 5 * s, 0, 5 * s, 5*s + 5*s/2},
		{"floor below the backoff", s, 30 * s, s, 3, s, s + 4*s},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			seen := map[time.Duration]bool{}
			for range 200 {
				d := Delay(tc.base, tc.ceiling, tc.doublings, tc.floor)
				assert.GreaterOrEqual(t, d, tc.lo)
				assert.LessOrEqual(t, d, tc.hi)
				seen[d] = true
			}
			assert.Greater(t, len(seen), 100, "the wait is spread, not one instant")
		})
	}
}
