// Tabs sharing one connection, simulated in one Node process: each "tab" is
// a Connection; Node's BroadcastChannel joins them and a Locks stand-in is
// navigator.locks. Chromium runs the same with real tabs (e2e/browser_test.go).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from '../replaybus.js';
import { FakeServer, Locks, until } from './fake.mjs';

globalThis.navigator = { locks: new Locks() };

// mulberry32: a small seeded generator; rnd(n) is an integer in [0, n).
const mulberry32 = (a) => (n) => {
  a = (a + 0x6D2B79F5) | 0;
  let t = Math.imul(a ^ (a >>> 15), 1 | a);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
};

const chunk = (text) => ({ update: { content: { type: 'text', text } } });

// A lineage is one tab and its reloads: a reload is a new Connection that
// starts from the cursor the last one left (as sessionStorage would keep it)
// and appends to the same record: ['e', epoch, text] and ['r', reason].
class Lineage {
  constructor(url, key, opts) {
    Object.assign(this, { url, key, opts, rec: [], ids: [], tabs: 0 });
    this.open('');
  }

  open(cursor) {
    this.tabs++;
    const c = this.c = connect(this.url, { persist: false, key: this.key, retry: 10, lastEventId: cursor, ...this.opts });
    c.on('event', (ev) => {
      if (c != this.c) throw new Error('an event after close');
      this.ids.push(ev.id);
      this.rec.push(['e', ev.cursor.split('-')[0], ev.data?.update?.content?.text || '']);
    });
    c.on('reset', (x) => this.rec.push(['r', x.reason]));
  }

  reload() {
    const cur = this.c.cursor;
    this.c.close();
    this.open(cur);
  }

  close() { this.c.close(); this.c = null; }

  // epochs folds the record: [[epoch, text, reset before it]] in order.
  epochs() {
    const out = [];
    let reset = false;
    for (const [k, a, text] of this.rec) {
      if (k == 'r') reset = true;
      else if (!out.length || out[out.length - 1][0] != a) out.push([a, text, reset]), reset = false;
      else out[out.length - 1][1] += text;
    }
    return out;
  }

  get text() { return this.rec.filter((e) => e[0] == 'e').map((e) => e[2]).join(''); }
}

test('tabs hold one server connection and all get every event once', async (t) => {
  const srv = await new FakeServer().start();
  const tabs = Array.from({ length: 6 }, () => new Lineage(srv.url, 'k1'));
  t.after(async () => { tabs.forEach((x) => x.close()); await srv.stop(); });
  for (let i = 0; i < 20; i++) srv.publish('note', {});
  await until(() => tabs.every((x) => x.ids.length == 20), 5000, 'every tab has 20');
  assert.equal(srv.streams.size, 1);
  assert.equal(tabs.filter((x) => x.c.leader).length, 1);
  for (const x of tabs) assert.deepEqual(x.ids, Array.from({ length: 20 }, (_, i) => i + 1));
});

// The leader goes right after a restart and a new tab comes: the next
// leader, whose last sync was in the old incarnation, must not reset the
// tabs already in the new one (they would get its events twice).
test('a handover after a restart resets only the tabs of the old incarnation', async (t) => {
  const srv = await new FakeServer().start();
  const a = new Lineage(srv.url, 'k2'), b = new Lineage(srv.url, 'k2');
  const tabs = [a, b];
  t.after(async () => { tabs.forEach((x) => x.c && x.close()); await srv.stop(); });
  for (let i = 1; i <= 3; i++) srv.publish('agent_message_chunk', chunk(i + ';'));
  await until(() => a.c.cursor == 'e1-3' && b.c.cursor == 'e1-3');
  srv.restart('e2');
  for (let i = 1; i <= 3; i++) srv.publish('agent_message_chunk', chunk('n' + i + ';'));
  await until(() => a.c.cursor == 'e2-3' && b.c.cursor == 'e2-3', 5000, 'both in e2');
  const [leader, other] = a.c.leader ? [a, b] : [b, a];
  leader.close();
  const c = new Lineage(srv.url, 'k2');
  tabs.push(c);
  srv.publish('agent_message_chunk', chunk('n4;'));
  await until(() => other.c.cursor == 'e2-4' && c.c.cursor == 'e2-4', 5000, 'the new leader and the new tab at e2-4');
  assert.deepEqual(other.epochs(), [['e1', '1;2;3;', false], ['e2', 'n1;n2;n3;n4;', true]]);
  assert.deepEqual(c.epochs(), [['e2', 'n1;n2;n3;n4;', false]]);
});

