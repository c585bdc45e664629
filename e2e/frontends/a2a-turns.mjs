// Drives @a2a-js/sdk 1.3.0's client against the example server's /a2a
// (adapters/a2a), protocol 1.0 (the card's supportedInterfaces) or 0.3
// (the SDK's compatibility layer, from the same card's url). The
// transport's fetch is wrapped to read the id: lines and, for a cut
// stream, to end the body after a given number of frames.
//
// usage: node a2a-turns.mjs <base url> <1.0|0.3> [otherBase]
// otherBase, when given, is another server node: the resubscriptions go there.
// prints {"protocolVersion", "stream", "after", "during", "cut": {...}}
// where each is a list of {case, id?, state?, artifactId?, append?, parts?, artifacts?}.
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";

const [base, version, otherBase] = process.argv.slice(2);
const STATES = ["UNSPECIFIED", "submitted", "working", "completed", "failed", "canceled", "input-required", "rejected", "auth-required"];

function describe(ev) {
  const p = ev.payload;
  const out = { case: p.$case };
  const v = p.value;
  const parts = (ps) => ps.map((x) => (x.content?.$case === "text" ? { text: x.content.value } : { data: x.content?.value ?? null }));
  if (p.$case === "task") {
    out.id = v.id;
    out.state = STATES[v.status?.state] ?? String(v.status?.state);
    out.artifacts = v.artifacts.map((a) => ({ artifactId: a.artifactId, parts: parts(a.parts) }));
  } else if (p.$case === "statusUpdate") {
    out.state = STATES[v.status?.state] ?? String(v.status?.state);
  } else if (p.$case === "artifactUpdate") {
    out.artifactId = v.artifact.artifactId;
    out.append = v.append;
    out.parts = parts(v.artifact.parts);
  }
  return out;
}

// makeClient builds a client of the version against baseUrl's card,
// whose fetch state.cut cuts after that many frames and records ids.
async function makeClient(baseUrl, state) {
  const fetchImpl = async (input, init) => {
    const res = await fetch(input, init);
    if (!res.body || !(res.headers.get("content-type") || "").startsWith("text/event-stream")) return res;
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    const enc = new TextEncoder();
    let buf = "";
    let frames = 0;
    const cut = state.cut;
    state.cut = 0;
    const body = new ReadableStream({
      async pull(controller) {
        for (;;) {
          const i = buf.indexOf("\n\n");
          if (i >= 0) {
            const frame = buf.slice(0, i + 2);
            buf = buf.slice(i + 2);
            for (const line of frame.split("\n")) if (line.startsWith("id: ")) state.lastId = line.slice(4);
            controller.enqueue(enc.encode(frame));
            if (cut > 0 && ++frames === cut) {
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
  if (version === "0.3") {
    const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
      cardResolver: new DefaultAgentCardResolver({ legacyCompat: { enabled: true } }),
    }));
    const card = await (await fetch(baseUrl + "/.well-known/agent-card.json")).json();
    delete card.supportedInterfaces; // the card as a 0.3 agent writes it: url, protocolVersion
    return factory.createFromAgentCard(card);
  }
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
  }));
  return factory.createFromUrl(baseUrl);
}

const message = (text) => ({
  messageId: "m-" + Math.random().toString(36).slice(2), contextId: "", taskId: "", role: 1 /* ROLE_USER */,
  parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" }],
  metadata: undefined, extensions: [], referenceTaskIds: [],
});

async function collect(iter, onEvent) {
  const evs = [];
  try {
    for await (const ev of iter) {
      evs.push(describe(ev));
      if (onEvent) await onEvent(evs);
    }
  } catch (e) {
    evs.push({ case: "error", error: String((e && e.message) || e) });
  }
  return evs;
}

const out = {};
try {
  const state = {};
  const client = await makeClient(base, state);
  const other = otherBase ? await makeClient(otherBase, {}) : client;
  out.protocolVersion = client.transport?.protocolVersion ?? null;
  const req = (text) => ({ tenant: "", message: message(text), configuration: undefined, metadata: undefined });

  // A whole stream, then a resubscription to the terminal task.
  out.stream = await collect(client.sendMessageStream(req("where is the replay cursor kept")));
  const taskId = out.stream[0]?.id;
  out.after = await collect(other.resubscribeTask({ tenant: "", id: taskId }));

  // A resubscription while the task runs (on the other node); once it
  // has its task, a cancel ends the task: both streams end canceled with
  // the same reply, whatever the machine's speed.
  let during;
  let firstSeen;
  const seen = new Promise((resolve) => { firstSeen = resolve; });
  out.source = await collect(client.sendMessageStream(req("stream 100000")), async (evs) => {
    if (evs.length !== 20) return;
    const contextId = evs[0].id.slice(evs[0].id.indexOf("@") + 1);
    during = collect(other.resubscribeTask({ tenant: "", id: evs[0].id }), async (d) => { if (d.length === 1) firstSeen(); });
    seen.then(async () => {
      const r = await fetch(`${base}/session/${encodeURIComponent(contextId)}/cancel`, { method: "POST" });
      out.cancelStatus = r.status;
    });
  });
  out.during = await during;

  // A stream cut after 37 frames, resumed with Last-Event-ID.
  state.cut = 37;
  out.cutHead = await collect(client.sendMessageStream(req("stream 1000")));
  out.cutLastId = state.lastId;
  out.cutTail = await collect(other.resubscribeTask({ tenant: "", id: out.cutHead[0].id }, { serviceParameters: { "Last-Event-ID": state.lastId } }));

  // A second message while a task runs in the context: a JSON-RPC error.
  out.unknown = await collect(client.resubscribeTask({ tenant: "", id: "nope@nowhere" }));
} catch (e) {
  out.error = String((e && e.stack) || e);
}
process.stdout.write(JSON.stringify(out));
