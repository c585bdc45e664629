// Drives @ag-ui/client 1.0.0's HttpAgent against the example server's
// /agui (adapters/agui). Every event passes the client's whole pipeline
// (schema enforcement, which warns on and strips anything unknown;
// verifyEvents; the reducer building agent.messages); warnings count as
// failures. The agent's fetch is wrapped to read the id: lines the
// client's own SSE parser ignores, and, for a cut run, to end the body
// after a given number of frames, the way a dropped connection does.
//
// usage: node agui-turns.mjs <base url> <text> <cuts,comma,separated> [otherBase]
// a cut "gN" is resumed by GET {path}/{thread}/stream rather than by POST.
// otherBase, when given, is another server node: resumes and the join go there.
// prints {"whole": run, "cuts": [run], "join": run, "cancel": run, "warnings": [...]}
// where run is {events, firstEvents, error, lastIds, messages, text}.
import { HttpAgent } from "@ag-ui/client";

const [base, text, cutsArg, otherBase] = process.argv.slice(2);
const url = base + "/agui";
const otherUrl = (otherBase || base) + "/agui";
const warnings = [];
console.warn = (...a) => warnings.push(a.map(String).join(" "));
const errors = [];
console.error = (...a) => errors.push(a.map(String).join(" ").slice(0, 300));

