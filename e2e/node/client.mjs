// Reads a replaybus SSE stream with the npm `eventsource` package (a
// WHATWG-compliant EventSource) until it has seen the event with id WANT,
// then prints one JSON object on stdout:
//
//   {"ids": [...], "frames": [...], "requests": [{"lastEventId": ...}], "opens": n, "errors": n, "ms": n}
//
// ids are the envelope ids of every event received, in order; requests are the
// Last-Event-ID headers the package sent on each (re)connect — set by the
// package itself, never by this script.
//
// usage: node client.mjs URL WANT [TIMEOUT_MS] [TYPE,TYPE,...]
import { EventSource } from 'eventsource';

const [url, wantArg, timeoutArg = '30000', typesArg = 'tick'] = process.argv.slice(2);
if (!url || !wantArg) {
  console.error('usage: node client.mjs URL WANT [TIMEOUT_MS] [TYPES]');
  process.exit(2);
}
const want = Number(wantArg);
const started = Date.now();
const out = { ids: [], frames: [], requests: [], opens: 0, errors: 0, ms: 0 };

const es = new EventSource(url, {
  fetch: (input, init) => {
    const h = new Headers(init.headers);
    out.requests.push({ lastEventId: h.get('last-event-id') });
    return fetch(input, init);
  },
});

function finish(code) {
  es.close();
  clearTimeout(timer);
  out.ms = Date.now() - started;
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exitCode = code;
}

const timer = setTimeout(() => {
  console.error(`timeout: ${out.ids.length} ids after ${timeoutArg} ms`);
  finish(1);
}, Number(timeoutArg));

es.addEventListener('open', () => { out.opens++; });
es.addEventListener('error', () => { out.errors++; });

function onEvent(e) {
  const env = JSON.parse(e.data);
  if (env.id) {
    out.ids.push(env.id);
    if (env.id >= want) finish(0);
  } else {
    out.frames.push(env.type);
  }
}
const frameTypes = ['state_resync_required', 'replay_complete', 'slow_client_warning', 'client_evicted', 'session_closed'];
for (const t of [...typesArg.split(','), ...frameTypes]) es.addEventListener(t, onEvent);
