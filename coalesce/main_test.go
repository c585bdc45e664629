package coalesce_test

import (
	"testing"

	"github.com/replaybus/replaybus/internal/testkit"
)

// TestMain checks that no test leaves a goroutine behind and gives the
// property test 500 cases unless -rapid.checks / RAPID_CHECKS say
// otherwise; it writes no testdata/rapid fail files unless asked
// (-rapid.nofailfile=false).
func TestMain(m *testing.M) { testkit.Main(m, testkit.Rapid{Checks: 500}) }
