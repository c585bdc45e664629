// agentserver page, the turn bar: the selected session's presence (the
// clients watching it) and agent status, a message box for the simulated
// model (POST /session/{id}/messages) and a Stop button (a cascading
// cancel: the session's turn and its sub-agents'). Kept apart from app.js,
// which calls window.pageTurns: query (the stream URL's ?client= and
// ?presence=1), select (a new session), onEnvelope (every frame), presence
// (the module's presence listener) and render (its turn listener). Over SSE
// the module (replaybus.js, app.js's connection: window.replaybusPage.rb)
// holds the presence and the active turn and posts the Stop; over
// WebSocket the page reads presence frames and sends the cancel message.
//
// What tests can read:
//   window.pageClient   this browser's client id (?client=), kept in localStorage: the tabs of
//                       this origin are one client (and, with the same options, share one
//                       connection through the module), and a reload within the server's
//                       presence grace is no leave and join
//   window.presence     the last presence frame's data ({session, clients, status, turn?, …}), or null
//   window.turnEnds     every turn_end of the selected session seen: {turn, reason}
//   window.stopAnswers  every Stop's answer: {via: "http"|"ws", status, cancelled?, held?, code?, message?}
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const KEY = 'replaybus.client';
  let client = '';
  try { client = localStorage.getItem(KEY) || ''; } catch { /* storage disabled */ }
  if (!client) {
    client = `web-${Math.random().toString(36).slice(2, 10)}`;
    try { localStorage.setItem(KEY, client); } catch { /* storage disabled */ }
  }
  window.pageClient = client;
  window.presence = null;
  window.turnEnds = [];
  window.stopAnswers = [];
  let session = '';

  const rb = () => (window.replaybusPage || {}).rb;

  function render() {
    const p = window.presence;
    const status = (p && p.status) || 'idle';
    const el = $('agent-status');
    el.textContent = status;
    el.dataset.status = status;
    // The active turn: the module's (turn events and presence) over SSE,
    // the last presence frame's over WebSocket.
    const turn = rb() ? rb().turn : p && p.turn;
    $('turn-id').textContent = turn || '–';
    $('presence-clients').textContent = p ? String(p.clients) : '–';
    $('stop').disabled = !session || !turn;
  }

  function note(text) { $('turn-note').textContent = text; }

  function answered(a) {
    window.stopAnswers.push(a);
    if (a.status === 202) {
      const n = (a.cancelled || []).length;
      note(n ? `stopped ${a.cancelled.join(', ')}` : (a.held || []).length ? `held ${a.held.join(', ')}` : 'nothing was running');
    } else {
      note(`stop refused: ${a.status} ${a.code}: ${a.message}`);
    }
  }

  // stop cancels the session's turn and its sub-agents' turns: with the
  // module's cancel() over SSE, with the cancel message over an open
  // WebSocket (answered by a cancel_result frame, see onEnvelope), else
  // with POST /session/{id}/cancel.
  async function stop() {
    if (!session) return;
    const page = window.replaybusPage || {};
    const sock = page.transport === 'ws' ? page.es : null;
    if (sock && sock.readyState === WebSocket.OPEN) {
      sock.send(JSON.stringify({ type: 'cancel', cascade: true }));
      note('stopping…');
      return;
    }
    if (rb()) {
      note('stopping…');
      try {
        answered({ via: 'http', status: 202, ...await rb().cancel({ cascade: true }) });
      } catch (e) {
        if (e && e.status) answered({ via: 'http', ...e });
        else note(`stop failed: ${e}`);
      }
      return;
    }
    try {
      const r = await fetch(`/session/${encodeURIComponent(session)}/cancel`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ cascade: true }),
      });
      const body = await r.json().catch(() => ({}));
      answered({ via: 'http', status: r.status, ...body });
    } catch (e) {
      note(`stop failed: ${e}`);
    }
  }

  async function send(e) {
    e.preventDefault();
    const text = $('message-text').value;
    if (!session || !text.trim()) return;
    try {
      const r = await fetch(`/session/${encodeURIComponent(session)}/messages`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ text }),
      });
      const body = await r.json().catch(() => ({}));
      note(r.status === 202 ? `turn ${body.turn} started` : `${body.code}: ${body.message}`);
      if (r.status === 202) $('message-text').value = '';
    } catch (err) {
      note(`send failed: ${err}`);
    }
  }

  window.pageTurns = {
    query(q) {
      q.set('client', client);
      q.set('presence', '1');
    },
    select(s) {
      session = s;
      window.presence = null;
      window.turnEnds = [];
      note('');
      render();
    },
    presence(p) {
      window.presence = p;
      render();
    },
    render,
    onEnvelope(env, type) {
      if (!env.id && type === 'presence') {
        window.presence = env.data || null;
        render();
      } else if (!env.id && type === 'cancel_result') {
        answered({ via: 'ws', ...(env.data || {}) });
      } else if (env.id && type === 'turn_end' && env.session === session && !env.replay) {
        const d = env.data || {};
        window.turnEnds.push({ turn: d.turn, reason: d.reason });
        note(`turn ${d.turn} ended: ${d.reason}${d.message ? ` (${d.message})` : ''}`);
      }
    },
  };

  $('stop').onclick = stop;
  $('message-form').onsubmit = send;
  $('client-id').textContent = client;
  render();
})();
