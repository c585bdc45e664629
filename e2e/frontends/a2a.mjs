// Drives @a2a-js/sdk 1.3.0's client against an A2A agent: the client
// reads the agent card, picks the JSON-RPC interface, streams a message
// (sendMessageStream) and resubscribes to the task (resubscribeTask).
// With "0.3" it reads the 0.3 card at <base>/legacy/.well-known/agent-card.json
// through the SDK's compatibility layer (message/stream, tasks/resubscribe).
// Every response passes the client's own parsing: the JSON-RPC envelope
// (version, matching id, result), then StreamResponse (1.0) or the 0.3
// translation, which throws on an unknown kind.
//
// usage: node a2a.mjs <base url> <1.0|0.3>
// prints {"stream": [event], "resubscribe": [event]} where event is
// {case, state?, artifactId?, append?, texts?, data?, final?}
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";

const [base, version] = process.argv.slice(2);
const STATES = ["UNSPECIFIED", "submitted", "working", "completed", "failed", "canceled", "input-required", "rejected", "auth-required"];

function describe(ev) {
  const p = ev.payload;
  const out = { case: p.$case };
  const v = p.value;
  const parts = (ps) => ps.map((x) => x.content?.$case === "text" ? { text: x.content.value } : { data: x.content?.value ?? null });
  if (p.$case === "task") {
    out.id = v.id;
    out.state = STATES[v.status?.state] ?? String(v.status?.state);
    out.artifacts = v.artifacts.map((a) => ({ artifactId: a.artifactId, parts: parts(a.parts) }));
  } else if (p.$case === "statusUpdate") {
    out.state = STATES[v.status?.state] ?? String(v.status?.state);
    if (v.status?.message) out.message = parts(v.status.message.parts);
  } else if (p.$case === "artifactUpdate") {
    out.artifactId = v.artifact.artifactId;
    out.append = v.append;
    out.parts = parts(v.artifact.parts);
  }
  return out;
}

const out = { stream: [], resubscribe: [] };
try {
  let factory = new ClientFactory();
  let cardPath;
  if (version === "0.3") {
    factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ legacyCompat: { enabled: true } })],
      cardResolver: new DefaultAgentCardResolver({ legacyCompat: { enabled: true } }),
    }));
    cardPath = "/legacy/.well-known/agent-card.json";
  }
  const client = await factory.createFromUrl(base, cardPath);
  out.protocolVersion = client.transport?.protocolVersion ?? null;
  const message = {
    messageId: "m1", contextId: "", taskId: "", role: 1 /* ROLE_USER */,
    parts: [{ content: { $case: "text", value: "stream 40" }, metadata: undefined, filename: "", mediaType: "text/plain" }],
    metadata: undefined, extensions: [], referenceTaskIds: [],
  };
  let taskId;
  for await (const ev of client.sendMessageStream({ tenant: "", message, configuration: undefined, metadata: undefined })) {
    const d = describe(ev);
    if (d.case === "task") taskId = d.id;
    out.stream.push(d);
  }
  for await (const ev of client.resubscribeTask({ tenant: "", id: taskId })) {
    out.resubscribe.push(describe(ev));
  }
} catch (e) {
  out.error = String(e && e.stack || e);
}
process.stdout.write(JSON.stringify(out));
