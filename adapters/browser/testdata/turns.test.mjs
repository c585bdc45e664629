// cancel(), presence and the active turn: one tab against the fake server,
// then tabs sharing a connection (a tab that joins gets the current
// presence from the leader, not from a stream of its own).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from '../replaybus.js';
import { FakeServer, Locks, until } from './fake.mjs';

test('cancel posts {turn, cascade} to the cancel route with the headers and a token; a 401 refreshes it once', async (t) => {
  const srv = await new FakeServer().start();
  let n = 0;
  const refreshes = [];
  const c = connect(srv.url + '?scope=descendants&presence=1', {
    persist: false, shared: false, retry: 20, headers: { 'X-App': 'a' },
    token: ({ refresh }) => { refreshes.push(refresh); return 'tok' + ++n; },
  });
  t.after(async () => { c.close(); await srv.stop(); });
  srv.setPresence({ clients: 1, status: 'streaming', turn: 't1' });
  await until(() => c.turn == 't1', 5000, 'the turn from presence');

  const answer = await c.cancel({ cascade: true });
  assert.deepEqual(answer, { cancelled: ['t1'], held: [] });
  const [first] = srv.cancels;
  assert.equal(first.path, '/session/s/cancel', 'the stream URL with events → cancel, no query');
  assert.deepEqual(first.body, { cascade: true });
  assert.equal(first.type, 'application/json');
  assert.match(first.auth, /^Bearer tok\d+$/);

  srv.cancelAnswers.push([401, { code: 'unauthorized', message: 'stale' }]);
  const before = refreshes.length;
  await c.cancel({ turn: 't9' });
  assert.deepEqual(refreshes.slice(before), [false, true], 'the second POST with a refreshed token');
  assert.deepEqual(srv.cancels.slice(1).map((x) => x.body), [{ turn: 't9' }, { turn: 't9' }]);
  assert.notEqual(srv.cancels[1].auth, srv.cancels[2].auth);

  srv.cancelAnswers.push([409, { code: 'turn_ended', message: 'turn ended: turn "t0" of session "s"' }]);
  await assert.rejects(c.cancel({ turn: 't0' }), (e) => e.status == 409 && e.code == 'turn_ended' && /t0/.test(e.message));
  srv.cancelAnswers.push([401, { code: 'unauthorized', message: 'a' }], [401, { code: 'unauthorized', message: 'b' }]);
  await assert.rejects(c.cancel(), (e) => e.status == 401 && e.message == 'b', 'a second 401 is the answer');
  await c.cancel({ session: 'other' });
  assert.equal(srv.cancels.at(-1).path, '/session/other/cancel', 'another session of the same server');
});

test('presence frames reach the app; the active turn follows presence and the turn events', async (t) => {
  const srv = await new FakeServer().start();
  const c = connect(srv.url + '?presence=1', { persist: false, shared: false, retry: 20 });
  const pres = [], turns = [], events = [];
  c.on('presence', (p) => pres.push(p));
  c.on('turn', (x) => turns.push(x));
  c.on('event', (ev) => events.push([ev.type, c.turn]));
  t.after(async () => { c.close(); await srv.stop(); });
  await until(() => pres.length == 1, 5000, 'the presence snapshot');
  assert.deepEqual(pres[0], { session: 's', clients: 1, status: 'idle' });
  assert.equal(c.presence, pres[0]);
  assert.equal(c.turn, null);

  srv.publish('turn_start', { turn: 'a', session: 's' });
  srv.setPresence({ clients: 2, status: 'streaming', turn: 'a', joined: ['x'] });
  srv.publish('note', {});
  srv.publish('turn_end', { turn: 'a', reason: 'cancelled' });
  srv.setPresence({ clients: 2, status: 'idle' });
  await until(() => pres.length == 3 && events.length == 3, 5000, 'the turn');
  assert.deepEqual(events, [['turn_start', 'a'], ['note', 'a'], ['turn_end', null]], 'rb.turn as each event is delivered');
  assert.deepEqual(turns, [
    { session: 's', turn: 'a', active: true, reason: undefined, message: undefined },
    { session: 's', turn: 'a', active: false, reason: 'cancelled', message: undefined },
  ], 'one change each: a presence that agrees changes nothing');
  assert.deepEqual(c.presence, { session: 's', clients: 2, status: 'idle' });

  // A reconnect: the server's fresh presence says a turn runs whose start
  // came before the cursor.
  srv.presence = { clients: 1, status: 'thinking', turn: 'b' };
  srv.cutAll();
  await until(() => c.turn == 'b', 5000, 'the turn from the new presence');
  assert.equal(turns.at(-1).turn, 'b');
  assert.equal(events.length, 3, 'no event twice');
});

