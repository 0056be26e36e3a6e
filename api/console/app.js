// taskledger operator console: one dependency-free ES module.
//
// Safety: the admin token lives in sessionStorage only (never the URL,
// local storage or the page) and is sent as a bearer header. Nothing taken
// from data is inserted as HTML: every text goes through textContent.
// Live updates come from GET /api/v1/admin/events/stream (Server-Sent
// Events read with fetch, since EventSource cannot send a header).

const API = '/api/v1/admin';
const TOKEN_KEY = 'taskledger.adminToken';
const STATES = ['PENDING', 'CLAIMED', 'RUNNING', 'WAITING_CONFIRMATION', 'SUCCEEDED', 'FAILED', 'CANCELED'];
const PAGE = 50;

const $ = (id) => document.getElementById(id);

// Bidirectional control characters (embeddings, overrides, isolates, marks)
// would let data reorder what the operator reads (a payload showing
// "exe.txt" for "txt.exe"): every text the console displays shows them
// escaped and visible, as \u202E. el() and setText() apply it to all text
// and attributes; jsonText() to the JSON put in an editable field (where
// the escape is the same JSON string).
const BIDI = /[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]/g;
const visible = (s) => String(s).replace(BIDI, (c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`);
const setText = (node, s) => { node.textContent = visible(s); };
const jsonText = (v) => visible(JSON.stringify(v, null, 2));
const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  view: 'overview',
  taskId: null,
  deviceId: null,
  filter: { state: '', device: '', search: '' },
  cursors: [''], // cursor of each page shown so far (paging back pops)
  next: null,
  devices: new Map(), // id → device document
  offset: 0, // server time − browser time, ms (the server may run a test clock)
  stream: null,
  refreshTimer: 0,
  role: 'auditor', // the signed-in token's role (GET /admin/whoami); shows nothing it cannot do until known
};

// ---------- small helpers ----------

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = visible(v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : visible(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(visible(c)));
  }
  return e;
}

function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40; b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const short = (id) => (id ? id.slice(0, 8) : '—');
const serverNow = () => Date.now() + state.offset;
const ms = (s) => (s ? Date.parse(s) : NaN);

function ago(s) {
  const t = ms(s);
  if (Number.isNaN(t)) return '—';
  const d = Math.round((serverNow() - t) / 1000);
  if (d < 5) return 'just now';
  if (d < 60) return `${d} s ago`;
  if (d < 3600) return `${Math.floor(d / 60)} min ago`;
  if (d < 86400) return `${Math.floor(d / 3600)} h ago`;
  return `${Math.floor(d / 86400)} d ago`;
}

function remaining(s) {
  const t = ms(s);
  if (Number.isNaN(t)) return '—';
  const d = Math.round((t - serverNow()) / 1000);
  if (d <= 0) return 'expired';
  if (d < 60) return `${d} s left`;
  if (d < 3600) return `${Math.floor(d / 60)} min left`;
  return `${Math.floor(d / 3600)} h ${Math.floor((d % 3600) / 60)} min left`;
}

function setServerTime(s) {
  const t = ms(s);
  if (!Number.isNaN(t)) state.offset = t - Date.now();
}

class APIError extends Error {
  constructor(status, code, message) {
    super(message || code || `HTTP ${status}`);
    this.status = status; this.code = code || `http_${status}`;
  }
}

// api sends one request. A network failure throws a TypeError (the caller
// keeps its idempotency key so a retry replays the same submission).
async function api(method, path, { body, key, raw, type } = {}) {
  const headers = { Authorization: `Bearer ${state.token}` };
  let payload;
  if (raw) { payload = raw; headers['Content-Type'] = type; }
  else if (body !== undefined) { payload = JSON.stringify(body); headers['Content-Type'] = 'application/json'; }
  if (key) headers['Idempotency-Key'] = key;
  const res = await fetch(path, { method, headers, body: payload, cache: 'no-store', credentials: 'omit' });
  if (res.status === 401) { signOut('The admin token was refused. Sign in again.'); throw new APIError(401, 'unauthorized'); }
  const text = await res.text();
  let doc = null;
  if (text) { try { doc = JSON.parse(text); } catch { doc = null; } }
  if (!res.ok) throw new APIError(res.status, doc && doc.code, doc && doc.message);
  return doc;
}

// A Submission keeps one idempotency key until the server answers
// definitively, so retrying after a network error replays the same request.
class Submission {
  constructor() { this.key = uuid(); }
  async send(method, path, opts = {}) {
    try {
      const doc = await api(method, path, { ...opts, key: this.key });
      this.key = uuid();
      return doc;
    } catch (e) {
      if (e instanceof APIError && e.status < 500) this.key = uuid();
      throw e;
    }
  }
}

function showError(id, e) {
  const node = $(id);
  if (!e) { node.textContent = ''; return; }
  if (e instanceof APIError) setText(node, `${e.code}: ${e.message}`);
  else setText(node, `Network error (${e.message}); retrying sends the same request again.`);
}

// ---------- dialog ----------

// ask opens the dialog with fields; submit(values) runs on Confirm and may
// throw to keep the dialog open with the error shown.
function ask({ title, fields = [], danger = false, submit }) {
  const dlg = $('dialog');
  setText($('dialog-title'), title);
  const box = $('dialog-fields');
  box.replaceChildren();
  const inputs = {};
  for (const f of fields) {
    let input;
    if (f.type === 'select') {
      input = el('select', { name: f.name });
      for (const o of f.options) input.append(el('option', { value: o.value, text: o.label, selected: o.value === f.value }));
    } else if (f.type === 'textarea') {
      input = el('textarea', { name: f.name, spellcheck: 'false' });
      input.value = f.value || '';
    } else if (f.type === 'note') {
      box.append(el('p', { class: 'muted', text: f.text }));
      continue;
    } else {
      input = el('input', { name: f.name, type: f.type || 'text', required: f.required, min: f.min, max: f.max, accept: f.accept, spellcheck: 'false' });
      if (f.value !== undefined) input.value = f.value;
    }
    inputs[f.name] = input;
    box.append(el('label', {}, f.label, input));
  }
  $('dialog-error').textContent = '';
  const ok = $('dialog-ok');
  ok.textContent = 'Confirm'; // one name for every confirmation
  ok.className = danger ? 'danger' : 'primary';
  const form = $('dialog-form');
  form.onsubmit = async (ev) => {
    ev.preventDefault();
    ok.disabled = true;
    try {
      const values = {};
      for (const [k, i] of Object.entries(inputs)) values[k] = i.type === 'file' ? i.files[0] : i.value;
      await submit(values);
      dlg.close();
    } catch (e) {
      showError('dialog-error', e);
    } finally {
      ok.disabled = false;
    }
  };
  $('dialog-cancel').onclick = () => dlg.close();
  dlg.showModal();
  const first = Object.values(inputs)[0];
  if (first) first.focus();
}

// ---------- sign in / out ----------

async function signIn(ev) {
  ev.preventDefault();
  const candidate = $('token').value.trim();
  showError('signin-error', null);
  if (!candidate) return;
  try {
    const res = await fetch(`${API}/tasks?limit=1`, { headers: { Authorization: `Bearer ${candidate}` }, cache: 'no-store' });
    if (res.status === 401 || res.status === 403) {
      $('signin-error').textContent = 'That admin token was refused.';
      return;
    }
    if (!res.ok) throw new APIError(res.status);
  } catch (e) {
    showError('signin-error', e);
    return;
  }
  state.token = candidate;
  sessionStorage.setItem(TOKEN_KEY, candidate);
  $('token').value = '';
  start();
}

function signOut(message) {
  state.token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  if (state.stream) state.stream.abort();
  state.stream = null;
  for (const id of ['nav', 'signout', 'live', ...VIEWS.map((v) => `view-${v}`)]) $(id).hidden = true;
  $('view-signin').hidden = false;
  $('signin-error').textContent = typeof message === 'string' ? message : '';
  $('token').focus();
}

// applyRole learns the signed-in token's role and hides the actions it
// cannot do (api.md, Roles): an auditor only reads; operators and admins
// work tasks and devices.
const canWrite = () => state.role === 'admin' || state.role === 'operator';
async function applyRole() {
  try { state.role = (await api('GET', `${API}/whoami`)).role; } catch { state.role = 'auditor'; }
  for (const id of ['new-task', 'register-device', 'task-actions']) $(id).hidden = !canWrite();
  refresh();
}

function start() {
  applyRole();
  $('view-signin').hidden = true;
  $('nav').hidden = false;
  $('signout').hidden = false;
  $('live').hidden = false;
  show('overview'); // the landing page: the fleet's pulse
  openStream();
}

// ---------- views ----------

const VIEWS = ['overview', 'tasks', 'task', 'devices', 'device'];
const TAB_OF = { overview: 'overview', tasks: 'tasks', task: 'tasks', devices: 'devices', device: 'devices' };

// show opens a view; id is the task's (view 'task') or device's ('device').
function show(view, id) {
  if (view === 'task' && id !== state.taskId) { // never show another task's detail while this one loads
    setText($('task-title'), `Task ${short(id)}`);
    $('task-title').title = id;
    for (const x of ['task-summary', 'task-body', 'task-actions', 'provenance']) $(x).replaceChildren();
    $('history').tBodies[0].replaceChildren();
  }
  if (view === 'device' && id !== state.deviceId) {
    setText($('device-title'), `Device ${deviceName(id)}`);
    $('device-title').title = id;
    $('device-summary').replaceChildren();
    $('device-timeline').tBodies[0].replaceChildren();
  }
  state.view = view;
  state.taskId = view === 'task' ? id : null;
  state.deviceId = view === 'device' ? id : null;
  for (const v of VIEWS) $(`view-${v}`).hidden = v !== view;
  for (const tab of ['overview', 'tasks', 'devices']) $(`tab-${tab}`).setAttribute('aria-selected', String(TAB_OF[view] === tab));
  refresh();
}

function refresh() {
  if (!state.token) return;
  if (state.view === 'overview') loadOverview();
  else if (state.view === 'tasks') loadTasks();
  else if (state.view === 'task') loadTask(state.taskId);
  else if (state.view === 'device') loadDevice(state.deviceId);
  else loadDevices();
}

// scheduleRefresh refreshes the view 250 ms after the first event of a
// burst: later events of the burst join that refresh (a throttle, so a
// steady stream of events still refreshes at least 4 times a second).
function scheduleRefresh() {
  if (state.refreshTimer) return;
  state.refreshTimer = setTimeout(() => { state.refreshTimer = 0; refresh(); }, 250);
}

async function loadDeviceNames() {
  const doc = await api('GET', `${API}/devices`);
  setServerTime(doc.server_time);
  state.devices = new Map(doc.devices.map((d) => [d.device_id, d]));
  notePresence(doc.devices);
  return doc.devices;
}

const deviceName = (id) => (id ? (state.devices.get(id)?.name || short(id)) : '—');

function leaseOf(t) {
  if (t.execution && (t.state === 'RUNNING' || t.state === 'WAITING_CONFIRMATION')) return t.execution.lease_expires_at;
  if (t.claim) return t.claim.lease_expires_at;
  return null;
}

function leaseExpired(t) {
  const l = leaseOf(t);
  return l !== null && ms(l) <= serverNow() && ['CLAIMED', 'RUNNING', 'WAITING_CONFIRMATION'].includes(t.state);
}

function stateCell(t) {
  const cell = el('span', {}, el('span', { class: `state ${t.state}`, text: t.state }));
  if (leaseExpired(t)) cell.append(el('span', { class: 'flag expired', text: 'lease expired' }));
  if (t.cancel_requested) cell.append(el('span', { class: 'flag cancel', text: 'cancel requested' }));
  if (t.needs_operator) cell.append(el('span', { class: 'flag operator', text: 'needs operator' }));
  return cell;
}

function authText(t) {
  if (!t.authorization) return 'none';
  const a = t.authorization;
  if (['SUCCEEDED', 'FAILED', 'CANCELED'].includes(t.state) && a.status === 'ACTIVE') return `unused r${a.revision}`;
  let s = `${a.status} r${a.revision}`;
  if (a.status === 'ACTIVE') s += ` · ${remaining(a.expires_at).replace(' left', '')}`;
  return s;
}

async function loadTasks() {
  showError('tasks-error', null);
  try {
    await loadDeviceNames();
    const f = state.filter;
    const search = f.search.trim().toLowerCase();
    if (/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(search)) {
      try {
        const t = await api('GET', `${API}/tasks/${search}`);
        renderTasks([t], null, null);
      } catch (e) {
        if (e.code === 'task_not_found') renderTasks([], null, null); else throw e;
      }
      return;
    }
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (f.state) q.set('state', f.state);
    if (f.device) q.set('device_id', f.device);
    const cursor = state.cursors[state.cursors.length - 1];
    if (cursor) q.set('cursor', cursor);
    const doc = await api('GET', `${API}/tasks?${q}`);
    setServerTime(doc.server_time);
    const tasks = search ? doc.tasks.filter((t) => t.id.startsWith(search)) : doc.tasks;
    state.next = doc.next_cursor;
    renderTasks(tasks, doc.counts, doc.next_cursor);
  } catch (e) {
    showError('tasks-error', e);
  }
}

function renderTasks(tasks, counts, next) {
  if (counts) renderCounts(counts);
  const sel = $('filter-device');
  const current = state.filter.device;
  sel.replaceChildren(el('option', { value: '', text: 'any device' }));
  for (const d of state.devices.values()) sel.append(el('option', { value: d.device_id, text: d.name, selected: d.device_id === current }));
  const body = $('tasks').tBodies[0];
  body.replaceChildren();
  for (const t of tasks) {
    const holder = t.claim ? t.claim.device_id : null;
    const lease = leaseOf(t);
    body.append(el('tr', { 'data-task-id': t.id },
      el('td', { 'data-label': 'Task' }, el('button', { type: 'button', class: 'link', title: t.id, 'aria-label': `Task ${t.id}`, onclick: () => show('task', t.id) }, short(t.id))),
      el('td', { 'data-label': 'State' }, stateCell(t)),
      el('td', { 'data-label': 'Device' }, deviceName(holder)),
      el('td', { 'data-label': 'Lease' }, lease ? remaining(lease) : '—'),
      el('td', { 'data-label': 'Authorization' }, authText(t)),
      el('td', { 'data-label': 'Changed', title: t.updated_at }, ago(t.updated_at))));
  }
  $('tasks-empty').hidden = tasks.length > 0;
  $('page-older').disabled = !next;
  $('page-newer').disabled = state.cursors.length <= 1;
}

function renderCounts(counts) {
  const box = $('counts');
  box.replaceChildren();
  const total = STATES.reduce((n, s) => n + (counts[s] || 0), 0);
  const chip = (label, value, n) => el('button', {
    type: 'button', 'aria-pressed': String(state.filter.state === value),
    onclick: () => { state.filter.state = value; state.cursors = ['']; loadTasks(); },
  }, label, el('span', { class: 'n', text: String(n) }));
  box.append(chip('All', '', total));
  for (const s of STATES) box.append(chip(s, s, counts[s] || 0));
}

// ---------- task detail ----------
//
// One screen: the summary strip, then authorization, claim, execution and
// outcome side by side (one column on phones, same order), the payload
// and images, the history as a compact timeline (heartbeat runs folded
// into one row), and the provenance collapsed into a table grouped by
// event. Each field also names the event that set it on hover (title).

// kv renders [label, value, provenance key?] rows.
function kv(pairs, cls = 'kv') {
  const dl = el('dl', { class: cls });
  for (const [k, v, key] of pairs) {
    dl.append(el('div', { 'data-prov': key },
      el('dt', { text: k }),
      el('dd', {}, v instanceof Node ? v : (v === null || v === undefined || v === '' ? '—' : String(v)))));
  }
  return dl;
}

const card = (title, ...content) => el('section', { class: 'card' }, el('h2', { text: title }), ...content);
const json = (v) => el('pre', { class: 'json', text: JSON.stringify(v, null, 2) });
// when: a time with how long ago; the date only when it is not today's.
const when = (s) => (s ? `${s.slice(0, 10) === new Date(serverNow()).toISOString().slice(0, 10) ? clock(s).slice(11) : clock(s)} (${ago(s)})` : '—');
const clock = (s) => (s ? s.replace('T', ' ').replace(/(\.\d+)?Z$/, 'Z') : '—');
const hhmmss = (s) => (s ? s.slice(11, 19) : '—');
const actorText = (a, full) => (a ? `${a.kind}${a.id ? ' ' + (a.kind === 'device' ? deviceName(a.id) : (full ? a.id : short(a.id))) : ''}` : '');

async function loadTask(id) {
  showError('task-error', null);
  try {
    if (state.devices.size === 0) await loadDeviceNames();
    else loadDeviceNames().catch(() => {});
    const [t, hist] = await Promise.all([api('GET', `${API}/tasks/${id}`), api('GET', `${API}/tasks/${id}/events`)]);
    if (state.taskId !== id) return;
    renderTask(t, hist.events);
    api('GET', `${API}/tasks/${id}/provenance`).then((p) => { if ($('task-title').title === id) renderProvenance(p.fields); }).catch(() => {});
  } catch (e) {
    showError('task-error', e);
  }
}

function renderTask(t, events) {
  setText($('task-title'), `Task ${short(t.id)}`);
  $('task-title').title = t.id;
  const a = t.authorization;
  const summary = $('task-summary');
  summary.replaceChildren(kv([
    ['state', stateCell(t), 'state'], ['id', el('code', { text: t.id }), 'id'], ['version · revision', `${t.version} · r${t.revision}`, 'version'],
    ['created', when(t.created_at), 'created_at'], ['changed', when(t.updated_at), 'updated_at'],
    ['authorization', a ? `${a.status} r${a.revision} · ${a.takeover || 'reclaim'} · until ${clock(a.expires_at)}${a.status === 'ACTIVE' ? ` (${remaining(a.expires_at)})` : ''}` : 'none', 'authorization'],
  ], 'kv facts'));
  const body = $('task-body');
  body.replaceChildren();
  const c = t.claim;
  const open = ['CLAIMED', 'RUNNING', 'WAITING_CONFIRMATION'].includes(t.state);
  const lastClaim = [...events].reverse().find((e) => e.type === 'task.claimed');
  body.append(card('Claim', c ? kv([['device', deviceName(c.device_id), 'claim.device_id'], ['device id', short(c.device_id), 'claim.device_id'],
    ['generation', c.generation, 'claim.generation'], ['session', short(c.session_id), 'claim.session_id'],
    ['lease', `${clock(c.lease_expires_at)} (${remaining(c.lease_expires_at)})`, 'claim.lease_expires_at'], ['token', c.token_origin + '-issued', 'claim.token_origin']])
    : lastClaim ? kv([['device', deviceName(lastClaim.body.device_id)], ['generation', lastClaim.body.claim_generation], ['claimed', when(lastClaim.at)],
      ['closed', `${t.state === 'PENDING' ? 'released or requeued' : t.state.toLowerCase()} · no open claim`]])
      : el('p', { class: 'muted', text: 'Never claimed.' })));
  const x = t.execution;
  body.append(card('Execution', x ? kv([['id', short(x.id), 'execution.id'], ['step', x.step, 'execution.step'], ['started', when(x.started_at), 'execution.started_at'],
    ['lease', open ? `${clock(x.lease_expires_at)} (${remaining(x.lease_expires_at)})` : `closed (${t.state.toLowerCase()})`, 'execution.lease_expires_at'], ['last seen', when(x.last_seen_at), 'execution.last_seen_at'],
    ['cancel requested', t.cancel_requested ? 'yes' : 'no', 'cancel_requested']]) : el('p', { class: 'muted', text: 'Not started.' })));
  const parts = [];
  if (t.result !== null && t.result !== undefined) parts.push(kv([['result', json(t.result), 'result']]));
  if (t.failure) parts.push(kv([['failure', t.failure.reason_code, 'failure.reason_code'], ['detail', t.failure.detail, 'failure.detail']]));
  if (t.recovery) parts.push(kv([['recovery', t.recovery.decision, 'recovery.decision'], ['reason', t.recovery.reason, 'recovery.reason'], ['at', clock(t.recovery.at), 'recovery.at']]));
  for (const l of t.late_reports || []) parts.push(kv([['late report', `${l.outcome} at ${clock(l.at)}`, 'late_reports'], ['device', deviceName(l.device_id)], ['generation', l.claim_generation]]));
  body.append(card('Outcome', ...(parts.length ? parts : [el('p', { class: 'muted', text: 'No outcome yet.' })])));
  body.append(el('section', { class: 'card wide' }, el('h2', { text: 'Payload' }), json(t.payload)));
  const media = [];
  if (t.reference_image) media.push(el('p', { class: 'muted', text: `Reference image (${t.reference_image.size} bytes)` }), image(`${API}/tasks/${t.id}/reference-image`, 'Reference image'));
  if (t.evidence && t.evidence.length) {
    const thumbs = el('div', { class: 'thumbs' });
    for (const e of t.evidence) thumbs.append(image(`${API}/tasks/${t.id}/evidence/${e.evidence_id}`, `Evidence ${short(e.evidence_id)} (${e.kind})`));
    media.push(el('p', { class: 'muted', text: `Evidence (${t.evidence.length})` }), thumbs);
  }
  if (media.length) body.append(card('Images', ...media));
  renderActions(t);
  renderHistory(events);
  $('provenance').replaceChildren();
}

// renderProvenance names, beside every field, the event that last set it
// (GET /admin/tasks/{id}/provenance): a title on the field, and a
// collapsed table with one row per event listing the fields it set.
function renderProvenance(fields) {
  const byKey = new Map(Object.entries(fields));
  const say = (p) => `set by #${p.seq} ${p.type} · ${actorText(p.actor)}${p.generation === null || p.generation === undefined ? '' : ` · gen ${p.generation}`} · ${clock(p.at)}`;
  for (const row of document.querySelectorAll('#view-task [data-prov]')) {
    const p = byKey.get(row.dataset.prov);
    if (p) { row.title = visible(say(p)); row.classList.add('prov'); }
  }
  const groups = new Map();
  for (const [k, p] of byKey) {
    if (!groups.has(p.seq)) groups.set(p.seq, { p, keys: [] });
    groups.get(p.seq).keys.push(k);
  }
  const rows = [...groups.values()].sort((x, y) => x.p.seq - y.p.seq).map(({ p, keys }) => el('tr', {},
    el('td', { 'data-label': 'Event' }, `#${p.seq} ${p.type}`),
    el('td', { 'data-label': 'When', title: p.at }, clock(p.at)),
    el('td', { 'data-label': 'Actor' }, actorText(p.actor)),
    el('td', { 'data-label': 'Gen' }, p.generation === null || p.generation === undefined ? '—' : String(p.generation)),
    el('td', { 'data-label': 'Fields it set' }, keys.filter((k) => !k.includes('.') || !keys.includes(k.split('.')[0])).sort().join(', '))));
  $('provenance').replaceChildren(el('details', { class: 'prov-table' },
    el('summary', { text: `Provenance: the event that set each field (${groups.size} events, ${byKey.size} fields)` }),
    el('div', { class: 'scroll' }, el('table', { class: 'list compact provlist' },
      el('thead', {}, el('tr', {}, ...['Event', 'When', 'Actor', 'Gen', 'Fields it set'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, ...rows)))));
}

// image fetches an admin image with the token and shows it from a blob URL.
function image(path, alt) {
  const img = el('img', { alt });
  api.blob(path).then((b) => { img.src = URL.createObjectURL(b); }).catch(() => { img.alt = `${alt}: not available`; });
  return img;
}
api.blob = async (path) => {
  const res = await fetch(path, { headers: { Authorization: `Bearer ${state.token}` }, cache: 'no-store' });
  if (!res.ok) throw new APIError(res.status);
  return res.blob();
};

// eventDetail is an event's body in one line, ids shortened.
function eventDetail(b, skip = []) {
  const fields = [];
  for (const [k, v] of Object.entries(b || {})) {
    if (['task_id', 'claim_generation', 'version', ...skip].includes(k) || v === null || v === '' || (Array.isArray(v) && v.length === 0)) continue;
    let s;
    if (typeof v === 'object') s = JSON.stringify(v);
    else if (typeof v === 'string' && /^[0-9a-f]{8}-[0-9a-f]{4}-/.test(v)) s = k === 'device_id' ? deviceName(v) : short(v);
    else if (typeof v === 'string' && /_at$/.test(k)) s = hhmmss(v);
    else s = String(v);
    if (s.length > 120) s = s.slice(0, 117) + '…';
    fields.push(`${k.replace(/_/g, ' ')}: ${s}`);
  }
  return fields.join(' · ');
}

// genCell is an event's claim generation ('none' when it has none: phones
// leave the cell out).
function genCell(e) {
  const has = e.body && e.body.claim_generation !== undefined && e.body.claim_generation !== null;
  return el('td', { 'data-label': 'Gen', class: has ? undefined : 'none' }, has ? String(e.body.claim_generation) : '—');
}

// QUIET: body fields the timelines leave out of an event's one-line detail
// (ids shown elsewhere, a claim's presence snapshot, hashes).
const QUIET = ['session_id', 'authorization_id', 'presence', 'payload_sha256', 'previous_lease_expires_at', 'authorization_expires_at'];

// fold joins runs of heartbeats of one execution into one entry.
function fold(events) {
  const out = [];
  for (const e of events) {
    const prev = out[out.length - 1];
    if (e.type === 'task.heartbeat' && prev && prev.type === 'task.heartbeat' && prev.body?.task_id === e.body?.task_id) {
      prev.n = (prev.n || 1) + 1;
      prev.lastAt = e.at;
      prev.last = e;
      continue;
    }
    out.push({ ...e });
  }
  return out;
}

function renderHistory(events) {
  const rows = fold(events).map((e) => {
    const type = e.n ? `${e.type} ×${e.n}` : e.type;
    const at = e.n ? `${hhmmss(e.at)}–${hhmmss(e.lastAt)}` : hhmmss(e.at);
    const detail = eventDetail((e.last || e).body, e.actor && e.actor.kind === 'device' ? ['device_id', ...QUIET] : QUIET);
    return el('tr', { 'data-seq': e.seq },
      el('td', { 'data-label': 'Time', title: e.n ? `${e.at} – ${e.lastAt}` : e.at, class: 'nowrap' }, at),
      el('td', { 'data-label': 'Event' }, el('span', { class: 'type', text: type }), el('span', { class: 'muted', text: ` #${e.seq}` })),
      el('td', { 'data-label': 'Actor' }, actorText(e.actor)),
      genCell(e),
      el('td', { 'data-label': 'Detail', class: 'detail', title: detail }, detail || '—'));
  });
  $('history').tBodies[0].replaceChildren(...rows);
}

// actionButton makes the button of one action; data-action names it
// (authorize, amend, revoke-authorization, cancel, safe-stop, recover,
// revoke-device; index.html's create-task and register-device), so a filter that hides what a role cannot do has one
// attribute to select on.
function actionButton(action, label, cls, onclick, attrs = {}) {
  return el('button', { type: 'button', class: cls || undefined, 'data-action': action, onclick, ...attrs }, label);
}

function renderActions(t) {
  const box = $('task-actions');
  box.replaceChildren();
  const open = ['CLAIMED', 'RUNNING', 'WAITING_CONFIRMATION'].includes(t.state);
  const terminal = ['SUCCEEDED', 'FAILED', 'CANCELED'].includes(t.state);
  const path = `${API}/tasks/${t.id}`;
  const done = () => loadTask(t.id);
  if (!terminal && t.state !== 'RUNNING' && t.state !== 'WAITING_CONFIRMATION') {
    const sub = new Submission();
    box.append(actionButton('authorize', 'Authorize', 'primary', () => ask({
      title: 'Authorize task',
      fields: [
        { name: 'ttl', label: 'Authorization TTL (seconds)', type: 'number', value: '3600', min: '1', required: true },
        { name: 'takeover', label: 'When the claim is lost', type: 'select', value: 'reclaim', options: [
          { value: 'reclaim', label: 'reclaim: another device may claim it again' },
          { value: 'manual', label: 'manual: an operator must recover it' }] },
      ],
      submit: async (v) => {
        const body = { expected_revision: t.revision, ttl_seconds: Number(v.ttl) };
        if (v.takeover === 'manual') body.takeover = 'manual';
        await sub.send('POST', `${path}/authorize`, { body });
        done();
      },
    })));
    const amend = new Submission();
    box.append(actionButton('amend', 'Amend', '', () => ask({
      title: 'Amend payload',
      fields: [{ name: 'payload', label: 'Payload (JSON object)', type: 'textarea', value: jsonText(t.payload) },
        { type: 'note', text: 'Amending invalidates the authorization: authorize again afterwards.' }],
      submit: async (v) => { await amend.send('POST', `${path}/amend`, { body: { expected_revision: t.revision, payload: parseJSON(v.payload) } }); done(); },
    })));
  }
  if (!terminal && t.authorization && t.authorization.status === 'ACTIVE') {
    const sub = new Submission();
    box.append(actionButton('revoke-authorization', 'Revoke authorization', '', () => ask({
      title: 'Revoke the authorization?', danger: true,
      fields: [{ name: 'reason', label: 'Reason', value: 'revoked from the console', required: true }],
      submit: async (v) => { await sub.send('POST', `${path}/authorization/revoke`, { body: { reason: v.reason } }); done(); },
    })));
  }
  if (t.state === 'PENDING' || t.state === 'CLAIMED') {
    const sub = new Submission();
    box.append(actionButton('cancel', 'Cancel task', 'danger', () => ask({
      title: 'Cancel this task? This cannot be undone.', danger: true,
      fields: [{ name: 'reason', label: 'Reason', value: 'canceled from the console', required: true }],
      submit: async (v) => { await sub.send('POST', `${path}/cancel`, { body: { reason: v.reason, expected_version: t.version } }); done(); },
    })));
  }
  if ((t.state === 'RUNNING' || t.state === 'WAITING_CONFIRMATION') && !t.cancel_requested) {
    const sub = new Submission();
    box.append(actionButton('safe-stop', 'Request safe stop', 'danger', () => ask({
      title: 'Request a safe stop?', danger: true,
      fields: [{ type: 'note', text: 'The device is asked to stop at a safe point; the task is CANCELED once it acknowledges.' },
        { name: 'reason', label: 'Reason', value: 'stop requested from the console', required: true }],
      submit: async (v) => { await sub.send('POST', `${path}/cancel`, { body: { reason: v.reason } }); done(); },
    })));
  }
  const holder = t.claim ? state.devices.get(t.claim.device_id) : null;
  const recoverable = open && (leaseExpired(t) || t.needs_operator || (holder && holder.status === 'REVOKED'));
  if (recoverable) {
    const sub = new Submission();
    box.append(actionButton('recover', 'Recover', '', () => ask({
      title: 'Recover this task?', danger: true,
      fields: [{ name: 'decision', label: 'Decision', type: 'select', value: 'fail', options: [
        { value: 'fail', label: 'fail: the task ends FAILED' },
        { value: 'requeue', label: 'requeue: back to PENDING (needs a new authorization)' }] },
      { name: 'reason', label: 'Reason', value: 'recovered from the console', required: true }],
      submit: async (v) => { await sub.send('POST', `${path}/recover`, { body: { decision: v.decision, reason: v.reason, expected_version: t.version } }); done(); },
    })));
  }
}

function parseJSON(text) {
  try {
    const v = JSON.parse(text);
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error('not an object');
    return v;
  } catch (e) {
    throw new APIError(0, 'invalid_json', `the payload must be a JSON object (${e.message})`);
  }
}

function newTask() {
  const create = new Submission();
  const image = new Submission();
  const auth = new Submission();
  let created = null; // a retry after a partial failure continues where it stopped
  ask({
    title: 'New task',
    fields: [
      { name: 'payload', label: 'Payload (JSON object)', type: 'textarea', value: '{\n  "action": "example"\n}' },
      { name: 'image', label: 'Reference image (JPEG, optional)', type: 'file', accept: 'image/jpeg' },
      { name: 'ttl', label: 'Authorize for (seconds, empty: do not authorize)', type: 'number', value: '3600', min: '1' },
    ],
    submit: async (v) => {
      const payload = parseJSON(v.payload);
      const ttl = v.ttl ? Number(v.ttl) : 0;
      if (!created) {
        const body = { payload };
        if (ttl && !v.image) body.authorize = { ttl_seconds: ttl };
        created = await create.send('POST', `${API}/tasks`, { body });
      }
      if (v.image && created.revision === 1 && !created.reference_image) {
        created = await image.send('PUT', `${API}/tasks/${created.id}/reference-image`, { raw: v.image, type: 'image/jpeg' });
      }
      if (ttl && v.image && !(created.authorization && created.authorization.status === 'ACTIVE')) {
        created = await auth.send('POST', `${API}/tasks/${created.id}/authorize`, { body: { expected_revision: created.revision, ttl_seconds: ttl } });
      }
      show('task', created.id);
    },
  });
}

// ---------- the recent log (overview and device timelines) ----------
//
// The overview's charts and a device's timeline are drawn from the log
// itself: the newest RECENT events are read once through GET /admin/events
// and then followed (each live-stream wake-up reads what came after), so
// every figure is a pure function of committed events. Device presence and
// the count of tasks needing an operator are not events: those series are
// the console's own samples of GET /admin/devices and
// GET /admin/tasks?needs_operator=true, taken at each refresh while the
// page is open.

const RECENT = 5000; // events kept in the page
const HOUR = 3600e3;
const recent = { events: [], after: null, chain: Promise.resolve(), samples: [], presence: new Map() };

function loadRecent() {
  const step = async () => {
    if (recent.after === null) {
      const doc = await api('GET', `${API}/tasks?limit=1`);
      recent.after = Math.max(0, (doc.head_seq || 0) - RECENT);
    }
    for (let i = 0; i < 20; i++) {
      const doc = await api('GET', `${API}/events?after=${recent.after}&limit=1000`);
      for (const e of doc.events) recent.events.push(e);
      if (doc.events.length) recent.after = doc.events[doc.events.length - 1].seq;
      if (doc.events.length < 1000) break;
    }
    if (recent.events.length > RECENT) recent.events.splice(0, recent.events.length - RECENT);
  };
  recent.chain = recent.chain.then(step, step);
  return recent.chain;
}

const taskOf = (e) => e.body && e.body.task_id;
const deviceOf = (e) => (e.actor && e.actor.kind === 'device' ? e.actor.id : e.body && e.body.device_id);

// The state an event leaves its task in, and the state it must have found
// it in when the task's earlier events are older than the pages read.
const TO = {
  'task.created': 'PENDING', 'task.claimed': 'CLAIMED', 'task.started': 'RUNNING', 'task.awaiting_confirmation': 'WAITING_CONFIRMATION',
  'task.resumed': 'RUNNING', 'task.completed': 'SUCCEEDED', 'task.failed': 'FAILED', 'task.canceled': 'CANCELED', 'task.released': 'PENDING',
};
const FROM = {
  'task.claimed': 'PENDING', 'task.started': 'CLAIMED', 'task.awaiting_confirmation': 'RUNNING', 'task.resumed': 'WAITING_CONFIRMATION',
  'task.completed': 'RUNNING', 'task.failed': 'RUNNING', 'task.canceled': 'PENDING', 'task.released': 'CLAIMED', 'task.recovered': 'RUNNING',
};
const toState = (e) => (e.type === 'task.recovered' ? (e.body.decision === 'requeue' ? 'PENDING' : 'FAILED') : TO[e.type]);
const LEASE_END = new Set(['task.completed', 'task.failed', 'task.canceled', 'task.released', 'task.recovered']);

function percentile(xs, q) {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)];
}

// pulse computes every overview series over the last hour from the recent
// events, the current counts by state, and the samples.
function pulse(now, counts) {
  const start = now - HOUR;
  const mins = Array.from({ length: 60 }, (_, i) => start + (i + 1) * 60e3); // the end of each minute
  const tens = Array.from({ length: 6 }, (_, i) => start + (i + 1) * 600e3);
  const fives = Array.from({ length: 12 }, (_, i) => start + (i + 1) * 300e3);
  const bucket = (ends, t) => { const i = ends.findIndex((end) => t <= end); return i < 0 ? ends.length - 1 : i; };
  const last = new Map(); const deltas = []; const claimedAt = new Map(); const startedAt = new Map(); const lease = new Map();
  const commands = new Array(60).fill(0); const c2s = tens.map(() => []); const s2f = tens.map(() => []); const expiries = new Array(12).fill(0);
  let prevKey = '';
  const expire = (task, upTo) => {
    const d = lease.get(task);
    if (d !== undefined && d < upTo) { lease.delete(task); if (d > start && d <= now) expiries[bucket(fives, d)]++; }
  };
  for (const e of recent.events) {
    const t = ms(e.at); const task = taskOf(e);
    if (task) {
      expire(task, t);
      const to = toState(e);
      if (to) {
        const from = last.has(task) ? last.get(task) : (e.type === 'task.created' ? null : FROM[e.type]);
        last.set(task, to);
        if (from !== to) deltas.push({ t, from, to });
      }
      if (e.type === 'task.claimed') claimedAt.set(task, t);
      if (e.type === 'task.started') {
        startedAt.set(task, t);
        if (claimedAt.has(task) && t > start) c2s[bucket(tens, t)].push((t - claimedAt.get(task)) / 1000);
      }
      if ((e.type === 'task.completed' || e.type === 'task.failed') && startedAt.has(task) && t > start) s2f[bucket(tens, t)].push((t - startedAt.get(task)) / 1000);
      if (LEASE_END.has(e.type)) lease.delete(task);
      else if (e.body && e.body.lease_expires_at) lease.set(task, ms(e.body.lease_expires_at));
    }
    // One command appends its events at one time, for one actor and task.
    const key = `${e.at}|${e.actor && e.actor.id}|${task}`;
    if (t > start && key !== prevKey) commands[bucket(mins, t)]++;
    prevKey = key;
  }
  for (const task of [...lease.keys()]) expire(task, now);
  // Counts at the end of each minute: today's counts with later changes undone.
  const byState = {};
  for (const s of STATES) byState[s] = new Array(60).fill(0);
  const c = { ...counts };
  let di = deltas.length - 1;
  for (let i = 59; i >= 0; i--) {
    while (di >= 0 && deltas[di].t > mins[i]) {
      const d = deltas[di--];
      c[d.to] = Math.max(0, (c[d.to] || 0) - 1);
      if (d.from) c[d.from] = (c[d.from] || 0) + 1;
    }
    for (const s of STATES) byState[s][i] = c[s] || 0;
  }
  const sampled = (f) => mins.map((end) => {
    const inMin = recent.samples.filter((x) => x.at > end - 60e3 && x.at <= end);
    return inMin.length ? f(inMin[inMin.length - 1]) : null;
  });
  const all = (xs) => xs.flat();
  return {
    byState, mins,
    cps: commands.map((n) => n / 60),
    c2s: { p50: c2s.map((x) => percentile(x, 0.5)), p95: c2s.map((x) => percentile(x, 0.95)), hour50: percentile(all(c2s), 0.5), hour95: percentile(all(c2s), 0.95) },
    s2f: { p50: s2f.map((x) => percentile(x, 0.5)), p95: s2f.map((x) => percentile(x, 0.95)), hour50: percentile(all(s2f), 0.5), hour95: percentile(all(s2f), 0.95) },
    expiries,
    needs: sampled((x) => x.needs),
    ready: sampled((x) => x.ready), notReady: sampled((x) => x.notReady), offline: sampled((x) => x.offline),
  };
}

// ---------- charts: hand-drawn SVG, no library ----------

const SVG = 'http://www.w3.org/2000/svg';
function svgEl(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

const fmt = (v, unit) => (v === null || v === undefined ? '—' : `${Number.isInteger(v) ? v : v < 10 ? v.toFixed(2) : v.toFixed(1)}${unit ? ' ' + unit : ''}`);

// chart draws one figure: lines (or bars) of series over the last hour,
// the scale and time axis as HTML text (readable at any width), and a
// table of the current figures that is also the legend and, with the
// SVG's aria-label, the chart's text alternative.
function chart({ id, title, unit = '', cols, rows, bars = false }) {
  const W = 300; const H = 100;
  const drawn = rows.filter((r) => r.values);
  const max = Math.max(1, ...drawn.flatMap((r) => r.values.filter((v) => v !== null)));
  const top = niceMax(max);
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', class: 'plot-svg' });
  for (const f of [0.25, 0.5, 0.75]) svg.append(svgEl('line', { x1: 0, x2: W, y1: H * f, y2: H * f, class: 'grid-line', 'vector-effect': 'non-scaling-stroke' }));
  drawn.forEach((r, si) => {
    const n = r.values.length;
    if (bars) {
      const bw = W / n;
      r.values.forEach((v, i) => { if (v) svg.append(svgEl('rect', { x: i * bw + bw * 0.15, width: bw * 0.7, y: H - (v / top) * H, height: (v / top) * H, class: `bar s${r.color ?? si}` })); });
      return;
    }
    let d = ''; let pen = false;
    r.values.forEach((v, i) => {
      if (v === null) { pen = false; return; }
      const x = n === 1 ? W : (i / (n - 1)) * W; const y = H - (v / top) * H;
      d += `${pen ? 'L' : 'M'}${x.toFixed(1)},${y.toFixed(1)}`;
      pen = true;
    });
    if (d) svg.append(svgEl('path', { d, class: `line s${r.color ?? si}`, 'vector-effect': 'non-scaling-stroke' }));
    const li = r.values.findLastIndex((v) => v !== null); // the newest figure as a dot (a single sample has no line)
    if (li >= 0) {
      const y = H - (r.values[li] / top) * H;
      svg.append(svgEl('line', { x1: n === 1 ? W : (li / (n - 1)) * W, x2: n === 1 ? W : (li / (n - 1)) * W, y1: y, y2: y, class: `dot s${r.color ?? si}`, 'vector-effect': 'non-scaling-stroke' }));
    }
  });
  const label = `${title}. ` + rows.map((r) => `${r.name}: ${cols.map((c, i) => `${c} ${r.cells[i]}`).join(', ')}`).join('; ') + '.';
  svg.setAttribute('aria-label', visible(label));
  const table = el('table', { class: 'figures' },
    el('caption', { class: 'sr', text: `${title}: current figures` }),
    el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: unit ? `Series (${unit})` : 'Series' }), ...cols.map((c) => el('th', { scope: 'col', text: c })))),
    el('tbody', {}, ...rows.map((r, si) => el('tr', { 'data-series': r.key || r.name },
      el('th', { scope: 'row' }, r.values ? el('span', { class: `swatch s${r.color ?? si}`, 'aria-hidden': 'true' }) : null,
        ...r.name.split('_').flatMap((w, i) => (i ? [el('wbr'), `_${w}`] : [w]))), // WAITING_CONFIRMATION may break at 360 px
      ...r.cells.map((c, i) => el('td', { class: i === 0 ? 'now' : 'then', text: c }))))));
  return el('figure', { class: 'card chart', id, 'aria-labelledby': `${id}-title` },
    el('h2', { id: `${id}-title`, text: title }),
    el('div', { class: 'plot' }, el('span', { class: 'ymax', text: fmt(top, unit) }), svg),
    el('div', { class: 'axis', 'aria-hidden': 'true' }, el('span', { text: '−60 min' }), el('span', { text: '−30' }), el('span', { text: 'now' })),
    table);
}