// A seeded run of leader closes, reloads, new tabs, cuts, 503s and server
// restarts (a new epoch) while events are published, with every replay
// merged into one frame on half the runs: at the end every tab lineage holds
// each event of each incarnation once, in order, with the exact text; it
// lacks only the tail of an incarnation that ended, and a reset said so;
// one connection is open.
for (const merge of [false, true]) {
  test(`handover, reloads, cuts and restarts lose and repeat nothing (merged replays: ${merge})`, async (t) => {
    const seed = Number(process.env.SHARE_SEED || 1) + (merge ? 1000 : 0);
    const rnd = mulberry32(seed);
    const srv = await new FakeServer().start();
    if (merge) {
      const serve = srv.serve.bind(srv);
      srv.serve = (q, r) => { srv.faults.unshift({ ...(srv.faults.shift() || {}), merge: true }); serve(q, r); };
    }
    const key = 'k-' + merge;
    const live = [new Lineage(srv.url, key)], done = [];
    t.after(async () => { live.forEach((x) => x.close()); await srv.stop(); });
    let n = 0, epochs = 1;
    const counts = {};
    for (let step = 0; step < 150; step++) {
      const op = rnd(11);
      counts[op] = (counts[op] || 0) + 1;
      if (op < 4) {
        for (let k = 1 + rnd(5); k > 0; k--) srv.publish('agent_message_chunk', chunk(++n + ';'));
      } else if (op == 4) { // the leader tab closes for good
        const i = live.findIndex((x) => x.c.leader);
        if (i >= 0 && live.length > 1) done.push(...live.splice(i, 1).map((x) => (x.close(), x)));
      } else if (op == 5) { // a tab reloads, the leader included
        live[rnd(live.length)].reload();
      } else if (op == 6) {
        live.push(new Lineage(srv.url, key));
      } else if (op == 7) {
        srv.cutAll();
      } else if (op == 8) {
        srv.faults.push({ status: 503, retryAfter: 0 });
        srv.cutAll();
      } else if (op == 9 && rnd(3) == 0) {
        srv.restart('e' + ++epochs);
      } else {
        await new Promise((ok) => setTimeout(ok, rnd(30)));
      }
      await new Promise((ok) => setTimeout(ok, rnd(3)));
    }
    srv.publish('agent_message_chunk', chunk(++n + ';'));
    const textOf = (e) => srv.history[e].map((ev) => ev.data.update.content.text).join('');
    const last = 'e' + epochs, want = textOf(last);
    const state = () => JSON.stringify(live.map((x) => ({ epochs: x.epochs().map(([e, text, r]) => [e, text.length, r]), cur: x.c.cursor, leader: x.c.leader, synced: x.c._synced, st: x.c.status }))) + ` streams ${srv.streams.size}, last requests ${JSON.stringify(srv.requests.slice(-5))}`;
    await until(() => live.every((x) => x.c.cursor == `${last}-${srv.seq}`), 15000, `every tab at ${last}-${srv.seq} (seed ${seed})`).catch((e) => { throw new Error(e.message + ': ' + state()); });
    await until(() => srv.streams.size == 1, 5000, 'one connection');
    for (const x of [...live, ...done]) {
      const eps = x.epochs();
      eps.forEach(([e, text, reset], i) => {
        const all = textOf(e);
        if (i > 0) assert.ok(reset, `seed ${seed}: into ${e} without a reset`);
        if (i == eps.length - 1 && live.includes(x)) assert.equal(text, all, `seed ${seed}: ${e}, the current incarnation, whole`);
        else assert.ok(all.startsWith(text), `seed ${seed}: ${e}, a prefix`);
        if (i > 0 || x.tabs == 1) assert.ok(text == '' || all.startsWith(text), `seed ${seed}: ${e} from its start`);
      });
      const resets = x.rec.filter((e) => e[0] == 'r').length;
      assert.ok(resets <= epochs - 1, `seed ${seed}: ${resets} resets, ${epochs - 1} restarts`);
    }
    assert.equal(live.filter((x) => x.c.leader).length, 1);
    t.diagnostic(`seed ${seed}: ${n} events in ${epochs} incarnations, ${live.length} tabs open, ${done.length} closed, ${srv.requests.length} requests, ops ${JSON.stringify(counts)}`);
  });
}

// A Retry-After binds whichever tab leads next: the leader that met it
// closes, and the next one waits it out before its first connect.
test('a Retry-After outlives the leader that met it', async (t) => {
  const srv = await new FakeServer().start();
  const tabs = [new Lineage(srv.url, 'k3'), new Lineage(srv.url, 'k3')];
  t.after(async () => { tabs.forEach((x) => x.c && x.close()); await srv.stop(); });
  srv.publish('note', {});
  await until(() => tabs.every((x) => x.c.cursor == 'e1-1'));
  srv.faults.push({ status: 503, retryAfter: 1 });
  srv.cutAll();
  await until(() => srv.requests.length == 2, 5000, 'the 503');
  await until(() => tabs.every((x) => x.c._until > 0), 5000, 'every tab knows the Retry-After');
  tabs.find((x) => x.c.leader).close();
  srv.publish('note', {});
  await until(() => tabs.some((x) => x.c && x.c.cursor == 'e1-2'), 5000, 'the event, through the next leader');
  const [, a, b] = srv.requests;
  assert.ok(b.at - a.at >= 1000, `the next leader came back ${b.at - a.at} ms after the 503`);
});
