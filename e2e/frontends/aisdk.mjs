// Drives npm ai 7's DefaultChatTransport against a UI-message stream
// endpoint: sendMessages (POST {api}), reconnectToStream (GET
// {api}/{chatId}/stream) for the chat and for an unknown one. Each stream
// passes through the transport's own parser, which validates every chunk
// against ai's uiMessageChunkSchema and throws on the first that fails,
// and is rebuilt into a UIMessage by readUIMessageStream.
//
// usage: node aisdk.mjs <api url> <chat id>
// prints {"send": {message, chunks, errors}, "reconnect": …|null, "unknownIsNull": bool}
import { DefaultChatTransport, readUIMessageStream, uiMessageChunkSchema } from "ai";

const [api, chatId] = process.argv.slice(2);
const transport = new DefaultChatTransport({ api });

async function read(stream) {
  if (stream === null) return null;
  const [forMessage, forCount] = stream.tee();
  const chunks = [];
  const schema = uiMessageChunkSchema();
  const counting = (async () => {
    for await (const c of forCount) {
      const check = await schema.validate(c); // the transport validated it already; checked again, explicitly
      if (!check.success) throw new Error(`chunk fails uiMessageChunkSchema: ${JSON.stringify(c)}`);
      chunks.push(c.type);
    }
  })();
  const errors = [];
  let message;
  for await (const m of readUIMessageStream({ stream: forMessage, terminateOnError: true, onError: (e) => errors.push(String(e)) })) {
    message = m;
  }
  await counting;
  return { message, chunks, errors };
}

const out = {};
try {
  out.send = await read(await transport.sendMessages({
    chatId, trigger: "submit-message", messageId: undefined, abortSignal: undefined,
    messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "stream 40" }] }],
  }));
  out.reconnect = await read(await transport.reconnectToStream({ chatId }));
  out.unknownIsNull = (await transport.reconnectToStream({ chatId: chatId + "-unknown" })) === null;
} catch (e) {
  out.error = String(e && e.stack || e);
}
process.stdout.write(JSON.stringify(out));