function niceMax(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// ---------- overview ----------

async function loadOverview() {
  showError('overview-error', null);
  try {
    const [list, needs, devices] = await Promise.all([
      api('GET', `${API}/tasks?limit=1`), api('GET', `${API}/tasks?needs_operator=true&limit=500`), loadDeviceNames(), loadRecent()]);
    setServerTime(list.server_time);
    const now = serverNow();
    const live = devices.filter((d) => d.status === 'ACTIVE');
    const on = (d) => d.presence && d.presence.online;
    recent.samples.push({ at: now, needs: needs.tasks.length, ready: live.filter((d) => on(d) && d.presence.claimable).length,
      notReady: live.filter((d) => on(d) && !d.presence.claimable).length, offline: live.filter((d) => !on(d)).length });
    while (recent.samples.length && recent.samples[0].at < now - HOUR) recent.samples.shift();
    if (state.view === 'overview') renderOverview(pulse(now, list.counts), list.counts, needs, recent.samples[recent.samples.length - 1]);
  } catch (e) {
    showError('overview-error', e);
  }
}

function renderOverview(p, counts, needs, sample) {
  const hourAgo = (s) => String(p.byState[s][0]);
  const active = ['PENDING', 'CLAIMED', 'RUNNING', 'WAITING_CONFIRMATION'];
  const total = (xs) => xs.reduce((a, b) => a + b, 0);
  const sec = (v) => (v === null ? '—' : fmt(v, 's'));
  const charts = [
    chart({ id: 'chart-states', title: 'Tasks by state', cols: ['Now', '1 h ago'],
      rows: STATES.map((s, i) => ({ key: s, name: s, color: i, values: active.includes(s) ? p.byState[s] : null, cells: [String(counts[s] || 0), hourAgo(s)] })) }),
    chart({ id: 'chart-commands', title: 'Commands per second', unit: '/s', cols: ['Last min', 'Hour avg'],
      rows: [{ key: 'commands', name: 'committed commands', values: p.cps, cells: [fmt(p.cps[59]), fmt(total(p.cps) / 60)] }] }),
    chart({ id: 'chart-claim-start', title: 'Claim → start', unit: 's', cols: ['Last 10 min', 'Hour'],
      rows: [{ key: 'p50', name: 'p50', values: p.c2s.p50, cells: [sec(p.c2s.p50[5]), sec(p.c2s.hour50)] },
        { key: 'p95', name: 'p95', values: p.c2s.p95, cells: [sec(p.c2s.p95[5]), sec(p.c2s.hour95)] }] }),
    chart({ id: 'chart-start-finish', title: 'Start → finish', unit: 's', cols: ['Last 10 min', 'Hour'],
      rows: [{ key: 'p50', name: 'p50', values: p.s2f.p50, cells: [sec(p.s2f.p50[5]), sec(p.s2f.hour50)] },
        { key: 'p95', name: 'p95', values: p.s2f.p95, cells: [sec(p.s2f.p95[5]), sec(p.s2f.hour95)] }] }),
    chart({ id: 'chart-leases', title: 'Lease expiries (per 5 min)', bars: true, cols: ['Now', 'Hour'],
      rows: [{ key: 'expiries', name: 'lease expiries', color: 6, values: p.expiries, cells: [String(p.expiries[11]), String(total(p.expiries))] },
        { key: 'needs', name: `needing an operator${needs.next_cursor ? ' (500+)' : ''}`, values: null, cells: [String(needs.tasks.length), String(Math.max(0, ...p.needs.filter((v) => v !== null)))] }] }),
    chart({ id: 'chart-devices', title: 'Devices', cols: ['Now', 'Hour min'],
      rows: [{ key: 'ready', name: 'ready', color: 4, values: p.ready, cells: [String(sample.ready), String(Math.min(...p.ready.filter((v) => v !== null)))] },
        { key: 'not-ready', name: 'not ready', color: 5, values: p.notReady, cells: [String(sample.notReady), String(Math.min(...p.notReady.filter((v) => v !== null)))] },
        { key: 'offline', name: 'offline', color: 3, values: p.offline, cells: [String(sample.offline), String(Math.min(...p.offline.filter((v) => v !== null)))] }] }),
  ];
  $('charts').replaceChildren(...charts);
  const first = recent.events[0];
  setText($('overview-note'), first && ms(first.at) > serverNow() - HOUR && first.seq > 1
    ? `Figures from seq ${first.seq} on (the newest ${RECENT} events). Device and operator series: samples since this page opened.`
    : 'Device and needing-an-operator series are samples taken since this page opened; the others are read from the log.');
}

// ---------- a device's page ----------

async function loadDevice(id) {
  showError('device-error', null);
  try {
    const [d] = await Promise.all([api('GET', `${API}/devices/${id}`), loadDeviceNames(), loadRecent()]);
    if (state.view === 'device' && state.deviceId === id) renderDevice(d);
  } catch (e) {
    showError('device-error', e);
  }
}

const presenceText = (p) => (p && p.online ? (p.claimable ? 'online, ready' : 'online, not ready') : 'offline');

// notePresence records each change of a device's presence the console
// sees (presence is soft state, not an event).
function notePresence(devices) {
  const now = serverNow();
  for (const d of devices) {
    const s = d.status === 'REVOKED' ? 'revoked' : presenceText(d.presence);
    const seen = recent.presence.get(d.device_id) || [];
    if (!seen.length || seen[seen.length - 1].text !== s) seen.push({ at: new Date(now).toISOString(), text: s, first: !seen.length });
    recent.presence.set(d.device_id, seen.slice(-50));
  }
}

function renderDevice(d) {
  setText($('device-title'), `Device ${d.name}`);
  $('device-title').title = d.device_id;
  const p = d.presence;
  const required = d.required_checks || [];
  const failing = p ? required.filter((k) => !p.checks[k]) : required;
  $('device-summary').replaceChildren(kv([
    ['status', d.status], ['presence', presenceText(p)], ['last seen', p ? when(p.last_seen_at) : 'never'],
    ['required checks', failing.length ? `✗ failing: ${failing.join(', ')}` : `✓ all ${required.length} pass`],
    ['app · os', p ? `${p.app_version || '—'} · ${p.os_version || '—'}` : '—'],
    ['open task', d.open_task_id ? el('button', { type: 'button', class: 'link', 'aria-label': `Task ${d.open_task_id}`, onclick: () => show('task', d.open_task_id) }, short(d.open_task_id)) : '—'],
    ['registered', when(d.registered_at)], ['id', el('code', { text: d.device_id })],
    ...(d.status === 'REVOKED' ? [['revoked', `${when(d.revoked_at)} · ${d.revoke_reason}`]] : []),
  ], 'kv facts'));
  // Newest first; a folded heartbeat run sorts by its last beat, and
  // events of one instant by seq.
  const items = fold(recent.events.filter((e) => deviceOf(e) === d.device_id)).map((e) => ({ at: e.lastAt || e.at, seq: e.seq, e }));
  for (const x of recent.presence.get(d.device_id) || []) items.push({ at: x.at, seq: Infinity, presence: x });
  if (p) items.push({ at: p.last_seen_at, seq: Infinity, seen: true });
  items.sort((a, b) => ms(b.at) - ms(a.at) || b.seq - a.seq);
  const rows = items.slice(0, 100).map((x) => {
    if (x.presence || x.seen) {
      return el('tr', { class: 'presence' },
        el('td', { 'data-label': 'Time', title: x.at, class: 'nowrap' }, hhmmss(x.at)),
        el('td', { 'data-label': 'Event' }, el('span', { class: 'type', text: x.seen ? 'last presence report' : `presence: ${x.presence.text}` })),
        el('td', { 'data-label': 'Task', class: 'none' }, '—'), el('td', { 'data-label': 'Gen', class: 'none' }, '—'),
        el('td', { 'data-label': 'Detail', class: 'detail' }, x.seen ? `the device last reported at ${clock(x.at)}` : x.presence.first ? 'first seen by this console' : 'changed, as seen by this console'));
    }
    const e = x.e; const task = taskOf(e);
    const detail = eventDetail((e.last || e).body, ['device_id', 'execution_id', ...QUIET]);
    return el('tr', { 'data-seq': e.seq },
      el('td', { 'data-label': 'Time', title: e.n ? `${e.at} – ${e.lastAt}` : e.at, class: 'nowrap' }, e.n ? `${hhmmss(e.at)}–${hhmmss(e.lastAt)}` : hhmmss(e.at)),
      el('td', { 'data-label': 'Event' }, el('span', { class: 'type', text: e.n ? `${e.type} ×${e.n}` : e.type })),
      el('td', { 'data-label': 'Task', class: task ? undefined : 'none' }, task ? el('button', { type: 'button', class: 'link', 'aria-label': `Task ${task}`, onclick: () => show('task', task) }, short(task)) : '—'),
      genCell(e),
      el('td', { 'data-label': 'Detail', class: 'detail', title: detail }, detail || '—'));
  });
  $('device-timeline').tBodies[0].replaceChildren(...rows);
  $('device-empty').hidden = rows.length > 0;
}

// ---------- devices ----------

async function loadDevices() {
  showError('devices-error', null);
  try {
    renderDevices(await loadDeviceNames());
  } catch (e) {
    showError('devices-error', e);
  }
}

function renderDevices(devices) {
  const body = $('devices').tBodies[0];
  body.replaceChildren();
  for (const d of devices) {
    const p = d.presence;
    const presence = p && p.online ? (p.claimable ? 'online, ready' : 'online, not ready') : 'offline';
    const checks = p ? Object.entries(p.checks).map(([k, ok]) => `${ok ? '✓' : '✗'} ${k}`).join(', ') || 'none' : '—';
    const revoke = new Submission();
    body.append(el('tr', { 'data-device-id': d.device_id },
      el('td', { 'data-label': 'Name' }, el('button', { type: 'button', class: 'link name', 'aria-label': `Device ${d.name}`, onclick: () => show('device', d.device_id) }, d.name), el('br'), el('code', { class: 'muted', title: d.device_id, text: short(d.device_id) })),
      el('td', { 'data-label': 'Status' }, d.status),
      el('td', { 'data-label': 'Presence' }, presence),
      el('td', { 'data-label': 'Checks' }, checks),
      el('td', { 'data-label': 'Open task' }, d.open_task_id ? el('button', { type: 'button', class: 'link', 'aria-label': `Task ${d.open_task_id}`, onclick: () => show('task', d.open_task_id) }, short(d.open_task_id)) : '—'),
      el('td', { 'data-label': 'Last seen' }, p ? ago(p.last_seen_at) : '—'),
      el('td', { 'data-label': 'Actions' }, d.status === 'ACTIVE' && canWrite() ? actionButton('revoke-device', 'Revoke device', 'danger', () => ask({
        title: `Revoke device ${d.name}? It can never authenticate again.`, danger: true,
        fields: [{ name: 'reason', label: 'Reason', value: 'revoked from the console', required: true }],
        submit: async (v) => { await revoke.send('POST', `${API}/devices/${d.device_id}/revoke`, { body: { reason: v.reason } }); loadDevices(); },
      }), { 'aria-label': 'Revoke device', title: `Revoke ${d.name}` }) : null)));
  }
}

function registerDevice() {
  const sub = new Submission();
  ask({
    title: 'Register device',
    fields: [
      { name: 'name', label: 'Name', required: true },
      { name: 'owner', label: 'Owner id (UUID)', value: uuid(), required: true },
      { name: 'checks', label: 'Required checks (comma-separated, empty: server default)' },
    ],
    submit: async (v) => {
      const body = { owner_id: v.owner.trim(), name: v.name.trim() };
      if (v.checks.trim()) body.required_checks = v.checks.split(',').map((s) => s.trim()).filter(Boolean);
      const doc = await sub.send('POST', `${API}/devices`, { body });
      $('new-token-value').textContent = doc.token; // shown once, in the page only, never stored
      $('new-token').hidden = false;
      loadDevices();
    },
  });
}

// ---------- live updates ----------

async function openStream() {
  if (state.stream) state.stream.abort();
  const ctl = new AbortController();
  state.stream = ctl;
  let last = null;
  const live = $('live');
  while (!ctl.signal.aborted && state.token) {
    try {
      const headers = { Authorization: `Bearer ${state.token}` };
      if (last) headers['Last-Event-ID'] = last;
      const res = await fetch(`${API}/events/stream${last ? '' : '?after=' + (await headSeq())}`, { headers, signal: ctl.signal, cache: 'no-store' });
      if (res.status === 401) { signOut('The admin token was refused. Sign in again.'); return; }
      if (!res.ok || !res.body) throw new Error(`stream answered ${res.status}`);
      live.textContent = '● live';
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const id = block.split('\n').find((l) => l.startsWith('id: '));
          if (id) { last = id.slice(4); scheduleRefresh(); }
        }
      }
    } catch (e) {
      if (ctl.signal.aborted) return;
    }
    live.textContent = '○ reconnecting';
    await new Promise((r) => setTimeout(r, 2000));
  }
}

