// Package testkit holds the test helpers that the tests of more than one
// package need, written once: a bus and a subscription that are closed when
// the test ends, a read bounded by [WaitFor], and the TestMain that fails a
// package whose tests leave a goroutine behind and sets its property tests'
// defaults. Only tests import it.
package testkit
