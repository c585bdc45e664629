// Reads a replaybus session as a Durable Stream with the npm
// @durable-streams/client package, as e2e/durable_test.go drives it:
//
//   node client.mjs <stream url> <total items> <timeout ms> <live: sse|long-poll>
//
// It subscribes from the beginning (offset -1) and stops once it holds
// <total> items, when the stream ends with an error, or at the timeout. It
// prints one JSON line: the "id" of every item received (each item is the
// JSON envelope {"v":1,"id","type","session","data"} of an event Go published), the offset
// of each batch, every request URL it made (so the test sees the resumes)
// how often it resumed after a reset connection, and the error that ended
// the stream, if any.
import { stream } from "@durable-streams/client"

const [url, totalArg, timeoutArg, live] = process.argv.slice(2)
const total = Number(totalArg)
const ids = []
const offsets = []
const requests = []
let error = null
let done = false
let retries = 0

const ac = new AbortController()
function finish(reason) {
  if (done) return
  done = true
  clearTimeout(timer)
  ac.abort()
  process.stdout.write(JSON.stringify({ ids, offsets, requests, error, reason, retries }) + "\n")
  process.exit(0)
}
const timer = setTimeout(() => finish("timeout"), Number(timeoutArg))

const loggingFetch = (input, init) => {
  requests.push(String(input instanceof Request ? input.url : input))
  return fetch(input, init)
}

// A connection reset mid-stream either reaches onError or rejects
// res.closed with a TypeError ("terminated", "fetch failed"): the read then
// resumes from the offset of the last batch it received, as an application
// that persists its offset does. Any other error (an HTTP error such as
// 410 Gone) ends the read: the test looks at it.
let offset = "-1"
const resumable = (e) => e && e.name === "TypeError" && retries < 100
for (;;) {
  let stop = false
  try {
    const res = await stream({
      url,
      offset,
      live,
      fetch: loggingFetch,
      signal: ac.signal,
      warnOnHttp: false,
      backoffOptions: { initialDelay: 20, maxDelay: 200, multiplier: 2, maxRetries: 50 },
      sseResilience: { logWarnings: false, minConnectionDuration: 0 },
      onError: (e) => {
        if (resumable(e)) {
          retries++
          return {}
        }
        error = { name: e.name, message: String(e.message), status: e.status ?? null }
        stop = true
        return undefined
      },
    })
    res.subscribeJson(async (batch) => {
      for (const it of batch.items) ids.push(it.id)
      offsets.push(batch.offset)
      offset = batch.offset
      if (ids.length >= total) finish("total")
    })
    await res.closed
    finish("closed")
  } catch (e) {
    if (!stop && resumable(e)) {
      retries++
      continue
    }
    error = error ?? { name: e.name, message: String(e.message), status: e.status ?? null }
    finish("error")
  }
  if (done) break
}
