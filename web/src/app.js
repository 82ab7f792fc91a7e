// Orrery's web client: sessions, the thread, placements, consent and the
// composer, over GET /events (SSE) and POST /control as docs/protocol.md
// describes. State is only ever what the kernel sent; the page sends
// requests.

import { applyPatch, at } from './patch.js';
import { drawKind, drawNode, destroyCharts, chartOf, el, button } from './surfaces.js';
import { renderMarkdown } from './markdown.js';
import * as bindings from './bindings.js';

const CLIENT = 'web';
const DRAWS = 'thread,tools,reasoning,surfaces,consent';
const PLACEMENTS = ['band', 'pane.left', 'pane.right', 'footer', 'inline', 'hidden'];

const $ = (id) => document.getElementById(id);

// ---- connection ----------------------------------------------------------

// A node token, when the kernel needs one, lives in an HttpOnly cookie the
// kernel sets (POST /auth): no script reads it, no URL carries it, and the
// browser sends it with every request of this page, EventSource included.
const conn = {
  es: null, // the EventSource of the session shown
  retry: 0, // reconnect attempts since the last frame
  timer: 0,
};

class HTTPError extends Error {
  constructor(status, msg) {
    super(msg);
    this.status = status;
  }
}

/** control sends one request to POST /control and returns its reply value. */
async function control(body) {
  const headers = { 'Content-Type': 'application/json' };
  const req = { id: `r${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`, ...body };
  let res;
  try {
    res = await fetch(`/control?client=${CLIENT}&draws=${DRAWS}`, { method: 'POST', headers, body: JSON.stringify(req) });
  } catch {
    throw new HTTPError(0, 'The kernel cannot be reached: check that orrery serve is running, then try again.');
  }
  const value = await res.json().catch(() => ({}));
  if (res.status === 401) {
    askToken();
    throw new HTTPError(401, value.error || 'This kernel needs a node token: enter one from orrery node token create.');
  }
  if (!res.ok) throw new HTTPError(res.status, value.error || `The kernel answered ${res.status}.`);
  return value;
}

function setConn(state, words) {
  const c = $('conn');
  c.dataset.state = state;
  c.textContent = { live: '● ', connecting: '◌ ', offline: '○ ' }[state] + words;
}

function connect() {
  clearTimeout(conn.timer);
  conn.es?.close();
  conn.es = null;
  if (!view.session) {
    setConn('offline', 'no session');
    return;
  }
  const q = new URLSearchParams({ session: view.session, client: CLIENT, draws: DRAWS, since: String(view.lastSeq), coalesce: '1' });
  setConn('connecting', view.lastSeq > 0 ? `resuming after ${view.lastSeq}…` : 'connecting…');
  const es = new EventSource(`/events?${q}`);
  conn.es = es;
  es.onopen = () => {
    conn.retry = 0;
    setConn('live', 'live');
  };
  es.onmessage = (ev) => {
    if (conn.es !== es) return;
    let frame;
    try {
      frame = JSON.parse(ev.data);
    } catch {
      return;
    }
    ingest(frame);
  };
  es.onerror = () => {
    if (conn.es !== es) return;
    // Reconnect ourselves, with since = the last seq we hold, so nothing is
    // lost or repeated whatever the browser's own retry would do.
    es.close();
    conn.es = null;
    const delay = Math.min(5000, 250 * 2 ** conn.retry++);
    setConn('offline', `disconnected; reconnecting in ${Math.ceil(delay / 1000)} s`);
    conn.timer = setTimeout(async () => {
      try {
        const { sessions } = await control({ t: 'session.list' });
        if (conn.es === null && view.session && !(sessions || []).some((x) => x.id === view.session)) {
          noSuchSession(view.session);
          return;
        }
      } catch (err) {
        if (err.status === 401) return;
      }
      connect();
    }, delay);
  };
}

// noSuchSession stops reconnecting to a session the kernel does not have
// (a link to a deleted session, or to another kernel's) and says what to
// do instead.
function noSuchSession(id) {
  clearTimeout(conn.timer);
  setConn('offline', 'no such session');
  const box = el('div', 'missing');
  box.setAttribute('role', 'alert');
  box.append(
    el('p', 'missing-title', 'There is no session ', el('code', '', id), ' on this kernel.'),
    el('p', '', 'The link may name a session that was deleted, or one on another kernel. Start a new session, or pick one from the list.'),
    button('+ New session', () => newSession(), 'primary'),
  );
  $('thread').replaceChildren(box);
  view.items = [];
  view.byId = new Map();
}

// ---- the session shown ---------------------------------------------------

const view = {
  session: '',
  lastSeq: 0,
  doc: { ui: { nodes: {}, components: {} }, surfaces: {} },
  items: [], // thread items in order
  byId: new Map(), // messageId / toolCallId → item
  runId: '', // the run in flight
  consent: new Map(), // request → orrery.consent.requested value
  commands: [], // the agent's latest advertised commands (orrery.commands)
};

function resetView(session) {
  destroyCharts(document.body);
  view.session = session;
  view.lastSeq = 0;
  view.doc = { ui: { nodes: {}, components: {} }, surfaces: {} };
  view.items = [];
  view.byId = new Map();
  view.runId = '';
  view.consent = new Map();
  view.commands = [];
  mentioned.clear();
  closePicker();
  clearToasts();
  $('thread').replaceChildren();
  scheduleRender();
}

