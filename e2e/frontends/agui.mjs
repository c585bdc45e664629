// Drives @ag-ui/client 1.0.0's HttpAgent against an AG-UI endpoint. Every
// event passes the client's whole pipeline: enforcement (the schema of
// @ag-ui/core: an unknown field is stripped with a console warning, a
// malformed one fails the run), verifyEvents (the event order), and the
// reducer that builds agent.messages. Warnings are collected and count as
// failures. The fetch is wrapped to read the id: lines the client's own
// SSE parser ignores, so that a cut run can be resumed with Last-Event-ID.
//
// usage: node agui.mjs <url> <thread id> [resume]
// prints {"runs": [{events, error, lastId}], "messages", "compacted", "warnings"}
// With "resume", a run that ends without RUN_FINISHED / RUN_ERROR is run
// again on the same agent with Last-Event-ID: the id of its last frame.
import { HttpAgent, compactEvents } from "@ag-ui/client";

const [url, threadId, mode] = process.argv.slice(2);
const warnings = [];
console.warn = (...a) => warnings.push(a.map(String).join(" "));

let lastId = null;
let reading = Promise.resolve(); // the id reader of the last response
const fetchWithIds = async (input, init) => {
  const res = await fetch(input, init);
  if (!res.body) return res;
  const [mine, theirs] = res.body.tee();
  reading = (async () => {
    const dec = new TextDecoder();
    let buf = "";
    for await (const chunk of mine) {
      buf += dec.decode(chunk, { stream: true });
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.startsWith("id: ")) lastId = line.slice(4);
      }
    }
  })().catch(() => {}); // a body cut short ends the reader with what it saw
  return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
};

const agent = new HttpAgent({ url, threadId, fetch: fetchWithIds });
const runs = [];
const all = [];
for (let attempt = 0; attempt < 5; attempt++) {
  const run = { events: [], error: null };
  let ended = false;
  try {
    await agent.runAgent({ runId: "run-1" }, {
      onEvent: ({ event }) => {
        run.events.push(event.type);
        all.push(event);
        if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") ended = true;
      },
    });
  } catch (e) {
    run.error = String(e && e.message || e);
  }
  await reading; // the id reader has seen the whole body
  run.lastId = lastId;
  runs.push(run);
  if (ended || mode !== "resume" || run.error) break;
  agent.headers = { ...agent.headers, "Last-Event-ID": lastId };
}
process.stdout.write(JSON.stringify({ runs, messages: agent.messages, compacted: compactEvents(all).length, warnings }));
