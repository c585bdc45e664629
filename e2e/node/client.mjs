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
import { start } from './run.mjs';

const { url, rest, out, record } = start('client.mjs', ' [TYPES]', { requests: [] }, () => es.close());
const [typesArg = 'tick'] = rest;

const es = new EventSource(url, {
  fetch: (input, init) => {
    const h = new Headers(init.headers);
    out.requests.push({ lastEventId: h.get('last-event-id') });
    return fetch(input, init);
  },
});

es.addEventListener('open', () => { out.opens++; });
es.addEventListener('error', () => { out.errors++; });

function onEvent(e) {
  record(JSON.parse(e.data));
}
const frameTypes = ['state_resync_required', 'replay_complete', 'slow_client_warning', 'client_evicted', 'session_closed', 'snapshot'];
for (const t of [...typesArg.split(','), ...frameTypes]) es.addEventListener(t, onEvent);