function item(kind, id, fields = {}) {
  const it = { kind, id, el: null, dirty: true, ...fields };
  view.items.push(it);
  if (id) view.byId.set(id, it);
  return it;
}

function touch(it) {
  if (it) {
    it.dirty = true;
    scheduleRender();
  }
}

/** ingest applies one frame, once: a frame at or below the last seq is a repeat. */
function ingest(f) {
  const seq = f.metadata?.orrery?.seq ?? 0;
  if (seq > 0) {
    if (seq <= view.lastSeq) return;
    view.lastSeq = seq;
  }
  try {
    apply(f);
  } catch (err) {
    console.error('frame', f, err);
  }
  scheduleRender();
}

function apply(f) {
  switch (f.type) {
    case 'STATE_SNAPSHOT':
      view.doc = f.snapshot || {};
      break;
    case 'STATE_DELTA':
      view.doc = applyPatch(view.doc, f.delta || []);
      for (const op of f.delta || []) {
        const m = /^\/surfaces\/([^/]+)/.exec(op.path);
        if (!m) continue;
        // The call keeps its surface as it is now: each run starts the
        // state's surfaces anew, and a replay (a reload) applies every
        // run's frames before the page draws.
        const id = m[1].replaceAll('~1', '/').replaceAll('~0', '~');
        const it = view.byId.get(id);
        if (it && view.doc.surfaces?.[id]) it.surface = view.doc.surfaces[id];
        touch(it);
      }
      break;
    case 'MESSAGES_SNAPSHOT':
      for (const m of f.messages || []) fromMessage(m);
      break;
    case 'RUN_STARTED':
      view.runId = f.runId;
      break;
    case 'RUN_FINISHED':
      view.runId = '';
      if (f.outcome?.type === 'cancelled') {
        endCalls('cancelled');
        item('notice', '', { text: 'Stopped.' });
      }
      break;
    case 'RUN_ERROR':
      view.runId = '';
      endCalls(f.code === 'interrupted' ? 'interrupted' : 'unfinished');
      item('notice', '', { text: `The run ended${f.code ? ` (${f.code})` : ''}: ${f.message}`, level: 'error' });
      break;
    case 'TEXT_MESSAGE_START':
      item('assistant', f.messageId, { text: '' });
      break;
    case 'TEXT_MESSAGE_CONTENT': {
      const it = view.byId.get(f.messageId) || item('assistant', f.messageId, { text: '' });
      it.text += f.delta;
      touch(it);
      break;
    }
    case 'TEXT_MESSAGE_CHUNK': {
      const it = view.byId.get(f.messageId) || item('assistant', f.messageId, { text: '' });
      it.text += f.delta || '';
      touch(it);
      break;
    }
    case 'REASONING_MESSAGE_START':
      item('reasoning', f.messageId, { text: '' });
      break;
    case 'REASONING_MESSAGE_CONTENT': {
      const it = view.byId.get(f.messageId) || item('reasoning', f.messageId, { text: '' });
      it.text += f.delta;
      touch(it);
      break;
    }
    case 'TOOL_CALL_START':
      item('tool', f.toolCallId, { name: f.toolCallName, args: '', result: null, outcome: null, decision: '' });
      break;
    case 'TOOL_CALL_ARGS': {
      const it = view.byId.get(f.toolCallId);
      if (it) {
        it.args += f.delta;
        touch(it);
      }
      break;
    }
    case 'TOOL_CALL_RESULT': {
      const it = view.byId.get(f.toolCallId) || item('tool', f.toolCallId, { name: 'tool', args: '' });
      it.result = f.content;
      it.outcome = f.metadata?.orrery?.outcome || null;
      touch(it);
      break;
    }
    case 'CUSTOM':
      custom(f.name, f.value || {});
      break;
  }
}

/**
 * endCalls marks the calls still waiting for a result when their run was
 * stopped or failed. The kernel logs a result for each such call; this is
 * for logs written before it did. A run that finished leaves a client
 * tool's call waiting on purpose, so it is not marked.
 */
function endCalls(status) {
  for (const it of view.items) {
    if (it.kind === 'tool' && it.result === null && !it.outcome) {
      it.outcome = { status };
      touch(it);
    }
  }
}

function custom(name, v) {
  switch (name) {
    case 'orrery.user.message':
      if (!view.byId.has(v.id)) item('user', v.id, { ...userContent(v.content), steer: Boolean(v.steer) });
      break;
    case 'orrery.commands':
      // An ACP agent's available_commands_update: the latest list wins.
      view.commands = (Array.isArray(v.commands) ? v.commands : []).filter((c) => c && typeof c.name === 'string' && c.name);
      break;
    case 'orrery.consent.requested':
      view.consent.set(v.request, v);
      item('consent', `consent:${v.request}`, { request: v.request });
      break;
    case 'orrery.consent.resolved': {
      const req = view.consent.get(v.request);
      view.consent.delete(v.request);
      const it = view.byId.get(`consent:${v.request}`);
      if (it) {
        it.kind = 'decision';
        it.text = `${req ? `${req.tool}${req.subject ? `(${req.subject})` : ''}: ` : ''}${v.outcome}${v.option ? ` (${v.option.replace('_', ' ')})` : ''}${v.client ? ` by ${v.client}` : ''}`;
        touch(it);
      }
      break;
    }
    case 'orrery.notice':
      item('notice', '', { text: `${v.ext ? `${v.ext}: ` : ''}${v.text}`, level: v.level });
      break;
    default:
      // Unknown custom events are ignored, never interpreted.
  }
}

