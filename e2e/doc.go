// Package e2e proves the agentserver example and the SSE adapter with
// clients nobody here wrote: the WHATWG-compliant eventsource package under
// Node.js, Chromium's own EventSource driven by chromedp, and curl; and the
// frontend protocols' encoders (adapters/aisdk, agui, a2a) with those
// protocols' own npm clients (e2e/frontends: ai, @ag-ui/client,
// @a2a-js/sdk).
//
// The tests start the server in-process on a loopback port. Each skips when
// its client is missing, except under CI (the CI environment variable set),
// where a missing client is a failure: .ci/run installs them.
package e2e