// headSeq is the newest committed seq, so a new stream sends only what
// comes after it.
async function headSeq() {
  const doc = await api('GET', `${API}/tasks?limit=1`);
  return doc.head_seq || 0;
}

// ---------- wiring ----------

$('signin').addEventListener('submit', signIn);
$('signout').addEventListener('click', () => signOut());
$('tab-overview').addEventListener('click', () => show('overview'));
$('tab-tasks').addEventListener('click', () => show('tasks'));
$('tab-devices').addEventListener('click', () => show('devices'));
$('back').addEventListener('click', () => show('tasks'));
$('device-back').addEventListener('click', () => show('devices'));
$('new-task').addEventListener('click', newTask);
$('register-device').addEventListener('click', registerDevice);
$('filter-device').addEventListener('change', (e) => { state.filter.device = e.target.value; state.cursors = ['']; loadTasks(); });
$('search').addEventListener('input', (e) => { state.filter.search = e.target.value; state.cursors = ['']; scheduleRefresh(); });
$('page-older').addEventListener('click', () => { if (state.next) { state.cursors.push(state.next); loadTasks(); } });
$('page-newer').addEventListener('click', () => { if (state.cursors.length > 1) { state.cursors.pop(); loadTasks(); } });
$('copy-token').addEventListener('click', async () => {
  try { await navigator.clipboard.writeText($('new-token-value').textContent); $('copy-token').textContent = 'Copied'; } catch { $('copy-token').textContent = 'Select and copy'; }
});
$('hide-token').addEventListener('click', () => { $('new-token-value').textContent = ''; $('new-token').hidden = true; $('copy-token').textContent = 'Copy token'; });
setInterval(() => { if (state.token && !document.hidden) refresh(); }, 10000);

if (state.token) start(); else signOut();