// userContent splits a person's message into its text and its attached
// files: the parts after the first that read "File @PATH:\n…", as the
// kernel writes them for a workspace file attachment (and the terminal UI
// sends them).
function userContent(content) {
  if (!Array.isArray(content)) return { text: textOf(content), files: [] };
  const files = [];
  const texts = [];
  content.forEach((p, i) => {
    if (p.type !== 'text') return;
    const m = i > 0 ? /^File @([^\n]*):\n/.exec(p.text) : null;
    if (m) files.push({ path: m[1], text: p.text.slice(m[0].length) });
    else texts.push(p.text);
  });
  return { text: texts.join('\n'), files };
}

function textOf(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.filter((p) => p.type === 'text').map((p) => p.text).join('');
  return '';
}

function fromMessage(m) {
  if (view.byId.has(m.id)) return;
  switch (m.role) {
    case 'user':
      item('user', m.id, userContent(m.content));
      break;
    case 'assistant':
      if (textOf(m.content)) item('assistant', m.id, { text: textOf(m.content) });
      for (const c of m.toolCalls || []) item('tool', c.id, { name: c.function?.name, args: c.function?.arguments || '', result: null });
      break;
    case 'reasoning':
      item('reasoning', m.id, { text: textOf(m.content) });
      break;
    case 'tool': {
      const it = view.byId.get(m.toolCallId);
      if (it) {
        it.result = textOf(m.content);
        it.outcome = m.metadata?.orrery?.outcome || null;
      }
      break;
    }
  }
}

// ---- drawing -------------------------------------------------------------

let frame = 0;
function scheduleRender() {
  if (!frame) frame = requestAnimationFrame(render);
}

function render() {
  frame = 0;
  renderThread();
  renderPlacements();
  renderComposer();
  renderAsking();
}

// EXAMPLES are the empty thread's prompts: each works on the offline model.
const EXAMPLES = [
  ['Say hello', 'hello'],
  ['Ask the time', 'what time is it?'],
  ['Run a command', 'run `echo hi`'],
];

/** drawEmpty is the thread before its first frame: what to do, and three prompts to try. */
function drawEmpty() {
  const box = el('div', 'empty');
  box.append(
    el('p', 'empty-title', 'Ask the agent anything.'),
    el('p', '', 'Type below and press Enter; / lists the commands and @ attaches a file. Or try one:'),
  );
  const list = el('div', 'examples');
  for (const [label, text] of EXAMPLES) {
    const b = button(label, () => {
      $('prompt').value = text;
      submit();
    }, 'example');
    b.dataset.prompt = text;
    b.title = text;
    list.append(b);
  }
  box.append(list);
  return box;
}

function renderThread() {
  const thread = $('thread');
  const empty = thread.querySelector(':scope > .empty');
  if (view.items.length === 0 && !thread.querySelector(':scope > .missing')) {
    if (!empty) thread.replaceChildren(drawEmpty());
    return;
  }
  empty?.remove();
  const nearBottom = thread.scrollHeight - thread.scrollTop - thread.clientHeight < 80;
  for (const it of view.items) {
    if (!it.dirty && it.el) continue;
    const next = drawItem(it);
    if (it.el) {
      destroyCharts(it.el);
      it.el.replaceWith(next);
    } else {
      thread.append(next);
    }
    it.el = next;
    it.dirty = false;
  }
  if (nearBottom) thread.scrollTop = thread.scrollHeight;
}

function drawItem(it) {
  switch (it.kind) {
    case 'user':
      return el('div', `msg user${it.steer ? ' steer' : ''}`, el('div', 'who', it.steer ? 'You (steer)' : 'You'), el('div', 'body plain', it.text),
        (it.files || []).map((f) => el('details', 'attachment', el('summary', '', 'Attached ', el('code', '', f.path)), el('pre', '', f.text))));
    case 'assistant': {
      const body = el('div', 'body md');
      body.append(renderMarkdown(it.text));
      return el('div', 'msg assistant', el('div', 'who', 'Agent'), body);
    }
    case 'reasoning': {
      const d = el('details', 'reasoning', el('summary', '', 'Reasoning'), el('div', 'body plain', it.text));
      return d;
    }
    case 'tool':
      return drawTool(it);
    case 'consent':
      return drawConsent(it);
    case 'decision':
      return el('div', 'notice decision', 'Consent: ', it.text);
    case 'notice':
      return el('div', `notice ${it.level || ''}`, it.level === 'error' ? '⚠ ' : 'ℹ ', it.text);
  }
  return el('div');
}

function prettyArgs(s) {
  try {
    return JSON.stringify(JSON.parse(s), null, 2);
  } catch {
    return s;
  }
}

