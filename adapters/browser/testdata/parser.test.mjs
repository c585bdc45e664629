// The module's event-stream parser against the WHATWG rules (HTML §9.2.6):
// node --test adapters/browser/testdata/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Parser } from '../replaybus.js';

const parse = (...chunks) => {
  const p = new Parser();
  for (const c of chunks) p.push(c);
  return { frames: p.take(), p };
};

test('frames per line ending', () => {
  for (const [name, nl] of [['LF', '\n'], ['CRLF', '\r\n'], ['CR', '\r']]) {
    const { frames } = parse(`id: e-1${nl}event: a${nl}data: x${nl}${nl}data: y${nl}${nl}`);
    assert.deepEqual(frames, [{ data: 'x', event: 'a', id: 'e-1' }, { data: 'y', event: 'message', id: undefined }], name);
  }
});

test('a CRLF split across pushes is one line end', () => {
  const { frames } = parse('data: a\r', '\n', '\r', '\ndata: b\r\n\r\n');
  assert.deepEqual(frames.map((f) => f.data), ['a', 'b']);
});

test('multi-line data joins with LF; one leading space is stripped', () => {
  const { frames } = parse('data:  two spaces\ndata:none\ndata\ndata: \n\n');
  assert.equal(frames[0].data, ' two spaces\nnone\n\n');
});

test('comments, unknown fields and blank blocks dispatch nothing', () => {
  const { frames, p } = parse(': heartbeat\n\nfoo: bar\n\nid: e-9\n\n: another\n');
  assert.deepEqual(frames, []);
  assert.equal(p.id, 'e-9', 'an id-only block still sets the last event ID');
});

test('id: the last event ID persists; a frame carries only its own; NUL is refused', () => {
  const { frames, p } = parse('id: e-1\ndata: a\n\ndata: b\n\nid: bad\0id\ndata: c\n\nid\ndata: d\n\n');
  assert.deepEqual(frames.map((f) => f.id), ['e-1', undefined, undefined, '']);
  assert.equal(p.id, '', 'an empty id: resets it');
});

test('retry: only digits', () => {
  assert.equal(parse('retry: 250\n\n').p.retry, 250);
  assert.equal(parse('retry: 25x\n\nretry: -1\n\n').p.retry, 0);
});

test('a BOM is skipped at the start only', () => {
  const { frames } = parse('\uFEFF', 'data: a\n\ndata: \uFEFFb\n\n');
  assert.deepEqual(frames.map((f) => f.data), ['a', '\uFEFFb']);
});

test('an unfinished frame is not dispatched', () => {
  assert.deepEqual(parse('id: e-1\ndata: a\n').frames, []);
  assert.deepEqual(parse('data: a').frames, []);
});

// Any split of a stream into pushes gives the same frames (seeded).
test('chunking does not change the frames', () => {
  const stream = 'retry: 3000\r\n\r\n: hb\n\nid: e-1\r\nevent: t\rdata: {"a":1}\ndata: x\r\n\r\nid: e-2\ndata:y\n\n\ndata: z\r\r';
  const want = parse(stream).frames;
  let seed = 7;
  const rnd = (n) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
  for (let i = 0; i < 500; i++) {
    const chunks = [];
    for (let at = 0; at < stream.length;) {
      const n = 1 + rnd(6);
      chunks.push(stream.slice(at, at + n));
      at += n;
    }
    assert.deepEqual(parse(...chunks).frames, want, JSON.stringify(chunks));
  }
  assert.equal(want.length, 3);
});