test('a tab that joins gets the current presence from the leader', async (t) => {
  globalThis.navigator = { locks: new Locks() };
  t.after(() => { delete globalThis.navigator; });
  const srv = await new FakeServer().start();
  const url = srv.url + '?presence=1';
  const a = connect(url, { persist: false, key: 'p1', retry: 20 });
  t.after(async () => { a.close(); await srv.stop(); });
  srv.setPresence({ clients: 1, status: 'streaming', turn: 't1' });
  srv.publish('turn_start', { turn: 't1', session: 's' });
  for (let i = 0; i < 5; i++) srv.publish('note', {});
  await until(() => a.cursor == 'e1-6' && a.turn == 't1', 5000, 'the leader');
  const requests = srv.requests.length;

  // A tab that starts after the turn_start (a reload past it): nothing in
  // its part of the stream says a turn runs; the leader's cached presence does.
  const b = connect(url, { persist: false, key: 'p1', retry: 20, lastEventId: 'e1-6' });
  const got = [];
  b.on('presence', (p) => got.push(p));
  t.after(() => b.close());
  await until(() => got.length > 0, 5000, 'the presence in the second tab');
  assert.equal(b.leader, false);
  assert.deepEqual(got.at(-1), { session: 's', clients: 1, status: 'streaming', turn: 't1' });
  assert.equal(b.turn, 't1');
  assert.equal(srv.requests.length, requests, 'no stream of its own');
  assert.equal(srv.streams.size, 1);

  // Later presence frames reach both tabs; a cancel from the follower goes
  // straight to the server.
  srv.setPresence({ clients: 1, status: 'idle' });
  await until(() => a.presence.status == 'idle' && b.presence.status == 'idle' && b.turn == null, 5000, 'idle in both');
  const ans = await b.cancel({ cascade: true });
  assert.deepEqual(ans, { cancelled: [], held: [] });
});

test('cancel names its session: none on a many-sessions connection is an error; cancelUrl takes {session}', async (t) => {
  const srv = await new FakeServer().start();
  const many = connect(srv.url.replace(/\/session\/[^/]+\/events$/, '/events') + '?session=a&session=b', { persist: false, shared: false, retry: 20 });
  const fixed = connect(srv.url, { persist: false, shared: false, retry: 20, cancelUrl: srv.url.replace(/events$/, 'cancel') });
  t.after(async () => { many.close(); fixed.close(); await srv.stop(); });
  await assert.rejects(many.cancel({ cascade: true }), (e) => e.status == 0 && e.code == 'invalid_session_id' && /\{session\}/.test(e.message));
  await assert.rejects(fixed.cancel({ session: 'other' }), (e) => e.status == 0 && e.code == 'invalid_session_id' && /"other"/.test(e.message));
  assert.equal(srv.cancels.length, 0, 'nothing posted');
  await many.cancel({ session: 'b' });
  assert.equal(srv.cancels.at(-1).path, '/session/b/cancel');
  await fixed.cancel();
  assert.equal(srv.cancels.at(-1).path, '/session/s/cancel', "a fixed cancelUrl serves the connection's own session");
});
