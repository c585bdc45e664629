// Command testsummary runs go test and prints what a plain go test prints —
// each package's ok or FAIL line, the output of failing tests, build errors —
// followed by the tests that were skipped and why, which a plain go test
// hides, and one closing line that counts the test results (subtests and
// examples included): "tests: N passed, N failed, N skipped". `make test`
// runs it:
//
//	go run ./internal/testsummary [-go go] [go test flags] packages…
//
// It runs `go test -json` with the given arguments, passes go test's stderr
// through, and exits with go test's exit status (1 when go test could not be
// run, or reported a failure yet exited 0).
package main
