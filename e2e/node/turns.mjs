// Watches a replaybus session with the npm `eventsource` package, as a
// browser page would, with ?client=ID&presence=1, starts a turn of the
// example server's model (POST /session/{id}/messages "stream 100000"),
// stops it with fetch (POST /session/{id}/cancel) once its turn_start has
// arrived on the stream, and waits for the turn_end. Prints one JSON
// object on stdout:
//
//   {"presence": [...], "start": {...}, "cancel": {"status": n, "body": {...}}, "end": {...}, "after": [...], "ms": n}
//
// presence holds the data of every presence frame, start and end the
// envelopes of the turn's turn_start and turn_end, after the types of the
// frames that arrived after turn_end within 300 ms (none of the turn's own
// may).
//
// usage: node turns.mjs BASE_URL SESSION CLIENT [TIMEOUT_MS]
import { EventSource } from 'eventsource';

const [base, session, client, timeoutArg = '30000'] = process.argv.slice(2);
if (!base || !session || !client) {
  console.error('usage: node turns.mjs BASE_URL SESSION CLIENT [TIMEOUT_MS]');
  process.exit(2);
}
const started = Date.now();
const out = { presence: [], start: null, cancel: null, end: null, after: [], ms: 0 };
const path = `${base}/session/${encodeURIComponent(session)}`;
const es = new EventSource(`${path}/events?replay=0&client=${encodeURIComponent(client)}&presence=1`);
let turn = '';

function finish(code) {
  es.close();
  clearTimeout(timer);
  out.ms = Date.now() - started;
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exitCode = code;
}
const timer = setTimeout(() => { console.error('timeout: ' + JSON.stringify(out)); finish(1); }, Number(timeoutArg));

async function post(route, body) {
  const r = await fetch(`${path}/${route}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

es.addEventListener('presence', async (e) => {
  out.presence.push(JSON.parse(e.data).data);
  if (out.presence.length === 1) {
    // Attached: now start the turn.
    const a = await post('messages', { text: 'stream 100000' });
    if (a.status !== 202) { console.error('messages: ' + JSON.stringify(a)); finish(1); return; }
    turn = a.body.turn;
  }
});
es.addEventListener('turn_start', async (e) => {
  out.start = JSON.parse(e.data);
  out.cancel = await post('cancel', { turn: out.start.data.turn });
});
es.addEventListener('turn_end', (e) => {
  out.end = JSON.parse(e.data);
  setTimeout(() => finish(0), 300);
});
for (const t of ['agent_message_chunk', 'tool_call', 'tool_call_update', 'turn_cancel']) {
  es.addEventListener(t, () => { if (out.end) out.after.push(t); });
}
es.addEventListener('error', () => { if (!out.end) console.error('eventsource error'); });