function drawTool(it) {
  const live = view.doc.surfaces?.[it.id];
  if (live) it.surface = live; // also kept as each delta arrives (apply)
  const status = it.outcome?.status || (it.result === null ? 'running' : 'ok');
  const glyph = { ok: '✓', error: '✗', denied: '⊘', cancelled: '⊘', interrupted: '✗', unfinished: '✗', running: '◐' }[status] || '•';
  const d = el('details', `tool tool-${status}`);
  // Open by default while it runs or when it shows output or a diff, live
  // and on replay alike; once the person opens or folds it, their choice
  // holds through every redraw (a delta, the result).
  d.open = it.userOpen ?? (status === 'running' || Boolean(it.surface?.kind && ['stream', 'diff'].includes(it.surface.kind.t)));
  const summary = el('summary', '', el('span', 'tool-status', `${glyph} ${status}`), ' ', el('code', 'tool-name', it.name || 'tool'));
  summary.addEventListener('click', () => { it.userOpen = !d.open; }); // a click (or Enter, Space) toggles after this
  d.append(summary);
  if (it.args) d.append(el('div', 'label', 'Arguments'), el('pre', 'tool-args', prettyArgs(it.args)));
  if (it.surface?.kind) {
    d.append(el('div', 'label', 'Output'), el('div', 'tool-surface', drawKind(it.surface.kind)));
  } else if (it.result !== null) {
    d.append(el('div', 'label', 'Result'), el('pre', 'tool-result', it.result));
  }
  if (it.outcome?.rule) d.append(el('div', 'tool-rule', `Decided by: ${it.outcome.rule}`));
  return d;
}

function drawConsent(it) {
  const req = view.consent.get(it.request);
  if (!req) return el('div');
  const box = el('div', 'consent');
  box.setAttribute('role', 'alertdialog');
  box.setAttribute('aria-label', `Allow ${req.tool}?`);
  box.dataset.request = req.request;
  box.append(
    el('div', 'consent-q', 'Consent needed: allow ', el('code', '', req.tool), req.subject ? el('span', '', ' ', el('code', '', req.subject)) : null, '?'),
    // The whole subject, wrapped, never cut; the part that decided is marked.
    withMarks('pre', 'consent-args', JSON.stringify(req.args ?? {}, null, 2), req.part),
    // For a shell line the rule is a sentence naming the part asked about.
    el('div', 'consent-rule', req.part ? `Asked because ${req.rule}` : `Asked because of ${req.rule}`),
  );
  const opts = el('div', 'consent-options');
  for (const o of req.options || []) {
    const b = button(o.label || o.id, async () => {
      await answerConsent(req, o.id);
    }, o.id === 'deny' ? 'danger' : o.id === 'allow_once' ? 'primary' : '');
    b.dataset.option = o.id;
    opts.append(b);
  }
  box.append(opts);
  return box;
}

/** withMarks is an element of text in which each occurrence of part is a <mark>. */
function withMarks(tag, cls, text, part) {
  const e = el(tag, cls);
  const p = typeof part === 'string' ? part : '';
  let from = 0;
  for (let i = p ? text.indexOf(p) : -1; i >= 0; i = text.indexOf(p, from)) {
    e.append(text.slice(from, i), el('mark', '', p));
    from = i + p.length;
  }
  e.append(text.slice(from));
  return e;
}

async function answerConsent(req, option) {
  try {
    await control({ t: 'consent.answer', session: view.session, request: req.request, option });
  } catch (err) {
    toast(err.message);
  }
}

// ---- consent as the page's modal -----------------------------------------

// While a question waits, keys go to it alone: the composer is disabled
// (its draft kept), the focus sits on the oldest question's options and
// starts on Deny, Tab and ← → move among them, Enter takes the one
// focused (a click too) and Esc denies. Nothing else on the page takes a
// key meanwhile.

/** asking returns the oldest pending consent request, if any. */
function asking() {
  for (const req of view.consent.values()) return req;
  return null;
}

function consentBox(req) {
  return document.querySelector(`.consent[data-request="${CSS.escape(req.request)}"]`);
}

function denyOption(req) {
  const o = (req.options || []).find((x) => x.id === 'deny' || x.id.startsWith('reject'));
  return o ? o.id : 'deny';
}

/** holdFocus puts the focus on the question's Deny unless it is on one of its options already. */
function holdFocus(req) {
  const box = consentBox(req);
  if (!box || box.contains(document.activeElement)) return;
  (box.querySelector(`button[data-option="${CSS.escape(denyOption(req))}"]`) || box.querySelector('button'))?.focus();
}

function consentKey(ev) {
  const req = asking();
  if (!req || ev.isComposing) return;
  const box = consentBox(req);
  if (!box) return;
  const options = [...box.querySelectorAll('.consent-options button')];
  const at = options.indexOf(document.activeElement);
  if (ev.key === 'Escape') {
    ev.preventDefault();
    answerConsent(req, denyOption(req));
  } else if (ev.key === 'Tab' || ev.key === 'ArrowLeft' || ev.key === 'ArrowRight') {
    ev.preventDefault();
    const back = ev.key === 'ArrowLeft' || (ev.key === 'Tab' && ev.shiftKey);
    const next = at < 0 ? 0 : (at + (back ? options.length - 1 : 1)) % options.length;
    options[next]?.focus();
  } else if (at < 0 || ev.key !== 'Enter') {
    // Not Enter on an option (a space too, which would press the button
    // while a word is typed): it answers nothing and goes nowhere.
    ev.preventDefault();
    holdFocus(req);
  }
}

let wasAsking = false;

function renderAsking() {
  const req = asking();
  const box = $('prompt');
  box.disabled = Boolean(req);
  $('send').disabled = Boolean(req);
  $('composer').classList.toggle('asking', Boolean(req));
  box.title = req ? 'Answer the question above first (Esc denies); your draft is kept.' : '';
  if (req) holdFocus(req);
  else if (wasAsking && (document.activeElement === document.body || !document.activeElement)) box.focus();
  wasAsking = Boolean(req);
}

