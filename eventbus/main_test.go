package eventbus_test

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (the bus's expiry
// loop, Events pumps, context watches) and gives the property test its
// default of 1,000 cases unless -rapid.checks or RAPID_CHECKS says otherwise.
func TestMain(m *testing.M) {
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if _, env := os.LookupEnv("RAPID_CHECKS"); !set["rapid.checks"] && !env {
		must(flag.Set("rapid.checks", "1000"))
	}
	// A failure prints its -rapid.seed; do not litter the tree with
	// testdata/rapid fail files unless asked (-rapid.nofailfile=false).
	if !set["rapid.nofailfile"] {
		must(flag.Set("rapid.nofailfile", "true"))
	}
	goleak.VerifyTestMain(m)
}
