package eventbus

// SetTestHookTreeLocked sets (nil: clears) the hook a publish runs inside
// its tree-locked section, right after taking the id (see
// testHookTreeLocked), for the tests of package eventbus_test. Call it only
// from a test that does not run in parallel with others.
func SetTestHookTreeLocked(f func(session string)) { testHookTreeLocked = f }

// SetTestHookWake sets (nil: clears) the hook run on every wake-up of a
// parked consumer (see testHookWake), for the benchmarks of package
// eventbus_test. Call it only while no other test publishes.
func SetTestHookWake(f func()) { testHookWake = f }

// TextCoalescer is the interface a compacting bus looks for on its rule
// set (textCoalescer), for the tests of package eventbus_test.
type TextCoalescer = textCoalescer
