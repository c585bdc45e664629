// One tab's stream (no Web Locks in Node, so every connection leads its own):
// resume, the answers it retries and those it stops on, resets, merged frames.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Connection, connect } from '../replaybus.js';
import { FakeServer, until } from './fake.mjs';

const chunk = (text) => ({ update: { content: { type: 'text', text } } });

// watch records what a connection hands the application.
const watch = (c) => {
  const w = { ids: [], events: [], resets: [], snapshots: [], errors: [], status: [] };
  c.on('event', (ev) => { w.ids.push(ev.id); w.events.push(ev); });
  c.on('reset', (x) => w.resets.push(x));
  c.on('snapshot', (s, x) => w.snapshots.push([s, x]));
  c.on('error', (e) => w.errors.push(e));
  c.on('status', (s) => w.status.push(s));
  return w;
};

const setup = async (t, opts = {}) => {
  const srv = await new FakeServer().start();
  const c = connect(srv.url, { persist: false, retry: 20, ...opts });
  t.after(async () => { c.close(); await srv.stop(); });
  return { srv, c, w: watch(c) };
};

test('every event once, in order, across cuts in the middle of frames', async (t) => {
  const { srv, c, w } = await setup(t);
  for (let i = 0; i < 30; i++) srv.publish('note', { i });
  // Each of the next answers ends inside a frame, at a different byte.
  srv.faults.push({ cutAfter: 200 }, { cutAfter: 31 }, { cutAfter: 420 }, { cutAfter: 1 }, { cutAfter: 160 });
  await until(() => w.ids.length == 30, 5000, '30 events');
  for (let i = 0; i < 5; i++) srv.publish('note', { live: i });
  await until(() => w.ids.length == 35, 5000, '35 events');
  assert.deepEqual(w.ids, Array.from({ length: 35 }, (_, i) => i + 1));
  assert.equal(c.cursor, 'e1-35');
  assert.ok(srv.requests.length >= 6);
  // Each reconnect resumed from the last event the tab had.
  const cursors = srv.requests.slice(1).map((r) => r.lastEventId);
  assert.deepEqual(cursors, [...cursors].sort((a, b) => +a.split('-')[1] - +b.split('-')[1]));
  assert.deepEqual(w.resets, []);
});

test('503 and 429 are retried no sooner than Retry-After', async (t) => {
  for (const status of [503, 429]) {
    const { srv, w } = await setup(t);
    srv.faults.push({ status, retryAfter: 1 });
    srv.publish('note', {});
    await until(() => w.ids.length == 1, 5000, 'the event after the retry');
    const [a, b] = srv.requests;
    assert.ok(b.at - a.at >= 1000, `${status}: retried after ${b.at - a.at} ms`);
    assert.equal(w.errors[0].status, status);
    assert.equal(w.errors[0].retry, true);
    assert.ok(!w.errors[0].fatal);
  }
});

test('401: a fresh token at once, then after a backoff; the third 401 in a row stops', async (t) => {
  let n = 0;
  const calls = [];
  const token = (info) => { calls.push(info.refresh); return 'tok' + ++n; };
  const { srv, w } = await setup(t, { token });
  srv.faults.push({ status: 401 });
  srv.publish('note', {});
  await until(() => w.ids.length == 1, 5000, 'the event after the refresh');
  assert.deepEqual(srv.requests.map((r) => r.auth), ['Bearer tok1', 'Bearer tok2']);
  assert.deepEqual(calls, [false, true]);
  assert.ok(srv.requests[1].at - srv.requests[0].at < 1000, 'no backoff before the refreshed attempt');

  const refreshes = [];
  const s2 = await setup(t, { token: ({ refresh }) => (refreshes.push(refresh), 'stale') });
  s2.srv.faults.push({ status: 401 }, { status: 401 }, { status: 401 });
  await until(() => s2.c.status == 'closed', 5000, 'closed');
  assert.equal(s2.srv.requests.length, 3);
  assert.deepEqual(refreshes, [false, true, true]);
  assert.deepEqual(s2.w.errors.map((e) => [e.status, !!e.fatal]), [[401, false], [401, false], [401, true]]);
});