function nodeData(id, n) {
  const [, owner, name] = /^placed:([^:]+(?::[^:]+)?):(.*)$/.exec(id) || [];
  if (typeof n.data === 'string' && n.data.startsWith('/')) return at(view.doc, n.data);
  if (n.data && typeof n.data === 'object') return n.data;
  return view.doc.data?.[owner]?.[name];
}

function nodeParts(id) {
  const m = /^placed:(.*):([^:]*)$/.exec(id);
  return m ? { owner: m[1], name: m[2] } : { owner: '', name: id };
}

function drawPlaced(id, n) {
  const { owner, name } = nodeParts(id);
  const stopped = n.stopped || n.state === 'stopped';
  const card = el('section', `placed${stopped ? ' stopped' : ''}`);
  card.dataset.node = id;
  card.setAttribute('aria-label', `${n.title || name} from ${owner}`);
  const head = el('header', 'placed-head',
    el('span', 'placed-title', n.title || name),
    el('span', 'owner', n.owner || owner),
    stopped ? el('span', 'stopped-tag', '⏸ stopped') : null);
  const tools = el('span', 'placed-tools');
  const move = el('select', 'move', PLACEMENTS.filter((p) => p !== 'hidden').map((p) => {
    const o = el('option', '', p);
    o.value = p;
    return o;
  }));
  move.value = n.placement;
  move.setAttribute('aria-label', `Move ${n.title || name}`);
  move.addEventListener('change', () => layout('ui.move', id, move.value));
  tools.append(move, button('Hide', () => layout('ui.hide', id), 'small'), button('Save', () => layout('ui.save', id), 'small'));
  head.append(tools);
  card.append(head);
  const body = el('div', 'placed-body');
  if (n.component !== undefined || n.structure !== undefined) {
    const structure = n.structure ?? view.doc.ui?.components?.[n.component];
    const data = nodeData(id, n) ?? {};
    const intent = (action, value) => sendIntent(id, action, value);
    let drawn = null;
    try {
      drawn = structure ? drawNode(structure, data, intent) : null;
    } catch (err) {
      drawn = el('div', 'k-text', `This component could not be drawn: ${err.message}`);
    }
    body.append(drawn || el('div', 'k-text', ''));
  } else if (n.surface?.kind) {
    body.append(drawKind(n.surface.kind));
  } else if (n.fallback?.kind) {
    body.append(drawKind(n.fallback.kind));
  }
  card.append(body);
  return card;
}

let placedSig = '';
function renderPlacements() {
  const nodes = view.doc.ui?.nodes || {};
  const sig = JSON.stringify([nodes, view.doc.ui?.components, view.doc.data]);
  if (sig === placedSig) return;
  placedSig = sig;
  const regions = { band: $('band'), 'pane.left': $('pane-left'), 'pane.right': $('pane-right'), footer: $('footer'), inline: $('inline') };
  for (const r of Object.values(regions)) {
    destroyCharts(r);
    r.replaceChildren();
  }
  for (const [id, n] of Object.entries(nodes).sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (id === 'placed:host:consent') continue; // drawn in the thread, with its request
    const r = regions[n.placement];
    if (r) r.append(drawPlaced(id, n));
  }
  for (const [name, r] of Object.entries(regions)) {
    r.hidden = r.childElementCount === 0;
    r.dataset.placement = name;
  }
  document.body.classList.toggle('has-left', !regions['pane.left'].hidden);
  document.body.classList.toggle('has-right', !regions['pane.right'].hidden);
  renderTabs();
}

// On a narrow screen (the tabs row shows only there) one view is shown
// at a time: the sessions, a pane, or the thread with its composer. A
// pane's tab exists while something is placed in it.
function renderTabs() {
  for (const b of $('tabs').querySelectorAll('button')) {
    const tab = b.dataset.tab;
    if (tab.startsWith('pane-')) b.hidden = $(tab).hidden;
    b.setAttribute('aria-pressed', String(document.body.dataset.tab === tab));
  }
  if (document.body.dataset.tab.startsWith('pane-') && $(document.body.dataset.tab).hidden) showTab('thread');
}

function showTab(tab) {
  document.body.dataset.tab = tab;
  renderTabs();
}

async function layout(t, node, placement) {
  try {
    await control({ t, session: view.session, node, ...(placement ? { placement } : {}) });
    if (t === 'ui.save') toast(`Saved where ${node} is in the server's config.`, 'info');
  } catch (err) {
    toast(err.message);
  }
}

async function sendIntent(node, action, value) {
  const req = { t: 'ui.intent', session: view.session, node, action };
  if (value !== undefined) req.value = value;
  try {
    await control(req);
  } catch (err) {
    toast(err.message);
  }
}

// ---- sessions ------------------------------------------------------------

// The session list is the live entity channel GET /api/live: a snapshot,
// then each change (created, title, cost, running, ended, deleted) as it
// happens, so the page never polls. A reconnect takes a fresh snapshot.
const live = {
  es: null,
  retry: 0,
  timer: 0,
  sessions: new Map(), // id → session summary
};

function setListState(state, words) {
  const e = $('sessions-state');
  e.dataset.state = state;
  e.textContent = { live: '● ', connecting: '◌ ', offline: '○ ' }[state] + words;
}

