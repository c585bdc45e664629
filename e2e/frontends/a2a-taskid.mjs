// Drives @a2a-js/sdk 1.3.0's client at tasks whose ids hold '@': a
// message streamed in a context whose id holds '@' (me@host), whose turn
// id holds '@' too (the server's Start makes it run@…), then resubscribeTask
// to that task by the id its stream named — while it runs and once it is
// terminal — and to a task written before (a turn without '@') by its
// plain id. Over 1.0, or 0.3 through the SDK's compatibility layer.
//
// usage: node a2a-taskid.mjs <base url> <1.0|0.3> <plain task id>
// prints {"protocolVersion", "stream", "during", "after", "plain"}: lists of
// {case, id?, state?, text?} (text: the text of the task's or update's text
// parts), or {"error"}; a client error in a list is {case: "error", error}.
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";

const [base, version, plainID] = process.argv.slice(2);
const STATES = ["UNSPECIFIED", "submitted", "working", "completed", "failed", "canceled", "input-required", "rejected", "auth-required"];

function describe(ev) {
  const p = ev.payload;
  const v = p.value;
  const out = { case: p.$case };
  const text = (ps) => ps.filter((x) => x.content?.$case === "text").map((x) => x.content.value).join("");
  if (p.$case === "task") {
    out.id = v.id;
    out.contextId = v.contextId;
    out.state = STATES[v.status?.state] ?? String(v.status?.state);
    out.text = v.artifacts.filter((a) => a.artifactId.startsWith("text-")).map((a) => text(a.parts)).join("");
  } else if (p.$case === "statusUpdate") {
    out.id = v.taskId;
    out.state = STATES[v.status?.state] ?? String(v.status?.state);
  } else if (p.$case === "artifactUpdate") {
    out.id = v.taskId;
    out.text = v.artifact.artifactId.startsWith("text-") ? text(v.artifact.parts) : "";
  }
  return out;
}

async function collect(iter, onEvent) {
  const evs = [];
  try {
    for await (const ev of iter) {
      evs.push(describe(ev));
      if (onEvent) onEvent(evs);
    }
  } catch (e) {
    evs.push({ case: "error", error: `${e?.constructor?.name}: ${e?.message ?? e}` });
  }
  return evs;
}

const out = {};
try {
  let factory = new ClientFactory();
  if (version === "0.3") {
    factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ legacyCompat: { enabled: true } })],
      cardResolver: new DefaultAgentCardResolver({ legacyCompat: { enabled: true } }),
    }));
  }
  let client;
  if (version === "0.3") {
    const card = await (await fetch(base + "/.well-known/agent-card.json")).json();
    delete card.supportedInterfaces; // the card as a 0.3 agent writes it
    client = await factory.createFromAgentCard(card);
  } else {
    client = await factory.createFromUrl(base);
  }
  out.protocolVersion = client.transport?.protocolVersion ?? null;
  const message = {
    messageId: "m-" + Math.random().toString(36).slice(2), contextId: "me@host", taskId: "", role: 1 /* ROLE_USER */,
    parts: [{ content: { $case: "text", value: "hi" }, metadata: undefined, filename: "", mediaType: "text/plain" }],
    metadata: undefined, extensions: [], referenceTaskIds: [],
  };
  let during;
  out.stream = await collect(client.sendMessageStream({ tenant: "", message, configuration: undefined, metadata: undefined }), (evs) => {
    if (evs.length === 3) during = collect(client.resubscribeTask({ tenant: "", id: evs[0].id }));
  });
  out.during = await during;
  out.after = await collect(client.resubscribeTask({ tenant: "", id: out.stream[0]?.id }));
  out.plain = await collect(client.resubscribeTask({ tenant: "", id: plainID }));
} catch (e) {
  out.error = String((e && e.stack) || e);
}
process.stdout.write(JSON.stringify(out));
