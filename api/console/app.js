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
const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  view: 'tasks',
  taskId: null,
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
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
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
  if (e instanceof APIError) node.textContent = `${e.code}: ${e.message}`;
  else node.textContent = `Network error (${e.message}); retrying sends the same request again.`;
}

// ---------- dialog ----------

// ask opens the dialog with fields; submit(values) runs on Confirm and may
// throw to keep the dialog open with the error shown.
function ask({ title, fields = [], danger = false, submit }) {
  const dlg = $('dialog');
  $('dialog-title').textContent = title;
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
  for (const id of ['nav', 'signout', 'live', 'view-tasks', 'view-task', 'view-devices']) $(id).hidden = true;
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
  show(state.view === 'devices' ? 'devices' : 'tasks');
  openStream();
}

// ---------- views ----------

function show(view, taskId) {
  if (view === 'task' && taskId !== state.taskId) { // never show another task's detail while this one loads
    $('task-title').textContent = `Task ${short(taskId)}`;
    $('task-title').title = taskId;
    for (const id of ['task-body', 'task-actions', 'history']) $(id).replaceChildren();
  }
  state.view = view;
  state.taskId = taskId || null;
  $('view-tasks').hidden = view !== 'tasks';
  $('view-task').hidden = view !== 'task';
  $('view-devices').hidden = view !== 'devices';
  $('tab-tasks').setAttribute('aria-selected', String(view !== 'devices'));
  $('tab-devices').setAttribute('aria-selected', String(view === 'devices'));
  refresh();
}