function connectLive() {
  clearTimeout(live.timer);
  live.es?.close();
  const es = new EventSource('/api/live');
  let opened = false;
  live.es = es;
  setListState('connecting', 'list connecting…');
  es.onmessage = (ev) => {
    if (live.es !== es) return;
    let m;
    try {
      m = JSON.parse(ev.data);
    } catch {
      return;
    }
    if (m.type === 'snapshot') {
      opened = true;
      live.retry = 0;
      live.sessions = new Map((m.sessions || []).map((x) => [x.id, x]));
      setListState('live', 'list live');
    } else if (m.session?.id) {
      if (m.type === 'deleted') live.sessions.delete(m.session.id);
      else live.sessions.set(m.session.id, m.session);
    }
    renderSessions();
  };
  es.onerror = async () => {
    if (live.es !== es) return;
    es.close();
    live.es = null;
    const delay = Math.min(5000, 250 * 2 ** live.retry++);
    setListState('offline', `list disconnected; reconnecting in ${Math.ceil(delay / 1000)} s`);
    if (!opened) {
      // An event stream hides its status: ask once, so a missing token
      // opens the token dialog.
      try {
        await control({ t: 'session.list' });
      } catch (err) {
        if (err.status === 401) return; // the token form reconnects
      }
    }
    live.timer = setTimeout(connectLive, delay);
  };
}

function renderSessions() {
  const list = $('sessions');
  const all = [...live.sessions.values()].sort((a, b) => (a.created < b.created ? 1 : a.created > b.created ? -1 : a.id < b.id ? 1 : -1));
  list.replaceChildren(...all.map((s) => {
    const b = button('', () => openSession(s.id), 'session');
    b.append(
      el('span', 'session-title', s.title || s.id),
      el('span', 'session-meta', `${s.running ? '◐ running' : '○ idle'} · $${(s.micro_usd / 1e6).toFixed(4)}`),
    );
    b.dataset.session = s.id;
    if (s.id === view.session) b.setAttribute('aria-current', 'true');
    return el('li', '', b);
  }));
}

function openSession(id) {
  if (id === view.session) return;
  location.hash = `session=${encodeURIComponent(id)}`;
  resetView(id);
  connect();
  renderSessions();
  showTab('thread');
  $('prompt').focus();
}

async function newSession(title) {
  try {
    const { session } = await control({ t: 'session.new', ...(title ? { title } : {}) });
    openSession(session);
  } catch (err) {
    toast(err.message);
  }
}

// ---- composer ------------------------------------------------------------

// The client's own commands: what is inserted when chosen, what it shows.
const SLASH = [
  ['/new ', '/new [title]', 'start a new session'],
  ['/stop', '/stop', 'stop the run in flight'],
  ['/steer ', '/steer TEXT', 'add to the run in flight'],
  ['/ui', '/ui', 'list what is placed'],
  ['/ui move ', '/ui move ID PLACEMENT', 'move a placed surface'],
  ['/ui hide ', '/ui hide ID', 'hide a placed surface'],
  ['/ui save ', '/ui save ID', 'keep where it is, in config'],
  ['/help', '/help', 'list these commands'],
];
const OWN = new Set(SLASH.map(([c]) => c.trim().split(' ')[0]));

// mentioned holds the workspace paths chosen from the @ picker; those still
// written as @PATH in the prompt are sent as attachments.
const mentioned = new Set();

function renderComposer() {
  const running = Boolean(view.runId);
  $('send').textContent = running ? 'Steer' : 'Send';
  $('send').title = running ? 'Add this to the run in flight (Enter)' : 'Send (Enter)';
  $('stop').hidden = !running;
  $('run-state').textContent = running ? '◐ running' : '○ idle';
  $('run-state').dataset.state = running ? 'running' : 'idle';
}

function findNode(id) {
  const nodes = view.doc.ui?.nodes || {};
  if (nodes[id]) return id;
  return Object.keys(nodes).find((k) => nodeParts(k).name === id) || id;
}

/** agentCommand returns the advertised command a /NAME names, if any. */
function agentCommand(cmd) {
  return view.commands.find((c) => `/${c.name}` === cmd);
}

async function slash(text) {
  const [cmd, ...rest] = text.trim().split(/\s+/);
  if (!OWN.has(cmd) && agentCommand(cmd)) {
    // The agent's own command goes to it as the prompt's text.
    return send(text.trim());
  }
  switch (cmd) {
    case '/new':
      return newSession(rest.join(' '));
    case '/stop':
      return stop();
    case '/steer':
      return send(rest.join(' '), true);
    case '/help': {
      const own = SLASH.map(([, c, w]) => `${c}: ${w}`);
      const agent = view.commands.map((c) => `/${c.name}${c.input?.hint ? ` ${c.input.hint}` : ''}: ${c.description || ''} (the agent's)`);
      item('notice', '', { text: [...own, ...agent].join('\n') });
      return scheduleRender();
    }
    case '/ui': {
      const [sub, id, placement] = rest;
      if (!sub || sub === 'list') {
        const nodes = Object.entries(view.doc.ui?.nodes || {});
        item('notice', '', { text: nodes.length ? nodes.map(([k, n]) => `${nodeParts(k).name}  ${n.placement}  ${n.owner}  ${n.title || ''}`).join('\n') : 'Nothing is placed.' });
        return scheduleRender();
      }
      if (!['move', 'hide', 'save'].includes(sub) || !id || (sub === 'move' && !PLACEMENTS.includes(placement))) {
        return toast(`Write /ui move ID PLACEMENT (one of ${PLACEMENTS.join(', ')}), /ui hide ID or /ui save ID.`);
      }
      return layout(`ui.${sub}`, findNode(id), placement);
    }
  }
  return toast(`${cmd} is not a command here: type /help for the list.`);
}

