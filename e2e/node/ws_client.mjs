// Reads a replaybus WebSocket stream with the npm `ws` package until it has
// seen the event with id WANT, resuming after every close the way a client
// of the protocol should: on each (re)connect its first message is
// {"resume": {"lastEventId", "epoch"}} with the id and epoch of the last event
// received ({} on the first connect). Prints one JSON object on stdout:
//
//   {"ids": [...], "frames": [...], "resumes": [...], "closes": [{code, reason}], "opens": n, "errors": n, "ms": n}
//
// ids are the envelope ids of every event received, in order (duplicates
// included, so the caller can see them); resumes the lastEventId sent on each
// connect (null for none).
//
// usage: node ws_client.mjs URL WANT [TIMEOUT_MS]
import WebSocket from 'ws';
import { start } from './run.mjs';

let lastId = 0;
let epoch = '';
let done = false;
let ws = null;
const { url, out, record } = start('ws_client.mjs', '', { resumes: [], closes: [] }, () => {
  done = true;
  if (ws) ws.terminate();
});

function connect() {
  const sock = new WebSocket(url);
  ws = sock;
  sock.on('open', () => {
    out.opens++;
    const resume = lastId ? { lastEventId: String(lastId), epoch } : {};
    out.resumes.push(lastId ? String(lastId) : null);
    sock.send(JSON.stringify({ resume }));
  });
  sock.on('message', (data, isBinary) => {
    if (isBinary || done) return;
    const env = JSON.parse(data.toString());
    if (env.id > lastId) { lastId = env.id; epoch = env.epoch || epoch; }
    record(env);
  });
  sock.on('error', () => { out.errors++; });
  sock.on('close', (code, reason) => {
    out.closes.push({ code, reason: reason.toString() });
    if (!done) setTimeout(connect, 50);
  });
}
connect();
