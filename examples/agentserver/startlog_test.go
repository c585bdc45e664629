package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Issue 18.14: the start-up log printed overflow_policy="" when the policy
// was unset; it now says what unset means, and names a set one.
func TestStartupLogNamesOverflowPolicy(t *testing.T) {
	t.Setenv("PORT", "")
	_, logs, stop := startRun(t)
	stop()
	assert.Contains(t, logs.String(), `overflow_policy="unset (drop_oldest in process, drop_subscriber for the SSE and WebSocket streams)"`)
	assert.NotContains(t, logs.String(), `overflow_policy=""`)

	t.Setenv("AGENTPOOL_EVENTBUS_OVERFLOW_POLICY", "drop_newest")
	_, logs, stop = startRun(t)
	stop()
	assert.Contains(t, logs.String(), "overflow_policy=drop_newest")
}
