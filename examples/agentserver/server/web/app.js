// agentserver page: watches one replaybus session with replaybus.js (the
// browser module: one connection per origin across tabs, exact resume,
// restarts, backoff) or over a WebSocket of its own (the transport select;
// ?transport=ws).
//
// What tests can read:
//   window.receivedIds  every event id received on the current subscription, in arrival order
//   window.frames       synthetic frames received ({type, data})
//   window.connState    "connecting" | "open" | "reconnecting" | "closed"
//   window.agentText    per session, the agent_message_chunk text received (merged rows included;
//                       a snapshot frame replaces it with the server's transcript)
//   window.closeCodes   every WebSocket close seen ({code, reason}), oldest first
//   window.restarts     each server restart the page followed: {epoch, snapshot, replayed, historyLost}
//   window.wsProtocols  the subprotocol each WebSocket opened with (ws.protocol), oldest first:
//                       "replaybus.batch.v1" (every message an array of envelopes) or "" (one per message)
//   window.streamErrors every refused or failed connect the module reported ({status, code, message, retry?, fatal?})
//   <pre id="ids">      the same ids, space-separated (refreshed at most once a second)
// The turn bar (presence, agent status, messages, Stop) is turns.js: window.pageTurns.
import { connect as connectModule } from '/replaybus.js';

