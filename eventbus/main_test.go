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
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if _, env := os.LookupEnv("RAPID_CHECKS"); !set && !env && flag.Lookup("rapid.checks") != nil {
		if err := flag.Set("rapid.checks", "1000"); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}
