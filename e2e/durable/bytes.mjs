// Reads a Durable Stream live over SSE from its tail with npm
// @durable-streams/client until it holds <n> bytes, and prints them as
// hex, as e2e/durable_charset_test.go drives it: the bytes come in the SSE
// answer's data events, not in a catch-up read.
//
//   node bytes.mjs <stream url> <n>
import { stream } from "@durable-streams/client"

const [url, nArg] = process.argv.slice(2)
const n = Number(nArg)
const res = await stream({ url, offset: "now", live: "sse", warnOnHttp: false })
const got = []
res.subscribeBytes(({ data }) => {
  got.push(...data)
  if (got.length >= n) {
    process.stdout.write(Buffer.from(got).toString("hex") + "\n")
    process.exit(0)
  }
})
setTimeout(() => { process.stdout.write("timeout " + Buffer.from(got).toString("hex") + "\n"); process.exit(1) }, 30000)