/** attachments returns the chosen @mentions still in text, as workspace file attachments. */
function attachments(text) {
  const words = new Set(text.split(/\s+/).map((w) => w.replace(/[,.;:!?)]+$/, '')));
  return [...mentioned].filter((p) => words.has(`@${p}`)).map((p) => ({ type: 'document', source: { type: 'path', value: p } }));
}

async function send(text, steer = Boolean(view.runId)) {
  if (!text.trim()) return;
  if (!view.session) {
    const { session } = await control({ t: 'session.new' });
    openSession(session);
  }
  const input = { text };
  const files = attachments(text);
  if (files.length) input.attachments = files;
  const req = { t: 'run.send', session: view.session, input };
  if (steer) req.target = 'steer';
  await control(req);
  mentioned.clear();
}

async function stop() {
  try {
    await control({ t: 'run.cancel', session: view.session, ...(view.runId ? { runId: view.runId } : {}) });
  } catch (err) {
    toast(err.message);
  }
}

async function submit() {
  const box = $('prompt');
  const text = box.value;
  if (!text.trim()) return;
  closePicker();
  // Cleared at once, not when the request returns: a run can finish (its
  // frames arrive on the stream) before the reply does, and what the person
  // typed next must not be wiped. A refused request gives the text back.
  box.value = '';
  try {
    if (text.startsWith('/')) await slash(text);
    else await send(text);
  } catch (err) {
    if (!box.value) box.value = text;
    toast(err.message);
  }
}

// ---- the picker: / commands and @ files ----------------------------------

// picker is the completion list under the prompt: a listbox whose active
// option the prompt names in aria-activedescendant. Tab or Enter takes the
// active option; ↑ ↓ move; Esc closes it.
const picker = {
  items: [], // {insert, label, detail, tag}; a file's also {path, matched}
  active: 0,
  start: 0, // where in the prompt the word being completed starts
  end: 0,
  gen: 0, // the latest @ lookup; older answers are dropped
};

function closePicker() {
  picker.items = [];
  picker.gen++;
  drawPicker();
}

function drawPicker() {
  const h = $('hints');
  const box = $('prompt');
  const open = picker.items.length > 0;
  h.hidden = !open;
  box.setAttribute('aria-expanded', String(open));
  if (!open) {
    h.replaceChildren();
    box.removeAttribute('aria-activedescendant');
    return;
  }
  picker.active = Math.min(picker.active, picker.items.length - 1);
  h.replaceChildren(...picker.items.map((it, i) => {
    const label = it.matched ? el('code', '', '@', marked(it.path, it.matched)) : el('code', '', it.label);
    const li = el('li', 'hint', label, it.detail ? ` ${it.detail}` : '', it.tag ? el('span', 'hint-tag', it.tag) : null);
    li.id = `hint-${i}`;
    li.setAttribute('role', 'option');
    li.setAttribute('aria-selected', String(i === picker.active));
    li.dataset.insert = it.insert;
    li.addEventListener('mousedown', (ev) => {
      ev.preventDefault(); // keep the focus in the prompt
      picker.active = i;
      choose();
    });
    return li;
  }));
  box.setAttribute('aria-activedescendant', `hint-${picker.active}`);
}

/**
 * marked returns text as text nodes, with the characters at offsets (code
 * points, increasing, as workspace.files' matches) in <mark> elements, a run
 * of them in one. The text is never parsed as HTML.
 */
function marked(text, offsets) {
  const chars = Array.from(text);
  const at = new Set(offsets);
  const out = [];
  let run = '';
  let inMark = false;
  const flush = () => {
    if (run) out.push(inMark ? el('mark', '', run) : run);
    run = '';
  };
  chars.forEach((c, i) => {
    if (at.has(i) !== inMark) {
      flush();
      inMark = !inMark;
    }
    run += c;
  });
  flush();
  return out;
}

/** wordAt returns the whitespace-delimited word that ends at the caret. */
function wordAt(box) {
  const end = box.selectionStart;
  const before = box.value.slice(0, end);
  const start = before.search(/\S*$/);
  return { word: before.slice(start), start, end };
}

let filesTimer = 0;
function hints() {
  const box = $('prompt');
  const v = box.value;
  const { word, start, end } = wordAt(box);
  if (word.startsWith('@') && view.session) {
    clearTimeout(filesTimer);
    filesTimer = setTimeout(() => lookupFiles(word.slice(1), start, end), 120);
    return;
  }
  if (v.startsWith('/') && !v.includes('\n') && start === 0 && !/\s/.test(v)) {
    const own = SLASH.map(([insert, label, detail]) => ({ insert, label, detail, tag: '' }));
    const agent = view.commands.filter((c) => !OWN.has(`/${c.name}`)).map((c) => ({
      insert: `/${c.name} `, label: `/${c.name}${c.input?.hint ? ` ${c.input.hint}` : ''}`, detail: c.description || '', tag: 'agent',
    }));
    const items = [...agent, ...own].filter((it) => it.insert.startsWith(v) || it.label.startsWith(v));
    picker.start = 0;
    picker.end = v.length;
    picker.active = 0;
    picker.items = items;
    picker.gen++;
    drawPicker();
    return;
  }
  closePicker();
}

