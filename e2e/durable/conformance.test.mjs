// The Durable Streams conformance suite, run by e2e/durable_test.go against
// the example server's Durable Streams route (DURABLE_BASE_URL, its root).
import { runConformanceTests } from "@durable-streams/server-conformance-tests"

runConformanceTests({
  baseUrl: process.env.DURABLE_BASE_URL,
  longPollTimeoutMs: Number(process.env.DURABLE_LONG_POLL_MS || 20000),
  subscriptions: process.env.DURABLE_SUBSCRIPTIONS === "1",
})
