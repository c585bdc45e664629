// replaybus.js: the browser client of a replaybus event stream; docs/browser.md
// has the API and the rules. One leader tab (Web Locks) reads the stream, the
// others get its frames over BroadcastChannel; each tab keeps its own cursor.
const G = globalThis;

export const connect = (url, options) => new Connection(url, options);

// pc: "<epoch>-<seq>" → [epoch, seq], or null; of a connection cursor
// ("<epoch>-<seq>;+c:scope;-a;@c=17") its main part.
const pc = (c) => {
  c = c && c.split(';')[0];
  const i = c ? c.lastIndexOf('-') : -1;
  return i > 0 ? [c.slice(0, i), +c.slice(i + 1)] : null;
};


// env: a frame's data as its envelope
const env = (d) => {
  try { return JSON.parse(d); } catch { return { type: 'message', data: d }; }
};

const store = (k, v) => {
  try {
    const s = G.sessionStorage;
    return v === undefined ? s.getItem(k) : v ? s.setItem(k, v) : s.removeItem(k);
  } catch { /* no storage */ }
};

// backoff (ms): base doubled per failure up to cap, drawn from [d/2, d]; a
// Retry-After floor draws from [floor, floor + max(d, floor)/2].
export const backoff = (base, cap, fails, floor) => {
  let d = base;
  for (let i = 0; i < fails && d < cap; i++) d *= 2;
  d = Math.min(d, Math.max(cap, base));
  return floor > 0 ? floor + Math.random() * Math.max(d, floor) / 2 : d / 2 + Math.random() * d / 2;
};

const retryAfter = (h) => !h ? 0 : /^\d+$/.test(h) ? h * 1000 : Math.max(0, Date.parse(h) - Date.now()) || 0;

// Parser: the WHATWG event-stream parser. push(text), take() → [{data, event,
// id}], id only when the block had one; retry: sets .retry.
export class Parser {
  constructor() {
    this.b = '';
    this.out = [];
    this.id = ''; // EventSource's last event ID
    this.retry = 0;
    this.clear();
  }

  clear() {
    this.d = null;
    this.t = '';
    this.i = undefined;
  }

  push(s) {
    if (this.cr && s[0] == '\n') s = s.slice(1); // CR|LF split across pushes
    this.cr = false;
    const b = this.b + s, re = /\r\n|\r|\n/g;
    let i = 0, m;
    if (!this.started && b) {
      this.started = true;
      if (b[0] == '\uFEFF') i = 1;
    }
    while ((m = re.exec(b))) {
      this.cr = m[0] == '\r' && re.lastIndex == b.length;
      this.line(b.slice(i, m.index));
      i = re.lastIndex;
    }
    this.b = b.slice(i);
  }

  line(l) {
    if (!l) { // a blank line dispatches
      if (this.d) this.out.push({ data: this.d.join('\n'), event: this.t || 'message', id: this.i });
      return this.clear();
    }
    const c = l.indexOf(':');
    if (!c) return; // a comment
    const f = c < 0 ? l : l.slice(0, c);
    let v = c < 0 ? '' : l.slice(c + 1);
    if (v[0] == ' ') v = v.slice(1);
    if (f == 'data') (this.d ||= []).push(v);
    else if (f == 'event') this.t = v;
    else if (f == 'id' && !v.includes('\0')) this.i = this.id = v;
    else if (f == 'retry' && /^\d+$/.test(v)) this.retry = +v;
  }

  take() {
    const o = this.out;
    this.out = [];
    return o;
  }
}