// lookupFiles asks the kernel for the workspace files that match query
// fuzzily (workspace.files with a query; an empty one lists from the root)
// and offers them, the characters matched highlighted.
async function lookupFiles(query, start, end) {
  const gen = ++picker.gen;
  let files = [];
  let matches = [];
  try {
    ({ files = [], matches = [] } = await control({ t: 'workspace.files', session: view.session, query, limit: 20 }));
  } catch (err) {
    toast(err.message);
  }
  if (gen !== picker.gen) return;
  picker.items = files.map((f, i) => ({
    insert: `@${f} `, label: `@${f}`, path: f, matched: matches[i] || [], detail: '', tag: 'file',
  }));
  picker.start = start;
  picker.end = end;
  picker.active = 0;
  drawPicker();
}

/** choose puts the active option into the prompt in place of the word. */
function choose() {
  const it = picker.items[picker.active];
  if (!it) return;
  const box = $('prompt');
  if (it.tag === 'file') mentioned.add(it.insert.trim().slice(1));
  box.value = box.value.slice(0, picker.start) + it.insert + box.value.slice(picker.end);
  const caret = picker.start + it.insert.length;
  box.setSelectionRange(caret, caret);
  box.focus();
  closePicker();
}

/** pickerKey handles a key while the picker is open; it reports whether it took it. */
function pickerKey(ev) {
  if (!picker.items.length) return false;
  switch (ev.key) {
    case 'ArrowDown':
      picker.active = (picker.active + 1) % picker.items.length;
      break;
    case 'ArrowUp':
      picker.active = (picker.active + picker.items.length - 1) % picker.items.length;
      break;
    case 'Tab':
      if (ev.shiftKey) return false;
      choose();
      break;
    case 'Enter': {
      // Enter on a command already written out in full sends it.
      const it = picker.items[picker.active];
      if (ev.shiftKey || !it || $('prompt').value.trim() === it.insert.trim()) return false;
      choose();
      break;
    }
    case 'Escape':
      closePicker();
      break;
    default:
      return false;
  }
  ev.preventDefault();
  drawPicker();
  return true;
}

// ---- token, toasts -------------------------------------------------------

function askToken() {
  const d = $('token-dialog');
  if (!d.open) d.showModal();
}

/** signIn gives the kernel a node token; it keeps it in an HttpOnly cookie. */
async function signIn(token) {
  const err = $('token-error');
  err.textContent = '';
  let res;
  try {
    res = await fetch('/auth', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ token }) });
  } catch {
    err.textContent = 'The kernel cannot be reached: check that it is running, then try again.';
    return;
  }
  if (!res.ok) {
    const value = await res.json().catch(() => ({}));
    err.textContent = value.error || `The kernel answered ${res.status}.`;
    return;
  }
  $('token').value = '';
  $('token-dialog').close();
  connectLive();
  connect();
}

// Toasts sit in their own row above the composer, so they never cover a
// control. They belong to the session shown: a switch clears them. An
// error stays until dismissed; an info line goes after a few seconds.
function toast(msg, level = 'error') {
  const t = el('div', `toast toast-${level}`, el('span', 'toast-text', level === 'error' ? '⚠ ' : 'ℹ ', msg));
  t.setAttribute('role', level === 'error' ? 'alert' : 'status');
  if (level === 'error') {
    const x = button('×', () => t.remove(), 'small toast-close');
    x.setAttribute('aria-label', 'Dismiss');
    t.append(x);
  } else {
    setTimeout(() => t.remove(), 6000);
  }
  $('toasts').append(t);
}

function clearToasts() {
  $('toasts').replaceChildren();
}

// ---- start ---------------------------------------------------------------

function start() {
  document.addEventListener('keydown', consentKey, true);
  for (const b of $('tabs').querySelectorAll('button')) b.addEventListener('click', () => showTab(b.dataset.tab));
  $('new-session').addEventListener('click', () => newSession());
  $('send').addEventListener('click', submit);
  $('stop').addEventListener('click', stop);
  $('prompt').addEventListener('keydown', (ev) => {
    if (ev.isComposing || pickerKey(ev)) return;
    if (ev.key === 'Enter' && !ev.shiftKey) {
      ev.preventDefault();
      submit();
    } else if (ev.key === 'Escape' && view.runId) {
      ev.preventDefault();
      stop();
    }
  });
  $('prompt').addEventListener('input', hints);
  $('prompt').addEventListener('blur', () => setTimeout(() => {
    if (document.activeElement !== $('prompt')) closePicker();
  }, 0));
  document.querySelector('.skip').addEventListener('click', (ev) => {
    ev.preventDefault();
    $('prompt').focus();
  });
  $('token-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const v = $('token').value.trim();
    if (!v) return;
    await signIn(v);
  });
  window.addEventListener('hashchange', () => {
    const id = new URLSearchParams(location.hash.slice(1)).get('session');
    if (id && id !== view.session) openSession(id);
  });
  const id = new URLSearchParams(location.hash.slice(1)).get('session');
  if (id) openSession(id);
  else setConn('offline', 'no session: send a prompt or press New');
  scheduleRender();
  connectLive();
}

// For tests and bug reports: replay frames into the page, read its state
// and evaluate a binding template as the page does.
window.orreryCharts = chartOf;
window.orrery = {
  ingest,
  view,
  render: (template, data) => bindings.renderString(template, data),
};

start();
