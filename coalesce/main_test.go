package coalesce_test

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind and gives the
// property test 500 cases unless -rapid.checks / RAPID_CHECKS say
// otherwise; it writes no testdata/rapid fail files unless asked
// (-rapid.nofailfile=false).
func TestMain(m *testing.M) {
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if _, env := os.LookupEnv("RAPID_CHECKS"); !set["rapid.checks"] && !env {
		must(flag.Set("rapid.checks", "500"))
	}
	if _, env := os.LookupEnv("RAPID_NOFAILFILE"); !set["rapid.nofailfile"] && !env {
		must(flag.Set("rapid.nofailfile", "true"))
	}
	goleak.VerifyTestMain(m)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
