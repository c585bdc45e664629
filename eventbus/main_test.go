package eventbus_test

import (
	"testing"

	"github.com/replaybus/replaybus/internal/testkit"
)

// TestMain checks that no test leaves a goroutine behind (the bus's expiry
// loop, Events pumps, context watches) and gives the property test its
// default of 1,000 cases of about 60 actions — longer action sequences than
// rapid's 30: closes, resumes and slow consumers need room to interact —
// unless -rapid.checks / RAPID_CHECKS or -rapid.steps / RAPID_STEPS say
// otherwise.
func TestMain(m *testing.M) { testkit.Main(m, testkit.Rapid{Checks: 1000, Steps: 60}) }