// wrappedFetch returns a fetch that records the id: lines of the
// response, cuts the body after cut frames (0: never), and with join
// turns the POST into GET {url}/{thread}/stream.
function wrappedFetch(state) {
  return async (input, init) => {
    let target = input;
    const hasCursor = init.headers && init.headers["Last-Event-ID"];
    if (state.join || (state.resumeByGet && hasCursor)) {
      const body = JSON.parse(init.body);
      target = `${state.joinUrl}/${encodeURIComponent(body.threadId)}/stream`;
      const last = init.headers && init.headers["Last-Event-ID"];
      init = { method: "GET", headers: { Accept: "text/event-stream", ...(last ? { "Last-Event-ID": last } : {}) }, signal: init.signal };
    } else if (state.resumeUrl && init.headers && init.headers["Last-Event-ID"]) {
      target = state.resumeUrl;
    }
    const res = await fetch(target, init);
    (state.methods ||= []).push(`${init.method || "POST"} ${res.status}`);
    state.status = res.status;
    if (!res.body) return res;
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    const enc = new TextEncoder();
    let buf = "";
    let frames = 0;
    const cut = state.cut;
    state.cut = 0; // only the first request is cut
    const body = new ReadableStream({
      async pull(controller) {
        for (;;) {
          const i = buf.indexOf("\n\n");
          if (i >= 0) {
            const frame = buf.slice(0, i + 2);
            buf = buf.slice(i + 2);
            for (const line of frame.split("\n")) if (line.startsWith("id: ")) state.lastId = line.slice(4);
            controller.enqueue(enc.encode(frame));
            frames++;
            if (cut > 0 && frames === cut) {
              controller.close();
              await reader.cancel();
            }
            return;
          }
          const { value, done } = await reader.read();
          if (done) {
            if (buf) controller.enqueue(enc.encode(buf));
            controller.close();
            return;
          }
          buf += dec.decode(value, { stream: true });
        }
      },
      cancel() { return reader.cancel(); },
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

// run runs (and, when it is cut, resumes with Last-Event-ID) one run on
// thread, returning what the agent saw.
async function run(thread, { cut = 0, join = false, resumeByGet = false, message = text, onEvent } = {}) {
  const state = { cut, join, resumeByGet, joinUrl: otherUrl, resumeUrl: otherUrl };
  const agent = new HttpAgent({ url, threadId: thread, fetch: wrappedFetch(state) });
  if (!join) agent.addMessage({ id: "u-" + thread, role: "user", content: message });
  const out = { events: [], attempts: 0, lastIds: [], errors: [] };
  for (let attempt = 0; attempt < 5; attempt++) {
    out.attempts++;
    let ended = false;
    try {
      await agent.runAgent({ runId: "run-" + thread }, {
        onEvent: async ({ event }) => {
          out.events.push(event.type);
          if (event.type === "RUN_ERROR") out.runError = { code: event.code, message: event.message };
          if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") ended = true;
          if (onEvent) await onEvent(out.events.length);
        },
      });
    } catch (e) {
      out.errors.push(String((e && e.message) || e));
    }
    out.lastIds.push(state.lastId);
    if (ended || !state.lastId) break;
    agent.headers = { ...agent.headers, "Last-Event-ID": state.lastId };
  }
  out.status = state.status;
  out.methods = state.methods;
  out.firstEvents = out.events.slice(0, 2);
  out.messages = normalize(agent.messages.filter((m) => m.role !== "user"));
  out.text = agent.messages.filter((m) => m.role === "assistant" && typeof m.content === "string").map((m) => m.content).join("");
  return out;
}

// normalize drops the ids (they name the run and the thread's events):
// what is left is what the user sees.
function normalize(msgs) {
  return msgs.map((m) => ({
    role: m.role,
    content: m.content ?? null,
    toolCalls: (m.toolCalls || []).map((c) => ({ name: c.function.name, arguments: c.function.arguments })),
    activityType: m.activityType ?? null,
    tool: m.role === "tool" ? true : undefined,
  }));
}

const out = { cuts: [] };
try {
  const stamp = Date.now().toString(36);
  out.whole = await run(`ag-whole-${stamp}`);
  // "g13": cut after 13 frames, resumed by GET {path}/{thread}/stream
  // instead of the agent's own POST.
  for (const arg of cutsArg.split(",")) {
    const c = Number(arg.replace(/^g/, ""));
    const resumeByGet = arg.startsWith("g");
    out.cuts.push({ cut: c, byGet: resumeByGet, ...(await run(`ag-cut-${arg}-${stamp}`, { cut: c, resumeByGet })) });
  }
  // A join while a run runs: once the joined agent has its snapshot, a
  // cancel ends the run; both agents end with the same messages, whatever
  // the machine's speed. The run is one the cancel ends (100,000 deltas:
  // 25 s at the tests' 4,000 a second), so that the join always finds it
  // running: with 6,000 (1.5 s) a loaded machine's join came after the
  // end and got 204.
  const joinThread = `ag-join-${stamp}`;
  let joined;
  let snapshotSeen;
  const seen = new Promise((resolve) => { snapshotSeen = resolve; });
  const first = await run(joinThread, {
    message: "stream 100000",
    onEvent: async (n) => {
      if (n !== 30) return;
      process.stderr.write("join starts\n");
      joined = run(joinThread, { join: true, onEvent: async (k) => { if (k <= 3) process.stderr.write(`join event ${k}\n`); if (k === 2) snapshotSeen(); } });
      // Not to wait for the whole turn if the join never gets its
      // snapshot (the check then fails on the join's first events).
      const fallback = setTimeout(snapshotSeen, 15000);
      seen.then(async () => {
        clearTimeout(fallback);
        const r = await fetch(`${base}/session/${encodeURIComponent(joinThread)}/cancel`, { method: "POST" });
        out.joinCancelStatus = r.status;
        process.stderr.write(`cancel ${r.status}\n`);
      });
    },
  });
  out.joinSource = { text: first.text, messages: first.messages, events: first.events.length, runError: first.runError };
  process.stderr.write("source ended\n");
  out.join = await joined;
  process.stderr.write("join ended\n");
  // A stop: RUN_ERROR with the cancelled code; the partial text stays.
  const stopThread = `ag-stop-${stamp}`;
  out.cancel = await run(stopThread, {
    message: "stream 100000",
    onEvent: async (n) => {
      if (n === 50) {
        const r = await fetch(`${base}/session/${encodeURIComponent(stopThread)}/cancel`, { method: "POST" });
        out.cancelStatus = r.status;
      }
    },
  });
} catch (e) {
  out.error = String((e && e.stack) || e);
}
out.warnings = warnings;
out.consoleErrors = errors;
process.stdout.write(JSON.stringify(out));