function refresh() {
  if (!state.token) return;
  if (state.view === 'tasks') loadTasks();
  else if (state.view === 'task') loadTask(state.taskId);
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

function kv(pairs) {
  const dl = el('dl', { class: 'kv' });
  for (const [k, v] of pairs) dl.append(el('dt', { text: k }), el('dd', {}, v instanceof Node ? v : (v === null || v === undefined || v === '' ? '—' : String(v))));
  return dl;
}

const card = (title, ...content) => el('div', { class: 'card' }, el('h2', { text: title }), ...content);
const json = (v) => el('pre', { class: 'json', text: JSON.stringify(v, null, 2) });
const when = (s) => (s ? `${s} (${ago(s)})` : '—');

async function loadTask(id) {
  showError('task-error', null);
  try {
    if (state.devices.size === 0) await loadDeviceNames();
    else loadDeviceNames().catch(() => {});
    const [t, hist] = await Promise.all([api('GET', `${API}/tasks/${id}`), api('GET', `${API}/tasks/${id}/events`)]);
    renderTask(t, hist.events);
    api('GET', `${API}/tasks/${id}/provenance`).then((p) => { if ($('task-title').title === id) renderProvenance(p.fields); }).catch(() => {});
  } catch (e) {
    showError('task-error', e);
  }
}

function renderTask(t, events) {
  $('task-title').textContent = `Task ${short(t.id)}`;
  $('task-title').title = t.id;
  const body = $('task-body');
  body.replaceChildren();
  body.append(card('Summary', kv([
    ['id', el('code', { text: t.id })], ['state', stateCell(t)], ['version', t.version], ['revision', t.revision],
    ['created', when(t.created_at)], ['changed', when(t.updated_at)],
    ['cancel requested', t.cancel_requested ? 'yes' : 'no'],
  ])));
  body.append(card('Payload', json(t.payload)));
  const a = t.authorization;
  body.append(card('Authorization', a ? kv([['id', short(a.id)], ['status', a.status], ['revision', a.revision],
    ['expires', `${a.expires_at} (${remaining(a.expires_at)})`], ['takeover', a.takeover || 'reclaim']]) : el('p', { class: 'muted', text: 'Not authorized.' })));
  const c = t.claim;
  body.append(card('Claim', c ? kv([['device', deviceName(c.device_id)], ['device id', short(c.device_id)], ['generation', c.generation],
    ['session', short(c.session_id)], ['lease expires', `${c.lease_expires_at} (${remaining(c.lease_expires_at)})`], ['token', c.token_origin + '-issued']]) : el('p', { class: 'muted', text: 'No open claim.' })));
  const x = t.execution;
  body.append(card('Execution', x ? kv([['id', short(x.id)], ['step', x.step], ['started', when(x.started_at)],
    ['lease expires', `${x.lease_expires_at} (${remaining(x.lease_expires_at)})`], ['last seen', when(x.last_seen_at)],
    ['cancel requested', t.cancel_requested ? 'yes' : 'no']]) : el('p', { class: 'muted', text: 'Not started.' })));
  if (t.result !== null || t.failure || t.recovery || (t.late_reports && t.late_reports.length)) {
    const parts = [];
    if (t.result !== null) parts.push(el('h3', { text: 'Result' }), json(t.result));
    if (t.failure) parts.push(kv([['failure', t.failure.reason_code], ['detail', t.failure.detail]]));
    if (t.recovery) parts.push(kv([['recovery', t.recovery.decision], ['reason', t.recovery.reason], ['at', t.recovery.at]]));
    for (const l of t.late_reports || []) parts.push(kv([['late report', `${l.outcome} at ${l.at}`], ['device', deviceName(l.device_id)], ['generation', l.claim_generation]]));
    body.append(card('Outcome', ...parts));
  }
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
}

// renderProvenance adds, for every field of the detail, the event that
// last set it (GET /admin/tasks/{id}/provenance).
function renderProvenance(fields) {
  const rows = el('dl', { class: 'kv' });
  for (const k of Object.keys(fields).sort()) {
    const p = fields[k];
    const actor = p.actor ? `${p.actor.kind}${p.actor.id ? ' ' + (p.actor.kind === 'device' ? deviceName(p.actor.id) : short(p.actor.id)) : ''}` : '';
    const gen = p.generation === null || p.generation === undefined ? '' : ` · gen ${p.generation}`;
    rows.append(el('dt', { text: k }), el('dd', { title: p.at, text: `#${p.seq} ${p.type} · ${actor}${gen}` }));
  }
  $('task-body').append(card('Provenance', rows));
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

function renderHistory(events) {
  const list = $('history');
  list.replaceChildren();
  for (const e of events) {
    const actor = e.actor ? `${e.actor.kind}${e.actor.id ? ' ' + (e.actor.kind === 'device' ? deviceName(e.actor.id) : e.actor.id) : ''}` : '';
    const b = e.body || {};
    const gen = b.claim_generation !== undefined ? `gen ${b.claim_generation}` : '';
    const fields = [];
    for (const [k, v] of Object.entries(b)) {
      if (k === 'task_id' || k === 'claim_generation' || v === null || v === '' || (Array.isArray(v) && v.length === 0)) continue;
      let s;
      if (typeof v === 'object') s = JSON.stringify(v);
      else if (typeof v === 'string' && /^[0-9a-f]{8}-[0-9a-f]{4}-/.test(v)) s = k === 'device_id' ? deviceName(v) : short(v);
      else s = String(v);
      if (s.length > 120) s = s.slice(0, 117) + '…';
      fields.push(`${k.replace(/_/g, ' ')}: ${s}`);
    }
    list.append(el('li', {},
      el('div', { class: 'head' }, el('span', { class: 'muted', text: `#${e.seq}` }), el('span', { title: e.at, text: `${e.at} · ${ago(e.at)}` }),
        el('span', { class: 'type', text: e.type }), el('span', { text: actor }), gen ? el('span', { text: gen }) : null),
      fields.length ? el('div', { class: 'fields', text: fields.join(' · ') }) : null));
  }
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
    box.append(el('button', { type: 'button', class: 'primary', onclick: () => ask({
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
    }) }, 'Authorize'));
    const amend = new Submission();
    box.append(el('button', { type: 'button', onclick: () => ask({
      title: 'Amend payload',
      fields: [{ name: 'payload', label: 'Payload (JSON object)', type: 'textarea', value: JSON.stringify(t.payload, null, 2) },
        { type: 'note', text: 'Amending invalidates the authorization: authorize again afterwards.' }],
      submit: async (v) => { await amend.send('POST', `${path}/amend`, { body: { expected_revision: t.revision, payload: parseJSON(v.payload) } }); done(); },
    }) }, 'Amend'));
  }
  if (!terminal && t.authorization && t.authorization.status === 'ACTIVE') {
    const sub = new Submission();
    box.append(el('button', { type: 'button', onclick: () => ask({
      title: 'Revoke the authorization?', danger: true,
      fields: [{ name: 'reason', label: 'Reason', value: 'revoked from the console', required: true }],
      submit: async (v) => { await sub.send('POST', `${path}/authorization/revoke`, { body: { reason: v.reason } }); done(); },
    }) }, 'Revoke authorization'));
  }
  if (t.state === 'PENDING' || t.state === 'CLAIMED') {
    const sub = new Submission();
    box.append(el('button', { type: 'button', class: 'danger', onclick: () => ask({
      title: 'Cancel this task? This cannot be undone.', danger: true,
      fields: [{ name: 'reason', label: 'Reason', value: 'canceled from the console', required: true }],
      submit: async (v) => { await sub.send('POST', `${path}/cancel`, { body: { reason: v.reason, expected_version: t.version } }); done(); },
    }) }, 'Cancel task'));
  }
  if ((t.state === 'RUNNING' || t.state === 'WAITING_CONFIRMATION') && !t.cancel_requested) {
    const sub = new Submission();
    box.append(el('button', { type: 'button', class: 'danger', onclick: () => ask({
      title: 'Request a safe stop?', danger: true,
      fields: [{ type: 'note', text: 'The device is asked to stop at a safe point; the task is CANCELED once it acknowledges.' },
        { name: 'reason', label: 'Reason', value: 'stop requested from the console', required: true }],
      submit: async (v) => { await sub.send('POST', `${path}/cancel`, { body: { reason: v.reason } }); done(); },
    }) }, 'Request safe stop'));
  }
  const holder = t.claim ? state.devices.get(t.claim.device_id) : null;
  const recoverable = open && (leaseExpired(t) || t.needs_operator || (holder && holder.status === 'REVOKED'));
  if (recoverable) {
    const sub = new Submission();
    box.append(el('button', { type: 'button', onclick: () => ask({
      title: 'Recover this task?', danger: true,
      fields: [{ name: 'decision', label: 'Decision', type: 'select', value: 'fail', options: [
        { value: 'fail', label: 'fail: the task ends FAILED' },
        { value: 'requeue', label: 'requeue: back to PENDING (needs a new authorization)' }] },
      { name: 'reason', label: 'Reason', value: 'recovered from the console', required: true }],
      submit: async (v) => { await sub.send('POST', `${path}/recover`, { body: { decision: v.decision, reason: v.reason, expected_version: t.version } }); done(); },
    }) }, 'Recover'));
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
      el('td', { 'data-label': 'Name' }, el('strong', { text: d.name }), el('br'), el('code', { class: 'muted', title: d.device_id, text: short(d.device_id) })),
      el('td', { 'data-label': 'Status' }, d.status),
      el('td', { 'data-label': 'Presence' }, presence),
      el('td', { 'data-label': 'Checks' }, checks),
      el('td', { 'data-label': 'Open task' }, d.open_task_id ? el('button', { type: 'button', class: 'link', 'aria-label': `Task ${d.open_task_id}`, onclick: () => show('task', d.open_task_id) }, short(d.open_task_id)) : '—'),
      el('td', { 'data-label': 'Last seen' }, p ? ago(p.last_seen_at) : '—'),
      el('td', { 'data-label': 'Actions' }, d.status === 'ACTIVE' && canWrite() ? el('button', { type: 'button', class: 'danger', 'aria-label': 'Revoke device', title: `Revoke ${d.name}`, onclick: () => ask({
        title: `Revoke device ${d.name}? It can never authenticate again.`, danger: true,
        fields: [{ name: 'reason', label: 'Reason', value: 'revoked from the console', required: true }],
        submit: async (v) => { await revoke.send('POST', `${API}/devices/${d.device_id}/revoke`, { body: { reason: v.reason } }); loadDevices(); },
      }) }, 'Revoke device') : null)));
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
$('tab-tasks').addEventListener('click', () => show('tasks'));
$('tab-devices').addEventListener('click', () => show('devices'));
$('back').addEventListener('click', () => show('tasks'));
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
