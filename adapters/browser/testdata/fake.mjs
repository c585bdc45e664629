// A stand-in for the replaybus SSE endpoint and for a browser's Web Locks,
// for the module's Node tests. The server keeps one session's events under
// an epoch and answers GET /session/s/events as docs/protocol.md says, for
// the parts the module reads: Last-Event-ID resume, state_resync_required
// {epoch_reset}, replay_complete, merged frames (count, firstId), X-Event-Epoch.
// Tests queue faults that the next requests meet: an HTTP status, a cut after
// some bytes, or a replay merged into one frame. The real server is judged
// in Chromium (e2e/browser_test.go).
import http from 'node:http';

export class FakeServer {
  constructor() {
    this.epoch = 'e1';
    this.events = []; // {id, type, data}
    this.seq = 0;
    this.history = { e1: this.events }; // every incarnation's events
    this.faults = []; // applied to the next requests, one each
    this.requests = []; // {lastEventId, auth, at}
    this.streams = new Set();
    this.cancels = [];
    this.cancelAnswers = [];
    this.presence = { clients: 1, status: 'idle' };
    this.srv = http.createServer((q, r) => this.serve(q, r));
  }

  async start() {
    await new Promise((ok) => this.srv.listen(0, '127.0.0.1', ok));
    this.url = `http://127.0.0.1:${this.srv.address().port}/session/s/events`;
    return this;
  }

  async stop() {
    for (const s of this.streams) s.destroy();
    this.srv.closeAllConnections();
    await new Promise((ok) => this.srv.close(ok));
  }

  publish(type, data) {
    const ev = { id: ++this.seq, type, data };
    this.events.push(ev);
    for (const s of this.streams) s.send(ev);
    return ev.id;
  }

  // restart: a new incarnation, with ids from 1 again; open streams end.
  restart(epoch) {
    this.epoch = epoch;
    this.events = this.history[epoch] = [];
    this.seq = 0;
    for (const s of this.streams) s.destroy();
  }

  // cutAll ends every open stream in the middle of nothing.
  cutAll() {
    for (const s of this.streams) s.destroy();
  }

  frame(ev, extra = {}) {
    const env = { v: 1, id: ev.id, type: ev.type, session: 's', data: ev.data, ...extra };
    return `id: ${this.epoch}-${ev.id}\nevent: ${ev.type}\ndata: ${JSON.stringify(env)}\n\n`;
  }

  // setPresence sets the session's presence: streams asking with
  // presence=1 get it first, and now.
  setPresence(p) {
    this.presence = p;
    for (const s of this.streams) if (s.presence) s.write(this.presenceFrame());
  }

  presenceFrame() {
    return `event: presence\ndata: ${JSON.stringify({ v: 1, type: 'presence', session: 's', data: { session: 's', ...this.presence } })}\n\n`;
  }

  // cancel answers POST /session/{id}/cancel: the queued answer in
  // this.cancelAnswers, else 202 naming the active turn; every request is
  // kept in this.cancels.
  cancel(q, r) {
    let body = '';
    q.on('data', (d) => { body += d; });
    q.on('end', () => {
      this.cancels.push({ path: q.url, auth: q.headers.authorization || '', type: q.headers['content-type'], body: JSON.parse(body || '{}') });
      const [status, j] = this.cancelAnswers.shift() || [202, { cancelled: this.presence?.turn ? [this.presence.turn] : [], held: [] }];
      r.writeHead(status, { 'Content-Type': 'application/json' });
      r.end(JSON.stringify(j));
    });
  }

  serve(q, r) {
    if (q.method == 'POST') return this.cancel(q, r);
    const last = q.headers['last-event-id'] || '';
    this.requests.push({ lastEventId: last, auth: q.headers.authorization || '', at: Date.now() });
    const f = this.faults.shift() || {};
    if (f.status) {
      const h = { 'Content-Type': 'application/json', 'X-Event-Epoch': this.epoch };
      if (f.retryAfter != null) h['Retry-After'] = String(f.retryAfter);
      r.writeHead(f.status, h);
      return r.end(JSON.stringify({ code: f.code || 'fault', message: `fault ${f.status}` }));
    }
    if (f.contentType) {
      r.writeHead(200, { 'Content-Type': f.contentType });
      return r.end('<html></html>');
    }
    r.writeHead(200, { 'Content-Type': 'text/event-stream', 'X-Event-Epoch': this.epoch, 'Cache-Control': 'no-cache' });
    let budget = f.cutAfter ?? Infinity;
    const out = {
      write: (s) => {
        if (budget <= 0) return;
        if (s.length >= budget) {
          r.write(s.slice(0, budget));
          budget = 0;
          return out.destroy();
        }
        budget -= s.length;
        r.write(s);
      },
      send: (ev) => out.write(this.frame(ev)),
      destroy: () => {
        this.streams.delete(out);
        r.socket?.destroy();
      },
    };
    q.on('close', () => this.streams.delete(out));
    out.write(`retry: ${f.retry ?? 20}\n\n`);
    out.presence = /[?&]presence=1/.test(q.url);
    if (out.presence) out.write(this.presenceFrame());
    let from = 0;
    if (last) {
      const i = last.lastIndexOf('-'), e = last.slice(0, i), s = +last.slice(i + 1);
      if (e != this.epoch) {
        out.write(`event: state_resync_required\ndata: ${JSON.stringify({ v: 1, type: 'state_resync_required', session: 's', data: { reason: 'epoch_reset', lastDeliveredId: s, epoch: this.epoch } })}\n\n`);
      } else {
        from = s;
      }
    }
    const replay = this.events.filter((ev) => ev.id > from);
    if (f.merge && replay.length > 1) { // the replay as one merged frame of text chunks
      const a = replay[0], z = replay[replay.length - 1];
      const text = replay.map((ev) => ev.data.update.content.text).join('');
      out.write(this.frame({ ...z, data: { update: { content: { type: 'text', text } } } }, { firstId: a.id, count: replay.length, replay: true }));
    } else {
      for (const ev of replay) out.write(this.frame(ev, last ? { replay: true } : {}));
    }
    if (last) out.write(`event: replay_complete\ndata: {"v":1,"type":"replay_complete","session":"s","data":{"replayedCount":${replay.length}}}\n\n`);
    if (budget > 0) this.streams.add(out);
  }
}

// Locks is a stand-in for navigator.locks: exclusive, first come first
// served, with the signal option; a holder keeps the lock until the promise
// its callback returned settles.
export class Locks {
  constructor() { this.q = new Map(); }

  request(name, opt, cb) {
    return new Promise((ok, fail) => {
      const w = { cb, ok, fail };
      const q = this.q.get(name) || [];
      this.q.set(name, q);
      opt.signal?.addEventListener('abort', () => {
        const i = q.indexOf(w);
        if (i > 0 || (i == 0 && !w.held)) {
          q.splice(i, 1);
          fail(new Error('AbortError'));
        }
      });
      q.push(w);
      if (q.length == 1) this.grant(name);
    });
  }

  grant(name) {
    const q = this.q.get(name), w = q && q[0];
    if (!w) return;
    w.held = true;
    Promise.resolve(w.cb()).then(w.ok, w.fail).finally(() => {
      q.shift();
      this.grant(name);
    });
  }
}

// until polls cond every 5 ms until it holds, or fails after ms.
export const until = async (cond, ms = 5000, what = 'condition') => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((ok) => setTimeout(ok, 5));
  }
};