test('404 is retried for notFoundGrace, then it is final', async (t) => {
  const { srv, w } = await setup(t, { notFoundGrace: 5000 });
  srv.faults.push({ status: 404, code: 'session_not_found' }, { status: 404, code: 'session_not_found' });
  srv.publish('note', {});
  await until(() => w.ids.length == 1, 5000, 'the event once the session is back');
  assert.deepEqual(w.errors.map((e) => [e.status, e.code, !!e.fatal]), [[404, 'session_not_found', false], [404, 'session_not_found', false]]);

  const s2 = await setup(t, { notFoundGrace: 0 });
  s2.srv.faults.push({ status: 404, code: 'session_not_found' });
  await until(() => s2.c.status == 'closed', 5000, 'closed');
  assert.equal(s2.w.errors[0].fatal, true);
});

test('answers that are final: 400, 403, 410, not an event stream', async (t) => {
  for (const f of [{ status: 400 }, { status: 403 }, { status: 410, code: 'session_closed' }, { contentType: 'text/html' }]) {
    const { srv, c, w } = await setup(t);
    srv.faults.push(f);
    await until(() => c.status == 'closed', 5000, 'closed');
    await new Promise((ok) => setTimeout(ok, 100));
    assert.equal(srv.requests.length, 1, JSON.stringify(f));
    assert.equal(w.errors.length, 1);
    assert.equal(w.errors[0].fatal, true);
  }
});

test('a restart: one reset, then the new incarnation from its start', async (t) => {
  const { srv, c, w } = await setup(t);
  for (let i = 0; i < 5; i++) srv.publish('note', {});
  await until(() => w.ids.length == 5);
  srv.restart('e2');
  for (let i = 0; i < 3; i++) srv.publish('note', {});
  await until(() => w.ids.length == 8, 5000, 'the new history');
  assert.deepEqual(w.ids, [1, 2, 3, 4, 5, 1, 2, 3]);
  assert.deepEqual(w.resets.map((r) => [r.reason, r.epoch]), [['epoch_reset', 'e2']]);
  assert.equal(srv.requests[1].lastEventId, 'e1-5');
  assert.equal(c.cursor, 'e2-3');
});

test('a merged frame across the cursor is not delivered: the stream is asked again from the cursor', async (t) => {
  const srv = await new FakeServer().start();
  for (let i = 1; i <= 6; i++) srv.publish('agent_message_chunk', chunk(i + ';'));
  // The first answer ignores the cursor and merges all six; a tab at e1-3
  // holds 1…3 already and must neither repeat them nor lose 4…6.
  const serve = srv.serve.bind(srv);
  let first = true;
  const sent = [];
  srv.serve = (q, r) => {
    sent.push(q.headers['last-event-id']);
    if (first) {
      first = false;
      delete q.headers['last-event-id'];
      srv.faults.unshift({ merge: true });
    }
    serve(q, r);
  };
  const c = connect(srv.url, { persist: false, retry: 20, lastEventId: 'e1-3' });
  t.after(async () => { c.close(); await srv.stop(); });
  const w = watch(c);
  await until(() => w.ids.length == 3, 5000, 'events 4…6');
  assert.deepEqual(w.events.map((e) => e.data.update.content.text), ['4;', '5;', '6;']);
  assert.deepEqual(sent, ['e1-3', 'e1-3'], 'both requests carried the cursor');
});