(() => {
  const $ = (id) => document.getElementById(id);
  const MAX_ROWS = 400;   // rows kept in the event log
  const MAX_FLOW = 60;    // items kept per agent card
  const MAX_CLOSED = 20;  // closed agents' cards kept, folded under "closed agents" (oldest go first)
  const POLL_MS = 2000;
  const NOT_FOUND_GRACE_MS = 30000; // how long the module retries a 404 (a restarted server re-creating its sessions)
  const FRAME_TYPES = new Set(['state_resync_required', 'replay_complete', 'slow_client_warning', 'client_evicted', 'snapshot']);
  const turnsBar = () => window.pageTurns; // turns.js, when loaded

  const st = {
    session: '', scope: 'session',
    rb: null,         // the module's Connection (SSE)
    es: null,         // the WebSocket
    errNotice: false, // a connect error's notice is up: gone once the stream opens
    transport: 'sse', // 'ws': one WebSocket, resumed with a {"resume": …} first message
    wsEpoch: '',      // the epoch that came with the last id over WebSocket
    wsFailures: 0,    // consecutive WebSocket drops, for the backoff
    wsBatch: true,    // offer WS_BATCH on the next WebSocket (tests set false to get one frame per message)
    wsMessages: 0,    // WebSocket messages received (fewer than frames when batched)
    slowMs: 0,        // tests: busy-wait this long per frame (a slow page)
    coalesce: false, // ?coalesce=acp&throttle=150ms: the server merges chunks; rows say how many events they hold
    maxQueued: '',   // ?maxQueued= (16–2048): a small queue shows slow-client warnings and evictions
    snapshot: false, // ?snapshot=1: start from the server's transcript (a snapshot frame), then the events after it
    resyncing: false, // an epoch_reset notice is up until the replay completes
    cursor: '',      // raw id of the last event (maybe "<epoch>-<seq>"): what a manual reconnect sends
    lastSeq: 0,      // highest numeric id received
    types: new Set(), sessions: [],
    closedSessions: new Map(), // session → when its session_closed arrived (performance.now()): hidden from the list
    received: 0, replayed: 0, dups: 0, frames: 0, connects: 0,
  };
  window.receivedIds = [];
  window.frames = [];
  window.connState = 'closed';
  window.agentText = {};
  window.closeCodes = [];
  window.wsProtocols = [];
  window.restarts = [];
  window.streamErrors = [];
  window.replaybusPage = st;

  // ---- connection -------------------------------------------------------

  function setState(s) {
    window.connState = s;
    const el = $('state');
    el.dataset.state = s;
    el.textContent = s;
  }

  function reset() {
    window.receivedIds = [];
    window.frames = [];
    window.agentText = {};
    Object.assign(st, { cursor: '', lastSeq: 0, received: 0, replayed: 0, dups: 0, frames: 0, connects: 0, wsEpoch: '', wsFailures: 0, wsMessages: 0 });
    window.streamErrors = [];
    $('log').replaceChildren();
    pendingRows.length = 0;
    agents.clear();
    hideNotice();
    scheduleRender();
  }

  function streamURL() {
    const q = new URLSearchParams({ scope: st.scope });
    if (turnsBar()) turnsBar().query(q); // ?client=, ?presence=1
    if (st.coalesce) { q.set('coalesce', 'acp'); q.set('throttle', '150ms'); }
    if (st.maxQueued) q.set('maxQueued', st.maxQueued);
    if (st.snapshot) q.set('snapshot', '1'); // a cursor (Last-Event-ID) wins over it on a resume
    return `/session/${encodeURIComponent(st.session)}/events?${q}`;
  }

  function closeStream() {
    const { rb, es } = st;
    st.rb = st.es = null;
    if (rb) rb.close();
    if (es) es.close();
  }

  function connect(cursor) {
    closeStream();
    if (!st.session) { setState('closed'); return; }
    if (st.transport === 'ws') { connectWS(cursor); return; }
    // The module: every tab of this origin with the same options shares one
    // connection; it resumes across cuts, restarts and 4xx/5xx answers
    // worth another attempt (docs/browser.md). The page rebuilds its view
    // from the stream on each load: persist: false.
    const rb = connectModule(streamURL(), { persist: false, lastEventId: cursor, retry: 1000, maxBackoff: 10000, notFoundGrace: NOT_FOUND_GRACE_MS });
    st.rb = rb;
    const on = (type, f) => rb.on(type, (...a) => { if (rb === st.rb) f(...a); });
    on('status', (s) => {
      setState(s);
      if (s === 'open') {
        st.connects++;
        if (st.errNotice) { st.errNotice = false; hideNotice(); }
        const via = rb.leader ? '' : ' (through the tab that holds the connection)';
        connRow((st.connects === 1 && !cursor ? 'connected' : `connected again, resuming after ${rb.cursor || 'the start'}`) + via);
      } else if (s === 'reconnecting') {
        connRow(`connection lost; resuming after ${rb.cursor || '(none)'}`);
      }
    });
    on('event', (env) => onEnvelope(env, env.type, env.cursor));
    on('frame', (env) => onEnvelope(env, env.type, ''));
    on('reset', (x) => onEnvelope({ type: 'state_resync_required', session: x.session, data: x }, 'state_resync_required', ''));
    on('snapshot', (state, x) => onEnvelope({ type: 'snapshot', session: x.session,
      data: { state, reason: x.reason, lastEventId: +x.cursor.slice(x.cursor.lastIndexOf('-') + 1) } }, 'snapshot', x.cursor));
    on('presence', (p) => { if (turnsBar()) turnsBar().presence(p); });
    on('turn', () => { if (turnsBar()) turnsBar().render(); });
    on('error', (e) => {
      window.streamErrors.push(e);
      const what = e.status === 0 ? 'the server is unreachable' : e.status === 404
        ? `session ${st.session} is not there yet (${e.code}: the server may have restarted)`
        : `${e.code || e.status}: ${e.message}`;
      if (e.fatal) {
        showNotice(`${what}; the stream stopped`);
        connRow(`connection closed: ${e.status} ${e.code || ''}`);
        return;
      }
      const wait = e.until ? ` in ${Math.max(0, (e.until - Date.now()) / 1000).toFixed(1)} s` : '';
      const grace = e.status === 404 ? `; trying again for up to ${NOT_FOUND_GRACE_MS / 1000} s` : '';
      showNotice(`${what}${grace} — retrying${wait}`, 'info');
      st.errNotice = true;
    });
  }

  // ---- WebSocket transport ---------------------------------------------

  const WS_FINAL = new Set([1000, 1003, 1009, 1011]); // do not reconnect after these
  // The batched form (docs/protocol.md, "Batched messages"): offered on every
  // connect; when the server selects it (ws.protocol after open) every
  // message is a JSON array of envelopes, else each message is one envelope.
  const WS_BATCH = 'replaybus.batch.v1';

  function connectWS(cursor) {
    const q = new URLSearchParams({ scope: st.scope });
    if (turnsBar()) turnsBar().query(q); // ?client=, ?presence=1
    if (st.coalesce) { q.set('coalesce', 'acp'); q.set('throttle', '150ms'); }
    if (st.snapshot && !cursor) q.set('snapshot', '1');
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(`${proto}//${location.host}/session/${encodeURIComponent(st.session)}/ws?${q}`, st.wsBatch ? [WS_BATCH] : []);
    st.es = ws;
    let batched = false;
    setState(cursor ? 'reconnecting' : 'connecting');
    ws.onopen = () => {
      if (ws !== st.es) return;
      batched = ws.protocol === WS_BATCH;
      window.wsProtocols.push(ws.protocol);
      // A browser cannot set headers: the cursor and its epoch go in the
      // first message; {} starts without one.
      const resume = cursor ? { lastEventId: String(st.lastSeq || cursor), epoch: st.wsEpoch || undefined } : {};
      ws.send(JSON.stringify({ resume }));
      st.connects++;
      setState('open');
      const form = batched ? ' (batched messages)' : '';
      connRow(st.connects === 1 && !cursor ? `WebSocket connected${form}` : `WebSocket connected again${form}, resuming after ${cursor || 'the start'}`);
    };
    ws.onmessage = (e) => {
      if (ws !== st.es) return;
      st.wsMessages++;
      let envs;
      try { envs = batched ? JSON.parse(e.data) : [JSON.parse(e.data)]; } catch { envs = null; }
      if (!Array.isArray(envs)) { connRow(`malformed WebSocket message ignored: ${String(e.data).slice(0, 80)}`); return; }
      for (const env of envs) {
        if (ws !== st.es) return; // a frame of this message ended the connection
        if (env.id) { st.wsEpoch = env.epoch || st.wsEpoch; st.wsFailures = 0; }
        onEnvelope(env, env.type || 'message', '');
      }
    };
    ws.onclose = (e) => {
      window.closeCodes.push({ code: e.code, reason: e.reason });
      $('close-code').textContent = `${e.code}${e.reason ? ' ' + e.reason : ''}`;
      if (ws !== st.es) return;
      st.es = null;
      const final = WS_FINAL.has(e.code) || (e.code === 1008 && e.reason !== 'slow consumer');
      if (final) {
        setState('closed');
        connRow(`WebSocket closed ${e.code} ${e.reason}`);
        if (e.code !== 1000) showNotice(`closed ${e.code}: ${e.reason || 'no reason'}`);
        return;
      }
      // 1001 (server restart), 1006 (cut), 1008 slow consumer, 1013: resume.
      st.wsFailures++;
      const delay = Math.min(250 * 2 ** (st.wsFailures - 1), 5000);
      setState('reconnecting');
      connRow(`WebSocket closed ${e.code} ${e.reason || ''}; resuming after ${st.cursor || '(none)'} in ${delay} ms`);
      setTimeout(() => { if (!st.es) connect(st.cursor); }, delay);
    };
  }

  // dropConnection ends this tab's stream and opens a new one from its
  // cursor (the module's, epoch-qualified, over SSE).
  function dropConnection() {
    if (!st.es && !st.rb) return;
    const cursor = st.rb ? st.rb.cursor : st.cursor;
    closeStream();
    setState('reconnecting');
    connRow(`dropped by you at ${cursor || '(no id yet)'}`);
    setTimeout(() => { if (!st.es && !st.rb) connect(cursor); }, 250);
  }

  function addTypes(list) {
    for (const t of list) {
      if (st.types.has(t)) continue;
      st.types.add(t);
    }
  }

  // ---- frames -----------------------------------------------------------

  // onEnvelope takes one frame, from the module or a WebSocket (single or
  // batched); lastEventId is the module's cursor for it ('' over WebSocket).
  function onEnvelope(env, type, lastEventId) {
    if (st.slowMs) { const t = performance.now(); while (performance.now() - t < st.slowMs) { /* a slow page */ } }
    if (turnsBar()) {
      turnsBar().onEnvelope(env, type);
      // Presence and a cancel's answer are the turn bar's: state shown
      // there, not stream frames (neither counted nor logged).
      if (!env.id && (type === 'presence' || type === 'cancel_result')) return; // WebSocket: the module hands presence apart
    }
    if (env.id) {
      let dup = false;
      if (env.id <= st.lastSeq) { st.dups++; dup = true; } else { st.lastSeq = env.id; }
      window.receivedIds.push(env.id);
      st.cursor = lastEventId || String(env.id);
      // A merged (coalesced) frame holds env.count events: the counters
      // count events, as the server's replay_complete does.
      const n = env.count > 1 ? env.count : 1;
      st.received += n;
      if (env.replay) st.replayed += n;
      if (type === 'agent_message_chunk') {
        const u = (env.data && env.data.update) || {};
        window.agentText[env.session] = (window.agentText[env.session] || '') + ((u.content && u.content.text) || '');
      }
      agents.apply(env, type);
      if (type === 'session_closed') {
        // Not offered any more: gone from the list at once, and kept out
        // of lists fetched before the close (see pollSessions).
        st.closedSessions.set(env.session, performance.now());
        st.sessions = st.sessions.filter((x) => x.id !== env.session);
        renderSessions();
      } else if (st.closedSessions.has(env.session) && !env.replay) {
        st.closedSessions.delete(env.session); // reopened: it publishes again
      }
      if (!st.sessions.some((x) => x.id === env.session) || type === 'session_closed') refreshSessionsSoon();
      if (type === 'session_closed' && env.session === st.session) {
        showNotice(`session ${st.session} was closed; the stream ends`, 'info');
      }
      queueRow(env, type, dup);
    } else {
      st.frames++;
      window.frames.push({ type, data: env.data });
      onSynthetic(type, env.data || {}, lastEventId);
      queueRow(env, type, false);
    }
    scheduleRender();
  }

  // onSynthetic acts on a frame without an id; lastEventId is its SSE id:
  // line, if any (a snapshot's, epoch-qualified), '' over WebSocket.
  function onSynthetic(type, d, lastEventId) {
    switch (type) {
      case 'state_resync_required':
        if (d.reason === 'epoch_reset') {
          // The server restarted (docs/protocol.md, "After a restart"):
          // ids start again and everything shown is from another epoch.
          // Drop it — the view, the text, every counter (so that they
          // agree with the ids again) — and stay: the new history follows
          // (a snapshot first only when the server's buffer no longer holds
          // all of it), then replay_complete. The cursor is the new epoch's
          // start until its first id arrives.
          window.receivedIds = [];
          window.agentText = {};
          Object.assign(st, { lastSeq: 0, received: 0, replayed: 0, dups: 0, resyncing: true });
          if (d.epoch) {
            st.cursor = `${d.epoch}-0`;
            st.wsEpoch = d.epoch;
          }
          window.restarts.push({ epoch: d.epoch || '', snapshot: false, replayed: 0, historyLost: false });
          agents.clear();
          showNotice(`server restarted (epoch ${d.epoch || '?'}): showing its history from the start`, 'info');
        } else {
          showNotice(`gap announced: ${d.reason} — last delivered ${d.lastDeliveredId}, complete from id ${d.completeFromId || '?'}`
            + (d.droppedCount ? `, ${d.droppedCount} dropped` : ''));
        }
        break;
      case 'snapshot': {
        // The server's transcript as of an id replaces what the page had
        // (asked for with ?snapshot=1, or sent because our position was
        // lost); exactly the events after that id follow.
        const text = (d.state && d.state.text) || {};
        const cut = (d.state && d.state.cut) || {};
        window.agentText = {};
        agents.clear();
        for (const [s, t] of Object.entries(text)) {
          window.agentText[s] = t;
          // The transcript keeps each session's newest text: say where
          // older text was cut.
          const shown = cut[s] ? `… ${t}` : t;
          agents.apply({ session: s, data: { update: { content: { type: 'text', text: shown } } } }, 'agent_message_chunk');
        }
        st.lastSeq = d.lastEventId;
        st.cursor = lastEventId || String(d.lastEventId); // over SSE the frame's id: line, epoch-qualified
        if (d.reason === 'epoch_reset' && window.restarts.length) window.restarts[window.restarts.length - 1].snapshot = true;
        const cutNote = Object.keys(cut).length ? ` (older text of ${Object.keys(cut).join(', ')} cut)` : '';
        showNotice(`snapshot as of id ${d.lastEventId} (${d.reason}): the transcript so far${cutNote}, then the events after it`, 'info', st.resyncing ? 0 : 5000);
        break;
      }
      case 'replay_complete': {
        const lost = d.historyLost ? `; older events are gone, the replay starts at #${d.firstReplayedEventId || d.lastReplayedEventId}` : '';
        if (st.resyncing) {
          // The restart is handled: say so, then get out of the way.
          st.resyncing = false;
          const r = window.restarts[window.restarts.length - 1];
          if (r) Object.assign(r, { replayed: d.replayedCount, historyLost: !!d.historyLost });
          showNotice(`server restarted: caught up (${d.replayedCount} events replayed${lost})`, 'info', 5000);
        } else if (d.historyLost) {
          // A replay that does not start at the beginning (a late joiner on
          // a reply longer than the server's buffer): say so.
          showNotice(`replayed ${d.replayedCount} events${lost}`, 'info', 8000);
        }
        break;
      }
      case 'slow_client_warning':
        showNotice(`slow client: ${d.queueSize}/${d.maxQueued} frames queued (${d.threshold})`, 'info');
        break;
      case 'client_evicted':
        showNotice(`evicted (${d.reason}) at ${d.droppedAfter}: the browser resumes from the replay buffer`);
        break;
    }
  }

  // ---- event log --------------------------------------------------------

  const pendingRows = [];

  function summary(type, env) {
    const d = env.data;
    if (d === undefined || d === null) return '';
    const u = (d && d.update) || {};
    switch (type) {
      case 'agent_message_chunk':
      case 'agent_thought_chunk':
        return JSON.stringify(u.content ? u.content.text : d);
      case 'tool_call':
        return `${u.title || ''} · ${u.kind || ''} · ${u.status || ''}`;
      case 'tool_call_update':
        return `${u.toolCallId || ''} → ${u.status || ''}`;
      case 'plan': {
        const es = u.entries || [];
        return `${es.filter((x) => x.status === 'completed').length}/${es.length} done · ` + es.map((x) => `${x.status}`).join(', ');
      }
      case 'turn_start':
        return `${d.agent || ''} · turn ${d.turn ?? ''} · ${d.prompt || ''}`;
      case 'turn_end':
        return `${d.agent || ''} · ${d.reason || d.stopReason || ''}`;
      case 'session_closed':
        return `session ${d.session || env.session} closed${d.reason && d.reason !== 'closed' ? ` (${d.reason})` : ''}`;
      default:
        if (FRAME_TYPES.has(type)) {
          return Object.entries(d).map(([k, v]) => `${k}=${v}`).join(' ');
        }
        return JSON.stringify(d);
    }
  }

  function queueRow(env, type, dup) {
    const r = document.createElement('div');
    r.className = `row t-${type.replace(/[^a-z0-9_]/gi, '_')}`;
    if (env.replay) r.classList.add('replay');
    if (dup) r.classList.add('dup');
    if (!env.id) r.classList.add('frame');
    const id = document.createElement('span');
    id.className = 'id';
    id.textContent = env.id ? `#${env.id}` : '—';
    if (env.count > 1) id.title = `merged: ids ${env.firstId}…${env.id}`;
    const sess = document.createElement('span');
    sess.textContent = env.session || '';
    const t = document.createElement('span');
    t.className = 'type';
    t.textContent = type;
    if (env.replay) {
      const b = document.createElement('span');
      b.className = 'badge r';
      b.textContent = 'replay';
      t.append(b);
    }
    if (env.count > 1) {
      const b = document.createElement('span');
      b.className = 'badge m';
      b.textContent = `×${env.count}`;
      b.title = `this row holds ${env.count} events (ids ${env.firstId}…${env.id})`;
      t.append(b);
    }
    if (dup) {
      const b = document.createElement('span');
      b.className = 'badge';
      b.textContent = 'dup';
      t.append(b);
    }
    const p = document.createElement('span');
    p.textContent = summary(type, env);
    p.title = p.textContent;
    r.append(id, sess, t, p);
    pendingRows.push(r);
  }

  function connRow(text) {
    const r = document.createElement('div');
    r.className = 'row t-connection';
    const a = document.createElement('span');
    a.textContent = '·';
    const b = document.createElement('span');
    const c = document.createElement('span');
    c.className = 'type';
    c.textContent = 'connection';
    const d = document.createElement('span');
    d.textContent = text;
    r.append(a, b, c, d);
    pendingRows.push(r);
    scheduleRender();
  }

  // ---- rendering (batched per animation frame) --------------------------

  let renderQueued = false;
  let idsShown = -1;
  let idsAt = 0;

  function scheduleRender() {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(render);
  }

  function render() {
    renderQueued = false;
    const log = $('log');
    if (pendingRows.length) {
      const frag = document.createDocumentFragment();
      for (const r of pendingRows.splice(0)) frag.append(r);
      log.append(frag);
      while (log.childElementCount > MAX_ROWS) log.firstElementChild.remove();
      if ($('follow').checked) log.scrollTop = log.scrollHeight;
    }
    $('st-received').textContent = st.received;
    $('st-replayed').textContent = st.replayed;
    $('st-last').textContent = st.lastSeq || '–';
    $('st-dups').textContent = st.dups;
    $('st-frames').textContent = st.frames;
    $('st-connects').textContent = st.connects;
    $('ids-count').textContent = window.receivedIds.length;
    // With coalescing a row holds several events: say how many rows carried
    // the events counted.
    const rows = $('st-rows');
    rows.hidden = st.received === window.receivedIds.length;
    rows.textContent = `in ${window.receivedIds.length} rows`;
    const now = Date.now();
    if (idsShown !== window.receivedIds.length && now - idsAt > 1000) {
      renderIds();
    } else if (idsShown !== window.receivedIds.length) {
      setTimeout(scheduleRender, 1000);
    }
    agents.render();
  }

  function renderIds() {
    $('ids').textContent = window.receivedIds.join(' ');
    idsShown = window.receivedIds.length;
    idsAt = Date.now();
  }
  window.renderIds = renderIds;

  // ---- notices ----------------------------------------------------------

  let noticeTimer = 0;
  // showNotice shows text (kind 'info': blue, else red); with hideAfter
  // (ms) it goes away by itself.
  function showNotice(text, kind, hideAfter) {
    const n = $('notice');
    n.textContent = text;
    n.className = kind === 'info' ? 'notice info' : 'notice';
    n.hidden = false;
    clearTimeout(noticeTimer);
    if (hideAfter) noticeTimer = setTimeout(hideNotice, hideAfter);
  }
  function hideNotice() { clearTimeout(noticeTimer); $('notice').hidden = true; }

  // ---- agent cards: the session state rebuilt from events ----------------

  const agents = {
    cards: new Map(),
    dirty: new Set(),
    clear() {
      this.cards.clear();
      this.dirty.clear();
      $('live-cards').replaceChildren();
      $('closed-cards').replaceChildren();
      this.closedChanged();
    },
    // closedChanged shows how many closed agents are folded below the live
    // ones, and hides the fold when there are none.
    closedChanged() {
      const n = $('closed-cards').childElementCount;
      $('closed-count').textContent = n;
      $('closed-agents').hidden = n === 0;
    },
    card(session) {
      let c = this.cards.get(session);
      if (c) return c;
      const el = document.createElement('div');
      el.className = 'card';
      el.innerHTML = '<h3><code></code><span class="status"></span></h3><ul class="plan"></ul><div class="flow"></div>';
      el.querySelector('code').textContent = session;
      c = { el, status: el.querySelector('.status'), plan: el.querySelector('.plan'), flow: el.querySelector('.flow'), last: null, tools: new Map(), closed: false };
      this.cards.set(session, c);
      $('live-cards').append(el);
      return c;
    },
    push(c, node) {
      c.flow.append(node);
      while (c.flow.childElementCount > MAX_FLOW) c.flow.firstElementChild.remove();
    },
    apply(env, type) {
      const d = env.data || {};
      const u = d.update || {};
      const c = this.card(env.session);
      this.dirty.add(c);
      switch (type) {
        case 'turn_start':
          c.status.textContent = `${d.agent || 'agent'} · running`;
          c.status.className = 'status running';
          if (c.closed) {
            // Reopened: back among the live agents.
            c.closed = false;
            c.el.classList.remove('closed');
            $('live-cards').append(c.el);
            this.closedChanged();
          }
          c.last = null;
          break;
        case 'turn_end':
          c.status.textContent = `${d.agent || 'agent'} · ${d.reason || d.stopReason || 'done'}`;
          c.status.className = 'status';
          c.last = null;
          break;
        case 'session_closed': {
          c.status.textContent = 'closed';
          c.status.className = 'status';
          c.el.classList.add('closed');
          c.closed = true;
          // Closed agents go below the live ones, folded to their header
          // and together under "closed agents" (newest first), so that a
          // replay of many finished sub-agents does not bury the live ones.
          const list = $('closed-cards');
          list.prepend(c.el);
          while (list.childElementCount > MAX_CLOSED) {
            const old = list.lastElementChild;
            old.remove();
            for (const [id, x] of this.cards) if (x.el === old) this.cards.delete(id);
          }
          this.closedChanged();
          break;
        }
        case 'agent_message_chunk':
        case 'agent_thought_chunk': {
          const kind = type === 'agent_message_chunk' ? 'msg' : 'thought';
          if (!c.last || c.last.kind !== kind) {
            const n = document.createElement('div');
            n.className = kind;
            this.push(c, n);
            c.last = { kind, el: n };
          }
          c.last.el.textContent += (u.content && u.content.text) || '';
          break;
        }
        case 'tool_call': {
          const n = document.createElement('div');
          n.className = 'tool';
          n.innerHTML = '<span class="st"></span><b></b> <span class="muted"></span><pre hidden></pre>';
          n.querySelector('b').textContent = u.title || u.toolCallId;
          n.querySelector('.muted').textContent = u.kind || '';
          const s = n.querySelector('.st');
          s.textContent = u.status || 'pending';
          s.className = `st ${u.status || 'pending'}`;
          c.tools.set(u.toolCallId, n);
          this.push(c, n);
          c.last = null;
          break;
        }
        case 'tool_call_update': {
          const n = c.tools.get(u.toolCallId);
          if (!n) break;
          if (u.status) {
            const s = n.querySelector('.st');
            s.textContent = u.status;
            s.className = `st ${u.status}`;
          }
          const text = (u.content || []).map((x) => (x.content && x.content.text) || '').join('\n');
          if (text) {
            const pre = n.querySelector('pre');
            pre.textContent = text;
            pre.hidden = false;
          }
          break;
        }
        case 'plan':
          c.plan.replaceChildren(...(u.entries || []).map((x) => {
            const li = document.createElement('li');
            li.className = x.status;
            li.textContent = x.content;
            return li;
          }));
          break;
      }
    },
    render() {
      for (const c of this.dirty) c.flow.scrollTop = c.flow.scrollHeight;
      this.dirty.clear();
    },
  };

  // ---- sessions list ----------------------------------------------------

  function inScope(id) {
    const byID = new Map(st.sessions.map((s) => [s.id, s]));
    const sel = byID.get(st.session);
    if (!sel) return false;
    switch (st.scope) {
      case 'all': return true;
      case 'session': return id === st.session;
      case 'subtree': {
        const s = byID.get(id);
        return id === st.session || id === sel.parent || (!!s && !!sel.parent && s.parent === sel.parent);
      }
      case 'descendants': {
        for (let s = byID.get(id); s; s = byID.get(s.parent)) if (s.id === st.session) return true;
        return false;
      }
    }
    return false;
  }

  function renderSessions() {
    const ul = $('sessions');
    const children = new Map();
    const open = st.sessions.filter((s) => !st.closedSessions.has(s.id));
    const ids = new Set(open.map((s) => s.id));
    for (const s of open) {
      const p = s.parent && ids.has(s.parent) ? s.parent : '';
      if (!children.has(p)) children.set(p, []);
      children.get(p).push(s);
    }
    const items = [];
    const walk = (parent, depth) => {
      for (const s of children.get(parent) || []) {
        const li = document.createElement('li');
        li.style.paddingLeft = `${8 + depth * 14}px`;
        if (s.id === st.session) li.classList.add('selected');
        else if (inScope(s.id)) li.classList.add('inscope');
        const a = document.createElement('span');
        a.className = 'sid';
        a.textContent = (depth ? '└ ' : '') + s.id;
        const m = document.createElement('span');
        m.className = 'meta';
        m.textContent = `last #${s.lastEventId} · ${s.buffered} buffered · ${s.subscribers} sub`;
        li.append(a, m);
        li.onclick = () => select(s.id, st.scope);
        items.push(li);
        walk(s.id, depth + 1);
      }
    };
    walk('', 0);
    if (!items.length) {
      const li = document.createElement('li');
      li.className = 'empty muted small';
      li.textContent = 'no sessions yet: POST /sessions creates one (see the README)';
      items.push(li);
    }
    ul.replaceChildren(...items);
    // The time says when the list was last fetched; an empty list has
    // nothing to date.
    $('sessions-updated').textContent = open.length ? `updated ${new Date().toLocaleTimeString()}` : '';
  }

  async function pollSessions() {
    const started = performance.now();
    try {
      const r = await fetch('/sessions');
      if (r.ok) {
        st.sessions = await r.json();
        // A session whose session_closed arrived after this list was asked
        // for is closed (the list raced the close); one listed by a list
        // asked for after its close was reopened.
        for (const s of st.sessions) {
          const at = st.closedSessions.get(s.id);
          if (at !== undefined && at < started) st.closedSessions.delete(s.id);
        }
        renderSessions();
        if (!st.session && st.sessions.length) select(st.sessions[0].id, st.scope);
      }
    } catch { /* the server may be restarting */ }
  }

  // A session the list does not show yet (or one that closed): refresh the
  // list now rather than at the next poll.
  let refreshTimer = 0;
  function refreshSessionsSoon() {
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => { refreshTimer = 0; pollSessions(); }, 200);
  }

  async function pollInfo() {
    try {
      const r = await fetch('/info');
      if (!r.ok) return null;
      const info = await r.json();
      $('epoch').textContent = info.epoch;
      addTypes(info.types || []);
      return info;
    } catch { return null; }
  }

  function select(session, scope) {
    st.session = session;
    st.scope = scope;
    $('session-name').textContent = session || '–';
    $('scope').value = scope;
    const q = new URLSearchParams({ session, scope });
    if (st.coalesce) q.set('coalesce', 'acp');
    if (st.transport === 'ws') q.set('transport', 'ws');
    if (st.maxQueued) q.set('maxQueued', st.maxQueued);
    if (st.snapshot) q.set('snapshot', '1');
    history.replaceState(null, '', `/?${q}`);
    if (turnsBar()) turnsBar().select(session);
    reset();
    renderSessions();
    connect('');
  }

  // ---- start ------------------------------------------------------------

  $('drop').onclick = dropConnection;
  $('reconnect').onclick = () => select(st.session, st.scope);
  $('scope').onchange = (e) => select(st.session, e.target.value);
  $('coalesce').onchange = (e) => { st.coalesce = e.target.checked; select(st.session, st.scope); };
  $('transport').onchange = (e) => { st.transport = e.target.value; select(st.session, st.scope); };
  $('max-queued').onchange = (e) => {
    st.maxQueued = e.target.value;
    select(st.session, st.scope);
    if (st.maxQueued) {
      showNotice(`live queue limited to ${st.maxQueued} frames: slow_client_warning at 75 %, client_evicted beyond it. `
        + 'This page keeps up with the demo, so expect neither until the stream stalls (a slow network, a frozen tab, a higher -demo-rate).', 'info', 10000);
    }
  };
  document.querySelector('details.ids').addEventListener('toggle', renderIds);
  // Leaving the page (navigation, reload, a closed tab, the back-forward
  // cache): close the stream now, so the server frees the subscription at
  // once instead of when it notices the dead connection. A page restored
  // from the back-forward cache resumes where it was.
  // The module does the same for its stream by itself.
  window.addEventListener('pagehide', () => {
    const es = st.es;
    if (!es) return;
    st.es = null;
    es.close();
    setState('closed');
  });
  window.addEventListener('pageshow', (e) => {
    if (e.persisted && st.session && st.transport === 'ws' && !st.es) connect(st.cursor);
  });

  (async () => {
    const info = await pollInfo();
    const q = new URLSearchParams(location.search);
    st.coalesce = q.get('coalesce') === 'acp';
    st.snapshot = q.get('snapshot') === '1';
    st.transport = q.get('transport') === 'ws' ? 'ws' : 'sse';
    $('transport').value = st.transport;
    $('coalesce').checked = st.coalesce;
    const mq = q.get('maxQueued') || '';
    if ([...$('max-queued').options].some((o) => o.value === mq)) { st.maxQueued = mq; $('max-queued').value = mq; }
    const session = q.get('session') || (info && info.defaultSession) || '';
    const scope = q.get('scope') || (info && info.defaultScope) || 'session';
    if (session) select(session, scope);
    else { st.scope = scope; $('scope').value = scope; }
    await pollSessions();
    setInterval(pollSessions, POLL_MS);
    setInterval(pollInfo, POLL_MS);
  })();
})();
