// Drives npm ai 7's DefaultChatTransport against the example server's
// chat routes (adapters/aisdk): POST {api} (sendMessages), GET
// {api}/{chatId}/stream (reconnectToStream), POST {api}/{chatId}/stop.
// Every chunk passes the transport's own parser (uiMessageChunkSchema:
// it throws on the first that fails) and is validated again here;
// readUIMessageStream rebuilds the UIMessage.
//
// usage: node aisdk-turns.mjs <base url> <turns> <seed> [resumeBase]
// resumeBase, when given, is another server node: the resumes go there.
// prints {"turns": [...], "stop": {...}, "nulls": {...}, "conflict": "...", "errors": [...]}
import { DefaultChatTransport, readUIMessageStream, uiMessageChunkSchema } from "ai";

const [base, turnsArg, seedArg, resumeBase] = process.argv.slice(2);
const api = base + "/api/chat";
const transport = new DefaultChatTransport({ api });
const resumer = new DefaultChatTransport({ api: (resumeBase || base) + "/api/chat" });
const schema = uiMessageChunkSchema();

// mulberry32: a seeded generator, so that a run is repeatable.
let s = Number(seedArg) >>> 0;
function rand() {
  s = (s + 0x6d2b79f5) >>> 0;
  let t = s;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const between = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

const schemaErrors = [];

// read consumes a chunk stream: every chunk validated, the types counted,
// the UIMessage rebuilt; onChunk(n) is called after each.
async function read(stream, { onChunk } = {}) {
  const [forMessage, forCount] = stream.tee();
  const chunks = [];
  const counting = (async () => {
    for await (const c of forCount) {
      const check = await schema.validate(c);
      if (!check.success) schemaErrors.push(JSON.stringify(c).slice(0, 200));
      chunks.push(c.type);
      if (onChunk) await onChunk(chunks.length);
    }
  })();
  const errors = [];
  let message;
  for await (const m of readUIMessageStream({ stream: forMessage, onError: (e) => errors.push(String(e)) })) {
    message = m;
  }
  await counting;
  return { message, chunks, errors };
}

// cut reads cutAfter chunks of stream, validating each, then aborts the
// request (the connection drops) and stops reading.
async function cut(stream, cutAfter, abort) {
  const chunks = [];
  for await (const c of stream) {
    const check = await schema.validate(c);
    if (!check.success) schemaErrors.push(JSON.stringify(c).slice(0, 200));
    chunks.push(c.type);
    if (chunks.length === cutAfter) {
      abort();
      break;
    }
  }
  return { chunks };
}

const count = (cs, t) => cs.filter((c) => c === t).length;
const user = (id, text) => [{ id, role: "user", parts: [{ type: "text", text }] }];
const send = (chatId, text, abortSignal) =>
  transport.sendMessages({ chatId, trigger: "submit-message", messageId: undefined, abortSignal, messages: user("u-" + chatId, text) });
const activeTurn = async (chatId) => (await fetch(`${base}/session/${encodeURIComponent(chatId)}/turn`)).status === 200;

const out = { turns: [], errors: [] };
let at = "start";
let printed = false;
// A promise nothing will settle ends node with 13 and prints nothing:
// say where it stood instead.
process.on("beforeExit", () => {
  if (printed) return;
  printed = true;
  out.error = `stuck at ${at}`;
  out.schemaErrors = schemaErrors;
  process.stdout.write(JSON.stringify(out));
});
try {
  // null exactly when no turn is active: an unknown chat, then a chat
  // before, during and after its turn.
  out.nulls = { unknown: (await resumer.reconnectToStream({ chatId: "never-seen-" + seedArg })) === null };

  // Until <turns> turns were cut and resumed: a turn whose producer ended
  // before the client came back (null, rightly) does not count.
  const turns = Number(turnsArg);
  let resumedTurns = 0;
  for (let i = 0; resumedTurns < turns && i < 3 * turns; i++) {
    const n = between(500, 2000);
    const text = `stream ${n}`;
    at = `turn ${i} (${text}): uncut`;
    const uncut = await read(await send(`uncut-${seedArg}-${i}`, text));
    // The cut: a random chunk of the stream, leaving the producer time to
    // be still running when the client comes back.
    const chatId = `cut-${seedArg}-${i}`;
    const cutAfter = between(1, n - 300);
    at = `turn ${i} (${text}): cut after ${cutAfter}`;
    const ac = new AbortController();
    const partial = await cut(await send(chatId, text, ac.signal), cutAfter, () => ac.abort());
    at = `turn ${i} (${text}): resume`;
    const resumed = await resumer.reconnectToStream({ chatId });
    // null says no turn was active when the resume was asked: none may be
    // active after it either (nothing starts one in this chat).
    const activeAfterNull = resumed === null ? await activeTurn(chatId) : null;
    const turn = { n, cutAfter, partialChunks: partial.chunks.length, activeAfterNull, resumedNull: resumed === null };
    if (resumed !== null) {
      resumedTurns++;
      const r = await read(resumed);
      turn.resumedChunks = r.chunks.length;
      turn.resumedTextDeltas = count(r.chunks, "text-delta");
      turn.resumedErrors = r.errors;
      turn.last = r.chunks[r.chunks.length - 1];
      turn.equal = JSON.stringify(r.message.parts) === JSON.stringify(uncut.message.parts);
      if (!turn.equal) {
        turn.uncutParts = uncut.message.parts.map((p) => ({ type: p.type, len: (p.text || "").length, state: p.state }));
        turn.resumedParts = r.message.parts.map((p) => ({ type: p.type, len: (p.text || "").length, state: p.state }));
      }
    }
    turn.uncutChunks = uncut.chunks.length;
    turn.uncutTextDeltas = count(uncut.chunks, "text-delta");
    turn.uncutErrors = uncut.errors;
    turn.afterNull = await nullSoon(chatId);
    turn.uncutText = uncut.message.parts.filter((p) => p.type === "text").map((p) => p.text).join("").length;
    turn.tool = uncut.message.parts.filter((p) => p.type === "dynamic-tool").map((p) => ({ state: p.state, input: p.input, toolName: p.toolName }));
    out.turns.push(turn);
  }

  // nullSoon: reconnectToStream is null once the resumer's node knows the
  // turn ended. On another NATS node that is when its feed brings the
  // turn_end (milliseconds behind the node that wrote it): asked at once,
  // it may still see the turn active. At most 5 s.
  async function nullSoon(chatId) {
    for (let i = 0; i < 50; i++) {
      const s = await resumer.reconnectToStream({ chatId });
      if (s === null) return true;
      await s.cancel();
      await new Promise((r) => setTimeout(r, 100));
    }
    return false;
  }

  // Stop: a long turn, a second POST while it runs (409), the stop route,
  // the stream ends with abort and keeps the partial text.
  const chatId = `stop-${seedArg}`;
  let stopped = null;
  const res = await read(await send(chatId, "stream 100000"), {
    onChunk: async (k) => {
      if (k !== 50) return;
      const during = await resumer.reconnectToStream({ chatId });
      out.nulls.during = during !== null;
      if (during) await during.cancel();
      try {
        await send(chatId, "stream 5");
        out.conflict = "accepted";
      } catch (e) {
        out.conflict = `${e.statusCode} ${e.responseBody ?? e.message}`;
      }
      const r = await fetch(`${api}/${encodeURIComponent(chatId)}/stop`, { method: "POST" });
      stopped = { status: r.status, body: await r.json() };
    },
  });
  out.stop = {
    stopped, last: res.chunks[res.chunks.length - 1], chunks: res.chunks.length, errors: res.errors,
    text: res.message.parts.filter((p) => p.type === "text").map((p) => p.text).join(""),
  };
  out.nulls.after = await nullSoon(chatId);
} catch (e) {
  out.error = String((e && e.stack) || e);
}
out.schemaErrors = schemaErrors;
printed = true;
process.stdout.write(JSON.stringify(out));
