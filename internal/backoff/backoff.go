package backoff

import (
	"math/rand/v2"
	"time"
)

// Delay returns the wait before the next connect: base doubled doublings
// times (negative counts as 0) but never above max(ceiling, base), then
// jittered uniformly in [d/2, d]. A positive floor (a Retry-After) makes
// the result floor plus a jitter in [0, max(d, floor)/2]. base must be
// positive; a non-positive ceiling means base.
func Delay(base, ceiling time.Duration, doublings int, floor time.Duration) time.Duration {
	d := base
	for i := 0; i < doublings && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, max(ceiling, base))
	if floor > 0 {
		return floor + rand.N(max(d, floor)/2+1)
	}
	return d/2 + rand.N(d/2+1)
}