test('a merged frame after the cursor is one event: its text, count and firstId', async (t) => {
  const srv = await new FakeServer().start();
  for (let i = 1; i <= 4; i++) srv.publish('agent_message_chunk', chunk(i + ';'));
  srv.faults.push({ merge: true });
  const c = connect(srv.url, { persist: false, retry: 20, lastEventId: 'e1-1' });
  t.after(async () => { c.close(); await srv.stop(); });
  const w = watch(c);
  await until(() => w.ids.length == 1);
  const [ev] = w.events;
  assert.deepEqual([ev.firstId, ev.id, ev.count, ev.data.update.content.text, ev.cursor], [2, 4, 3, '2;3;4;', 'e1-4']);
});

test('session_closed of its own session ends the stream', async (t) => {
  const { srv, c, w } = await setup(t);
  srv.publish('session_closed', { session: 's', reason: 'closed' });
  await until(() => c.status == 'closed', 5000, 'closed');
  await new Promise((ok) => setTimeout(ok, 100));
  assert.deepEqual(w.ids, [1]);
  assert.equal(srv.requests.length, 1);
});

test('a silent connection is dropped after idleTimeout and resumed', async (t) => {
  const { srv, w } = await setup(t, { idleTimeout: 150 });
  srv.publish('note', {});
  await until(() => srv.requests.length >= 2, 5000, 'a reconnect');
  assert.equal(srv.requests[1].lastEventId, 'e1-1');
  assert.deepEqual(w.ids, [1]);
});

// The rules each tab applies to the stream's frames against its own cursor
// (docs/browser.md, "What a tab does with each frame").
test('frame rules', () => {
  const E = (id, extra = {}) => ['e1-' + id, { id, type: 'note', session: 's', ...extra }];
  const resync = (data, same) => ['', { type: 'state_resync_required', session: 's', data }, same];
  const rows = [
    // cursor, frame, what the app gets, cursor after
    ['', E(5), 'event 5', 'e1-5'],
    ['e1-4', E(5), 'event 5', 'e1-5'],
    ['e1-5', E(5), '', 'e1-5'],
    ['e1-7', E(5), '', 'e1-7'],
    ['e1-4', E(9, { firstId: 5, count: 3 }), 'event 9', 'e1-9'],
    ['e0-40', E(2), 'reset epoch_reset, event 2', 'e1-2'],
    ['e1-4', ['e1-9', { type: 'snapshot', session: 's', data: { reason: 'ring_evicted', lastEventId: 9, state: 1 } }], 'snapshot', 'e1-9'],
    ['e1-9', ['e1-9', { type: 'snapshot', session: 's', data: { reason: 'requested', lastEventId: 9, state: 1 } }], '', 'e1-9'],
    ['', ['e1-9', { type: 'snapshot', session: 's', data: { reason: 'requested', lastEventId: 9, state: 1 } }], 'snapshot', 'e1-9'],
    ['', ['e1-9', { type: 'stream_start', session: 's', data: {} }], '', 'e1-9'],
    ['e1-4', ['e1-9', { type: 'stream_start', session: 's', data: {} }], '', 'e1-4'],
    // epoch_reset answering another incarnation's cursor: tabs of that one reset
    ['e0-7', resync({ reason: 'epoch_reset', lastDeliveredId: 7, epoch: 'e1' }), 'reset epoch_reset', 'e1-0'],
    ['e1-3', resync({ reason: 'epoch_reset', lastDeliveredId: 7, epoch: 'e1' }), '', 'e1-3'],
    ['e1-9', resync({ reason: 'epoch_reset', lastDeliveredId: 7, epoch: 'e1' }), '', 'e1-9'],
    ['', resync({ reason: 'epoch_reset', lastDeliveredId: 7, epoch: 'e1' }), '', ''],
    // … answering a cursor past the newest id of its own (the leader says same): every tab of it resets
    ['e1-7', resync({ reason: 'epoch_reset', lastDeliveredId: 7, epoch: 'e1' }, true), 'reset epoch_reset', 'e1-0'],
    ['e1-9', resync({ reason: 'epoch_reset', lastDeliveredId: 7, epoch: 'e1' }, true), 'reset epoch_reset', 'e1-0'],
    ['e0-2', resync({ reason: 'epoch_reset', lastDeliveredId: 7, epoch: 'e1' }, true), 'reset epoch_reset', 'e1-0'],
    ['e1-3', resync({ reason: 'ring_evicted', lastDeliveredId: 3, completeFromId: 10 }), 'reset ring_evicted', 'e1-3'],
    ['e1-9', resync({ reason: 'ring_evicted', lastDeliveredId: 3, completeFromId: 10 }), '', 'e1-9'],
    ['', resync({ reason: 'ring_evicted', lastDeliveredId: 0, completeFromId: 10 }), '', ''],
    ['e1-3', resync({ reason: 'events_dropped', lastDeliveredId: 3, firstDroppedId: 4, lastDroppedId: 6 }), 'reset events_dropped', 'e1-3'],
    ['e1-6', resync({ reason: 'events_dropped', lastDeliveredId: 3, firstDroppedId: 4, lastDroppedId: 6 }), '', 'e1-6'],
    ['', resync({ reason: 'replay_budget_exceeded', lastDeliveredId: 3, completeFromId: 10 }), 'reset replay_budget_exceeded', ''],
    ['e1-3', resync({ reason: 'feed_gap', lastDeliveredId: 3 }), 'reset feed_gap', 'e1-3'],
    ['e1-3', ['', { type: 'replay_complete', session: 's', data: {} }], 'frame replay_complete', 'e1-3'],
    ['e1-3', ['', { type: 'hello', session: 's', data: {} }], 'frame hello', 'e1-3'],
  ];
  for (const [cur, [c, env, same], want, after] of rows) {
    const conn = new Connection('http://127.0.0.1:9/session/s/events', { persist: false });
    conn.close();
    conn._cur = cur;
    const got = [];
    conn.on('event', (ev) => got.push('event ' + ev.id));
    conn.on('reset', (x) => got.push('reset ' + x.reason));
    conn.on('snapshot', () => got.push('snapshot'));
    conn.on('frame', (f) => got.push('frame ' + f.type));
    conn._take(c, structuredClone(env), same);
    assert.equal(got.join(', '), want, `cursor ${cur || '(none)'}, ${env.type} ${c}`);
    assert.equal(conn.cursor, after, `cursor ${cur || '(none)'}, ${env.type} ${c}: the cursor after`);
  }
});

