package eventbus_test

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (the bus's expiry
// loop, Events pumps, context watches) and gives the property test its
// default of 1,000 cases of about 60 actions unless -rapid.checks /
// RAPID_CHECKS or -rapid.steps / RAPID_STEPS say otherwise.
func TestMain(m *testing.M) {
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if _, env := os.LookupEnv("RAPID_CHECKS"); !set["rapid.checks"] && !env {
		must(flag.Set("rapid.checks", "1000"))
	}
	// Longer action sequences than rapid's 30: closes, resumes and slow
	// consumers need room to interact.
	if _, env := os.LookupEnv("RAPID_STEPS"); !set["rapid.steps"] && !env {
		must(flag.Set("rapid.steps", "60"))
	}
	// A failure prints its -rapid.seed; do not litter the tree with
	// testdata/rapid fail files unless asked (-rapid.nofailfile=false).
	if _, env := os.LookupEnv("RAPID_NOFAILFILE"); !set["rapid.nofailfile"] && !env {
		must(flag.Set("rapid.nofailfile", "true"))
	}
	goleak.VerifyTestMain(m)
}
