// Drives the three frontend clients at a turn whose first events have
// left the server's replay buffer: npm ai's reconnectToStream, the
// @ag-ui/client HttpAgent resuming with Last-Event-ID, and @a2a-js/sdk's
// resubscribeTask. Each must fail with the server's refusal, never get
// the turn from its middle; what each got is printed.
//
// usage: node evicted.mjs <base url> <chat id> <Last-Event-ID> <task id>
// prints {"aisdk": {error?, chunks?}, "agui": {error?, events}, "a2a": {error?, events}}
import { DefaultChatTransport } from "ai";
import { HttpAgent } from "@ag-ui/client";
import { ClientFactory } from "@a2a-js/sdk/client";

const [base, chatId, lastId, taskId] = process.argv.slice(2);
const out = { aisdk: {}, agui: { events: [] }, a2a: { events: [] } };
// The turn runs on: a client given a stream waits for its end. Each gets
// 3 s, then what it read so far is what it got.
const within = (p, what) => Promise.race([p, new Promise((r) => setTimeout(() => { what.timeout = true; r(); }, 3000))]);

await within((async () => {
  try {
    const stream = await new DefaultChatTransport({ api: base + "/api/chat" }).reconnectToStream({ chatId });
    out.aisdk.chunks = [];
    if (stream !== null) for await (const c of stream) out.aisdk.chunks.push(c);
    else out.aisdk.chunks = null;
  } catch (e) {
    out.aisdk.error = String(e && e.message || e);
  }
})(), out.aisdk);

await within((async () => {
  try {
    const agent = new HttpAgent({ url: base + "/agui", threadId: chatId, headers: { "Last-Event-ID": lastId } });
    await agent.runAgent({ runId: "resume" }, { onEvent: ({ event }) => { out.agui.events.push(event.type); } });
  } catch (e) {
    out.agui.error = String(e && e.message || e);
  }
})(), out.agui);

await within((async () => {
  try {
    const client = await new ClientFactory().createFromUrl(base);
    for await (const ev of client.resubscribeTask({ tenant: "", id: taskId })) out.a2a.events.push(ev.payload.$case);
  } catch (e) {
    out.a2a.error = `${e?.constructor?.name} ${e?.code ?? ""}: ${e?.message ?? e}`;
  }
})(), out.a2a);
process.stdout.write(JSON.stringify(out));
process.exit(0);