// 'online' (or a tab shown) cuts a backoff short, but not a Retry-After.
test('waking up early still honours Retry-After', async (t) => {
  const { srv, c, w } = await setup(t, { retry: 60000 });
  srv.faults.push({ status: 503, retryAfter: 1 });
  srv.publish('note', {});
  await until(() => w.errors.length == 1, 5000, 'the 503');
  c._nudge(); // what 'online' does
  await until(() => w.ids.length == 1, 5000, 'the event after the wait');
  const [a, b] = srv.requests;
  assert.ok(b.at - a.at >= 1000, `woken, then retried after ${b.at - a.at} ms`);
  assert.ok(b.at - a.at < 5000, 'woken: no 30 s backoff');
});

// After 'online' the network may not carry a request yet: a failed attempt
// is tried again within a quarter second, not after the doubled backoff.
test('after online, a failed attempt is retried soon', async (t) => {
  const { srv, c, w } = await setup(t, { retry: 60000 });
  srv.publish('note', {});
  await until(() => w.ids.length == 1);
  srv.faults.push({ status: 500 });
  srv.cutAll();
  await until(() => c.status == 'reconnecting', 5000, 'the drop');
  c._nudge(true); // what 'online' does
  srv.publish('note', {});
  await until(() => w.ids.length == 2, 5000, 'the event after the 500');
  const [, a, b] = srv.requests;
  assert.equal(w.errors.at(-1).status, 500);
  assert.ok(b.at - a.at < 1000, `retried ${b.at - a.at} ms after the 500`);
});
