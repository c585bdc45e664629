package ws_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: a
// connection's reader or pinger, a client stream, a bus.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