export class Connection {
  constructor(url, o = {}) {
    const u = new URL(url, G.location?.href);
    for (const x of o.sessions || []) u.searchParams.append('session', x.session ? x.session + ':' + (x.scope || 'session') : x + ':session');
    this.url = u.href;
    this.o = o;
    // many sessions on one connection: GET /events?session=a&session=b:descendants
    this.multi = u.searchParams.has('session');
    this.sessions = []; // the set, as the server resolved it: [{session, scope}]
    this.key = o.key || 'replaybus:' + this.url.replace(/[?&](lastEventId|last_event_id)=[^&#]*/g, '');
    const m = /\/session\/([^/?#]+)\/events/.exec(this.url);
    this.session = o.session ?? (m ? decodeURIComponent(m[1]) : '');
    this.status = 'connecting';
    this.leader = false;
    this.tab = Math.random().toString(36).slice(2);
    this._h = {};
    this._off = [];
    this.turns = {}; // session → its active turn's id
    this.presences = {}; // session → its last presence
    this._cur = o.lastEventId ?? (o.persist === false ? '' : store(this.key) || '');
    queueMicrotask(() => this._start()); // once the caller's listeners are on
  }

  get cursor() { return this._cur; }

  get turn() { return this.turns[this.session] || null; }

  get presence() { return this.presences[this.session] || null; }

  // cancel posts a cancel to the session's cancel route (the stream URL's
  // /session/{id}/events as /session/{id}/cancel; a cancelUrl's {session}
  // replaced): resolves to the 202's {cancelled, held}, rejects with
  // {status, code, message} (status 0: nothing was posted).
  async cancel({ session = this.session, ...b } = {}) {
    const c = this.o.cancelUrl, e = encodeURIComponent(session);
    if (!session) throw { status: 0, code: 'invalid_session_id', message: 'cancel() needs {session}: this connection has no session of its own (' + this.url + ')' };
    if (c && !c.includes('{session}') && session != this.session) throw { status: 0, code: 'invalid_session_id', message: 'cancelUrl ' + c + ' has no {session} for session ' + JSON.stringify(session) };
    const u = c ? c.replaceAll('{session}', e) : this.url.replace(/(\/session\/[^/?#]+)?\/events([?#].*)?$/, '/session/' + e + '/cancel');
    for (let n = 0; ; n++) {
      const h = await this._hdr(n, { 'Content-Type': 'application/json' });
      const r = await fetch(u, { method: 'POST', headers: h, body: JSON.stringify(b), cache: 'no-store', credentials: this.o.credentials });
      const j = await r.json().catch(() => ({}));
      if (r.ok) return j;
      if (r.status != 401 || !this.o.token || n) throw { status: r.status, code: j.code, message: j.message || r.statusText };
    }
  }

  // add puts a session in the set of a many-sessions connection (POST
  // {url}/{connection}): {scope, from} as the route's; resolves to its
  // answer once applied; rejects with {status, code, message}.
  add(session, { scope = 'session', from } = {}) { return this._change({ add: [{ session, scope, from }] }); }

  remove(session) { return this._change({ remove: [session] }); }

  async _change(b) {
    for (let n = 0, a = 0; ; ) {
      const conn = this._conn || await new Promise((r) => (this._cw ||= []).push(r));
      const r = await fetch(this.url.replace(/[?#].*/, '') + '/' + conn, { method: 'POST', headers: await this._hdr(n, { 'Content-Type': 'application/json' }), body: JSON.stringify(b), cache: 'no-store', credentials: this.o.credentials });
      const j = await r.json().catch(() => ({}));
      if (r.ok) return j;
      if (r.status == 401 && this.o.token && !n++) continue;
      if (j.code == 'connection_not_found' && a++ < 5) { // the stream is being reopened: on the next one
        if (this._conn == conn) this._conn = null;
        continue;
      }
      throw { status: r.status, code: j.code, message: j.message || r.statusText };
    }
  }

  // _hdr: the request's headers, the token refreshed when refresh.
  async _hdr(refresh, h) {
    const o = this.o;
    h = { ...h, ...(typeof o.headers == 'function' ? await o.headers() : o.headers) };
    if (o.token) h.Authorization = 'Bearer ' + await o.token({ refresh: refresh > 0 });
    return h;
  }

  on(type, fn) {
    (this._h[type] ||= new Set()).add(fn);
    return () => this._h[type].delete(fn);
  }

  close() {
    this._stop();
    this._dead = true;
    this._off.forEach((f) => f());
    this._st('closed');
  }

  _emit(type, a, b) {
    for (const f of this._h[type] || []) {
      try { f(a, b); } catch (e) { setTimeout(() => { throw e; }); }
    }
  }

  _start() {
    if (this._dead) return;
    const on = (t, f, el = G) => {
      if (!el?.addEventListener) return;
      el.addEventListener(t, f);
      this._off.push(() => el.removeEventListener(t, f));
    };
    const off = () => { this._offAt = Date.now(); }, d = G.document;
    on('online', () => this._nudge(true));
    on('offline', off);
    on('freeze', off, d); // a frozen page's stream may not wake with it
    on('resume', () => this._nudge(true), d);
    on('visibilitychange', () => d.visibilityState == 'visible' && this._nudge(), d);
    on('pagehide', () => this._stop());
    on('pageshow', (e) => e.persisted && this._begin());
    this._begin();
  }

  _begin() {
    this._stopped = false;
    const L = G.navigator?.locks;
    if (this.o.shared === false || this.multi || !L || !G.BroadcastChannel) return this._lead();
    const ch = this._ch = new BroadcastChannel(this.key);
    ch.onmessage = (e) => this._msg(e.data);
    this._lock = new AbortController();
    L.request(this.key, { signal: this._lock.signal }, () => this._lead()).catch(() => {});
    this._hello();
  }

  _stop() {
    this._stopped = true;
    this.leader = false;
    this._release?.();
    this._lock?.abort();
    this._ac?.abort();
    this._ch?.close();
    this._ch = null;
    clearTimeout(this._ht);
    clearTimeout(this._zt);
    this._wake?.();
  }

  _post(m) {
    m.L = this.tab;
    this._ch?.postMessage(m);
  }

  _st(s, err) {
    if (err) {
      this._until = Math.max(this._until || 0, err.until || 0); // a Retry-After, for whichever tab leads next
      this._emit('error', err);
    }
    if (s != this.status) {
      this.status = s;
      this._emit('status', s);
    }
    if (this.leader) this._post({ t: 'st', s, err });
  }

  // ---- a follower --------------------------------------------------------

  _msg(m) {
    if (m.t == 'h') return this.leader && this._join(m.tab, m.c, m.n);
    if (m.t == 'n') return this.leader && (m.z ? Date.now() >= this._due && this._wake?.() : this._nudge());
    if (this.leader || (m.to && m.to != this.tab)) return;
    if (m.t == 'z') { // the leader sleeps until m.at: a visible tab's timer wakes it if the browser throttles a hidden leader's
      clearTimeout(this._zt);
      if (G.document?.visibilityState != 'hidden') this._zt = setTimeout(() => this._post({ t: 'n', z: 1 }), m.at - Date.now() + 50);
      return;
    }
    if (m.t == 'l') {
      this._L = m.L;
      return this._hello();
    }
    if (m.t == 's') {
      if (m.n == this._n) this._sync(m);
    } else if (m.L == this._L) {
      if (m.t == 'f') this._synced && this._frames(m.f);
      else if (m.t == 'st') this._st(m.s, m.err);
    }
  }

  // _hello asks the leader for what follows this tab's cursor; no frame is
  // taken until its answer ('s') comes.
  _hello() {
    this._synced = false;
    this._n = Math.random();
    this._post({ t: 'h', tab: this.tab, c: this._cur, n: this._n });
    clearTimeout(this._ht);
    this._ht = setTimeout(() => this._synced || this.leader || this._stopped || this._hello(), 1000);
  }

  _sync(m) {
    this._L = m.L;
    this._epoch = m.e || this._epoch;
    this._synced = true;
    const c = pc(this._cur);
    if (c && m.e && c[0] != m.e && !this.multi) { // another incarnation's: served as a new tab (many sessions: the server's resets name theirs)
      this._set('');
      this._emit('reset', { reason: 'epoch_reset', epoch: m.e, session: this.session });
    }
    this._st(m.s, m.err);
    this._frames(m.f);
    for (const d of Object.values(m.p || {})) this._take('', env(d)); // the current presence
  }

  _set(c) {
    this._cur = c;
    if (this.o.persist !== false) store(this.key, c);
  }

  _frames(f) {
    for (const [c, d, same] of f) {
      if (!this._synced || this._dead) return;
      this._take(c, env(d), same);
    }
  }

  // _take judges one frame against this tab's own cursor (docs/browser.md);
  // same: an epoch_reset answers a cursor of its own incarnation.
  _take(c, env, same) {
    const t = env.type, x = env.data || {}, p = pc(c);
    let cur = pc(this._cur);
    if (p) this._epoch = p[0];
    if (t == 'snapshot') {
      if (p && (!cur || cur[0] != p[0] || cur[1] < p[1])) {
        this._set(c);
        this._emit('snapshot', x.state, { reason: x.reason, cursor: c, session: env.session });
      }
    } else if (t == 'stream_start') {
      if (!cur && c) this._set(c);
    } else if (env.id != null && p) {
      if (cur && cur[0] != p[0]) { // a restart nobody announced to this tab
        this._emit('reset', { reason: 'epoch_reset', epoch: p[0], session: env.session });
        cur = [p[0], 0];
      }
      if (!this.multi) { // a many-sessions connection is this tab's own: the server owes it exactly what comes
        if (cur && p[1] <= cur[1]) return; // had it
        if (cur && env.firstId <= cur[1]) return this._behind(); // merged across the cursor: ask again
      }
      env.cursor = c;
      this._set(c);
      if (t == 'turn_start') this._tn(env.session, x.turn);
      if (t == 'turn_end' && this.turns[env.session] == x.turn) this._tn(env.session, null, x);
      this._emit('event', env);
    } else if (t == 'state_resync_required' && this.multi) { // one per session concerned
      if (x.reason == 'epoch_reset' && (!cur || cur[0] != x.epoch)) this._set(x.epoch + '-0' + (this._cur.match(/;[-+][^;]*/g) || []).join(''));
      this._emit('reset', { ...x, session: env.session });
    } else if (t == 'state_resync_required') {
      if (x.reason == 'epoch_reset') {
        if (!cur || (cur[0] == x.epoch && !same)) return;
        this._set(x.epoch + '-0');
        for (const s in this.turns) this._tn(s, this.presences[s]?.turn); // another incarnation's turns are over
      } else if (cur ? cur[1] >= (x.completeFromId ? x.completeFromId - 1 : x.lastDroppedId || 1 / 0) : x.reason == 'ring_evicted') {
        return; // a gap before this tab's cursor
      }
      this._emit('reset', { ...x, session: env.session });
    } else if (/^(connection|session_(added|removed|error))$/.test(t)) {
      const a = this.sessions.filter((e) => e.session != x.session);
      if (t == 'connection') {
        this._conn = x.connection;
        if (c) this._set(c);
        this._cw?.splice(0).forEach((f) => f(x.connection));
        this.sessions = x.sessions;
      } else {
        this.sessions = t == 'session_added' ? [...a, { session: x.session, scope: x.scope }] : a;
        if (c) this._set(c); // the connection cursor of the new set
      }
      this._emit('frame', env);
    } else if (t == 'presence') {
      this.presences[x.session] = x;
      this._tn(x.session, x.turn);
      this._emit('presence', x);
    } else {
      this._emit('frame', env);
    }
  }

  // _tn sets the session's active turn (null: none; end: its turn_end's data).
  _tn(s, turn, end) {
    const was = this.turns[s] || null;
    if (was == (turn ||= null)) return;
    this.turns[s] = turn;
    this._emit('turn', { session: s, turn: turn || was, active: !!turn, reason: end?.reason, message: end?.message });
  }

  _behind() {
    this._synced = false;
    setTimeout(() => this.leader ? this._join(this.tab, this._cur, 0) : this._hello());
  }

  // ---- the leader ----------------------------------------------------------

  _lead() {
    if (this._stopped) return;
    this.leader = true;
    this._post({ t: 'l' });
    this._pend = new Map();
    this._lp = {};
    this._log = null;
    this._ccur = undefined;
    this._synced = false;
    this._join(this.tab, this._cur, 0);
    this._loop(this._g = (this._g || 0) + 1);
    return new Promise((r) => { this._release = r; });
  }

  // _join answers a hello from the frame log when it holds all after the
  // cursor, else reconnects from the oldest cursor waiting.
  _join(tab, c, n) {
    if (this._open && this._covers(c)) return this._send(tab, n, c);
    this._pend.set(tab, [c, n]);
    if (this._open) this._again();
  }

  _again() {
    this._now = true;
    this._ac.abort();
  }

  _covers(c) {
    const L = this._log, p = pc(c);
    if (!p || p[0] != this._epoch) return L.all || L.from === 0; // a new tab
    return p[1] >= L.from && !L.f.some((x) => x.f <= p[1] && p[1] < x.s);
  }

  _send(tab, n, c) {
    const p = pc(c), s = p && p[0] == this._epoch ? p[1] : -1;
    const m = { t: 's', to: tab, n, e: this._epoch, s: this.status, err: this._fatal, f: this._log.f.filter((x) => !(x.s < s || x.p)).map((x) => [x.c, x.d, x.same]), p: this._lp };
    if (tab != this.tab) return this._post(m);
    m.L = tab;
    this._sync(m);
  }

  // _base: the oldest of the connection's position and the waiting tabs'
  // cursors ('' for none); a new tab counts as position 0.
  _base() {
    if (this.multi) return this._cur;
    let b, none = false;
    for (const c of [this._ccur, ...[...this._pend.values()].map((x) => x[0])]) {
      if (c === undefined) continue;
      let p = pc(c);
      if (!p || (this._epoch && p[0] != this._epoch)) {
        if (!this._epoch) {
          none = true;
          continue;
        }
        p = [this._epoch, 0];
      }
      if (!b || p[1] < b[1]) b = p;
    }
    return none || !b ? '' : b.join('-');
  }

  _nudge(online) {
    if (online) this._fast = Date.now() + 5000; // the network may take a moment: retry soon
    if (!this.leader) return this._post({ t: 'n' });
    if (this._wake) return this._wake();
    // back online (or resumed), nothing read since — or a connect still
    // unanswered that began before: likely dead
    if (online && (this._open ? !(this._last > this._offAt) : this._t0 <= this._offAt)) this._again();
  }

  // _sleep waits ms; _wake cuts it short, but not below floor (a Retry-After).
  _sleep(ms, floor) {
    const end = Date.now() + floor;
    this._post({ t: 'z', at: this._due = Date.now() + ms });
    return new Promise((r) => {
      let t = setTimeout(r, ms);
      this._wake = () => {
        clearTimeout(t);
        t = setTimeout(r, end - Date.now());
      };
    }).then(() => { this._wake = null; });
  }

  async _loop(g) {
    const o = this.o, live = () => this.leader && this._g == g;
    let fails = 0, n401 = 0, since404 = 0, floor = Math.max(0, (this._until || 0) - Date.now()), wait = floor > 0;
    while (live()) {
      if (wait) this._st(this._opened ? 'reconnecting' : 'connecting');
      if (wait && !this._now) {
        const d = backoff(this._retry || o.retry || 3000, o.maxBackoff || 30000, fails, floor);
        await this._sleep(Date.now() < this._fast ? Math.max(floor, Math.min(d, 125 + Math.random() * 125)) : d, floor);
        if (!live()) return;
      }
      wait = true;
      this._now = false;
      floor = 0;
      const base = this._base(), ac = this._ac = new AbortController(), idle = o.idleTimeout ?? 45000;
      let r, err, t;
      const arm = () => { // silent for idle ms, heartbeats included: dead
        clearTimeout(t);
        if (idle) t = setTimeout(() => ac.abort(), idle);
      };
      arm();
      this._t0 = Date.now();
      try {
        const h = await this._hdr(n401, { Accept: 'text/event-stream' });
        if (base) h['Last-Event-ID'] = base;
        r = await fetch(this.url, { method: o.method, headers: h, body: o.body, signal: ac.signal, cache: 'no-store', credentials: o.credentials });
        if (!r.ok) {
          const j = await r.json().catch(() => ({}));
          err = { status: r.status, code: j.code, message: j.message || r.statusText };
        }
      } catch (e) {
        err = { status: 0, message: String(e?.message || e) };
      }
      clearTimeout(t);
      if (!live()) return;
      if (r && !r.ok) {
        const s = r.status;
        floor = retryAfter(r.headers.get('Retry-After'));
        if (floor) err.until = Date.now() + floor;
        since404 = s == 404 ? since404 || Date.now() : 0;
        n401 = s == 401 ? n401 + 1 : 0;
        if (s == 401 && o.token && n401 < 3) { // a fresh token: now, then after a backoff
          this._now = n401 == 1;
        } else if (!(s == 408 || s == 429 || s >= 500 || (s == 404 && Date.now() - since404 < (o.notFoundGrace ?? 30000)))) {
          return this._st('closed', this._fatal = { ...err, fatal: true });
        }
      } else if (r && !/^text\/event-stream/i.test(r.headers.get('Content-Type'))) {
        return this._st('closed', this._fatal = { status: r.status, code: 'not_event_stream', message: r.headers.get('Content-Type'), fatal: true });
      }
      if (err) {
        fails++;
        this._st(this._opened ? 'reconnecting' : 'connecting', { ...err, retry: true });
        continue;
      }
      n401 = since404 = 0;
      const n = await this._read(r, base, r.headers.get('X-Event-Epoch') || '', ac, arm);
      clearTimeout(t);
      if (!live()) return;
      if (this._closed) return this._st('closed');
      fails = n ? 0 : this._now ? fails : fails + 1;
    }
  }

  // _read: the log for this answer's cursor, the waiting tabs synced, every
  // frame forwarded; returns how many came.
  async _read(r, base, E, ac, arm) {
    const b = pc(base);
    if (!(this._log && base && base == this._ccur && E == this._epoch)) { // not a continuation
      this._log = !b || b[0] != E ? { f: [], all: true } : { f: [], all: false, from: b[1] };
      this._ccur = base; // the connection's position until its first cursor
    }
    this._epoch = E;
    this._open = this._opened = true;
    this._st('open');
    for (const [tab, [c, n]] of this._pend) {
      if (this._covers(c)) {
        this._pend.delete(tab);
        this._send(tab, n, c);
      }
    }
    if (this._pend.size) this._again(); // a tab is behind this cursor
    const rd = r.body.pipeThrough(new TextDecoderStream()).getReader(), p = new Parser();
    let n = 0;
    try {
      for (;;) {
        arm();
        const { value, done } = await rd.read();
        if (done || !this.leader) break;
        this._last = Date.now();
        p.push(value);
        if (p.retry) this._retry = p.retry;
        n += this._forward(p.take(), E, base);
      }
    } catch { /* cut */ }
    this._open = false;
    this._conn = null;
    ac.abort();
    return n;
  }

  _forward(frames, E, base) {
    const out = [], max = this.o.shareBuffer || 2000;
    for (const { data, id } of frames) {
      const e = env(data), c = !id ? '' : /^\d+$/.test(id) ? E + '-' + id : id, x = e.data || {};
      if (c) this._ccur = c;
      let same;
      if ((e.type == 'state_resync_required' || e.type == 'snapshot') && x.reason == 'epoch_reset') {
        this._log = { f: [], all: true }; // a new incarnation starts here
        same = pc(base)?.[0] == x.epoch || undefined; // past its newest id, not another's cursor
      }
      const L = this._log, s = pc(this._ccur)?.[1], p = e.type == 'presence';
      if (p) this._lp[x.session] = data; // state: the newest goes to a tab that joins
      if (L.from === undefined && c) L.from = s;
      L.f.push({ c, d: data, s, f: e.firstId, same, p });
      if (L.f.length > max) { // keep the newer half
        const k = L.f.length - (max >> 1);
        L.from = Math.max(L.from || 0, L.f[k - 1].s || 0);
        L.all = false;
        L.f = L.f.slice(k);
      }
      out.push([c, data, same]);
      if (this._synced) this._take(c, e, same);
      if (e.type == 'session_closed' && e.id && !e.replay && e.session == this.session) this._closed = true;
    }
    if (out.length) this._post({ t: 'f', f: out });
    if (this._closed) this._ac.abort();
    return out.length;
  }
}
