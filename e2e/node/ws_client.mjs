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

const [url, wantArg, timeoutArg = '30000'] = process.argv.slice(2);
if (!url || !wantArg) {
  console.error('usage: node ws_client.mjs URL WANT [TIMEOUT_MS]');
  process.exit(2);
}
const want = Number(wantArg);
const started = Date.now();
const out = { ids: [], frames: [], resumes: [], closes: [], opens: 0, errors: 0, ms: 0 };
let lastId = 0;
let epoch = '';
let done = false;
let ws = null;

function finish(code) {
  done = true;
  clearTimeout(timer);
  if (ws) ws.terminate();
  out.ms = Date.now() - started;
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exitCode = code;
}

const timer = setTimeout(() => {
  console.error(`timeout: ${out.ids.length} ids after ${timeoutArg} ms`);
  finish(1);
}, Number(timeoutArg));

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
    if (env.id) {
      out.ids.push(env.id);
      if (env.id > lastId) { lastId = env.id; epoch = env.epoch || epoch; }
      if (env.id >= want) finish(0);
    } else {
      out.frames.push(env.type);
    }
  });
  sock.on('error', () => { out.errors++; });
  sock.on('close', (code, reason) => {
    out.closes.push({ code, reason: reason.toString() });
    if (!done) setTimeout(connect, 50);
  });
}
connect();
