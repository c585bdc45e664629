package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Review: -demo-rate NaN or +Inf made every demo delay zero (each run was
// published at once), and a zero or negative rate silently meant the
// default. Each is now a usage error naming the value, before anything
// listens.
func TestReviewDemoRateRefusesNonPositiveAndNonFinite(t *testing.T) {
	t.Setenv("PORT", "")
	for _, v := range []string{"NaN", "+Inf", "-Inf", "0", "-5", "100001"} {
		var out syncBuffer
		err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-demo", "-demo-rate", v}, &out, nil)
		if assert.Error(t, err, v) {
			assert.Equal(t, 2, report(err, &out), v)
			assert.Contains(t, out.String(), "invalid -demo-rate", v)
			assert.Contains(t, out.String(), "-demo-rate "+v+" ", "the message names the value")
		}
	}
}
