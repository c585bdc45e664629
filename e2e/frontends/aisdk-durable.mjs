// The two halves of @durable-streams/aisdk-transport against replaybus's
// Durable Streams route: the server half (toDurableStreamResponse) writes
// the UI-message chunks of a stream read with ai's DefaultChatTransport
// into <base>/v1/stream/<chat id> and closes it; the client half
// (createDurableChatTransport) reconnects through <base>/durable/api/chat,
// whose answer points it at that stream, and reads the chunks back over
// the Durable Streams SSE mode; readUIMessageStream rebuilds both.
//
// usage: node aisdk-durable.mjs <base url> <chat id>
// prints {"direct": UIMessage, "durable": UIMessage, "chunks": n, "status": n}
import { DefaultChatTransport, readUIMessageStream } from "ai";
import { createDurableChatTransport, toDurableStreamResponse } from "@durable-streams/aisdk-transport";

const [base, chatId] = process.argv.slice(2);

async function message(stream) {
  let last;
  for await (const m of readUIMessageStream({ stream, terminateOnError: true })) last = m;
  return last;
}

const out = {};
try {
  const direct = new DefaultChatTransport({ api: `${base}/api/chat` });
  const send = () => direct.sendMessages({
    chatId, trigger: "submit-message", messageId: undefined, abortSignal: undefined,
    messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "stream 40" }] }],
  });
  out.direct = await message(await send());

  let chunks = 0;
  const source = (async function* () {
    for await (const c of await send()) { chunks++; yield c; }
  })();
  const res = await toDurableStreamResponse({
    source, mode: "await",
    stream: { writeUrl: `${base}/v1/stream/${chatId}`, readUrl: `${base}/v1/stream/${chatId}` },
  });
  out.status = res.status;
  out.chunks = chunks;

  const durable = createDurableChatTransport({ api: `${base}/durable/api/chat` });
  out.durable = await message(await durable.reconnectToStream({ chatId }));
  out.unknownIsNull = (await durable.reconnectToStream({ chatId: chatId + "-unknown" })) === null;
} catch (e) {
  out.error = String(e && e.stack || e);
}
process.stdout.write(JSON.stringify(out));
