// The coordinator's dashboard: jobs, a job's members, generations and failures,
// and a key-value browser. Plain JavaScript over the REST API (/v1/...); a job
// page follows the job's event stream (Server-Sent Events) to update live.
'use strict';

const main = document.getElementById('main');
const statusLine = document.getElementById('status');

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else el.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

// Replaces an element's children; arrays are flattened, null/false skipped.
function fill(el, ...children) {
  el.replaceChildren(...children.flat(2).filter((c) => c !== undefined && c !== null && c !== false));
}

// With authorization on (coordinator --admin-token-file) every API call needs
// a bearer token: asked for once, kept for this browser tab only.
let token = sessionStorage.getItem('ddp-token') || '';

function authHeaders() {
  return token ? { Authorization: `Bearer ${token}` } : {};
}

function askForToken(why) {
  const input = h('input', { name: 'token', type: 'password', placeholder: 'admin or job token', autocomplete: 'off' });
  const form = h('form', { class: 'token', onsubmit: (event) => {
    event.preventDefault();
    token = input.value.trim();
    sessionStorage.setItem('ddp-token', token);
    route();
  } }, h('p', {}, why), input, h('button', { type: 'submit' }, 'Use token'));
  fill(main, form);
}

class Unauthorized extends Error {}

// A call was refused for want of a (valid) token: stop the view, ask for one.
function needToken(error) {
  if (view) view.stop();
  view = null;
  connected(false, 'token needed');
  askForToken(token
    ? `The coordinator refused this token: ${error.message}`
    : 'This coordinator requires a token (authorization is on): paste the admin token, or a job\'s token to see that job.');
}

async function api(path, options) {
  const response = await fetch(path, { ...(options || {}), headers: { ...((options || {}).headers), ...authHeaders() } });
  const body = await response.json().catch(() => ({}));
  if (response.status === 401 || response.status === 403) {
    throw new Unauthorized(body.message || `${response.status} ${response.statusText}`);
  }
  if (!response.ok) throw new Error(body.message || `${response.status} ${response.statusText}`);
  return body;
}

// Server-Sent Events with the token: EventSource cannot send headers, so with
// a token the stream is read through fetch. Calls onEvent(data) for each
// message and onError(data) for the stream's own error event.
function openEvents(url, onEvent, onError) {
  if (!token) {
    const source = new EventSource(url);
    source.onmessage = (message) => onEvent(message.data);
    source.addEventListener('error', (e) => { if (e.data) onError(e.data); });
    return { close() { source.close(); } };
  }
  const controller = new AbortController();
  (async () => {
    const response = await fetch(url, { headers: authHeaders(), signal: controller.signal });
    if (!response.ok) { onError(JSON.stringify(await response.json().catch(() => ({ code: 16, message: `${response.status}` })))); return; }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffered = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffered += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const lines = block.split('\n');
        const data = lines.filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
        if (!data) continue;
        if (lines.includes('event: error')) onError(data); else onEvent(data);
      }
    }
  })().catch(() => {});
  return { close() { controller.abort(); } };
}

function connected(ok, why) {
  statusLine.textContent = ok ? `live · ${new Date().toLocaleTimeString()}` : `coordinator unreachable: ${why}`;
  statusLine.classList.toggle('down', !ok);
}

function duration(ms) {
  const s = Math.max(0, Number(ms) / 1000);
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

// A countdown: "9 m 58 s", "45 s", "1 h 02 m".
function countdown(ms) {
  const s = Math.max(0, Math.ceil(Number(ms) / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} m ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor(s / 60) % 60).padStart(2, '0')} m`;
}

const clock = (ms) => new Date(Number(ms)).toLocaleTimeString();
const badge = (text, kind) => h('span', { class: `badge ${kind}` }, text);
const FINISHED = ['SUCCEEDED', 'FAILED', 'CANCELLED'];
const isFinished = (job) => FINISHED.includes(job.state);

// A job that lost something and has not recovered yet: a generation ran and
// it now waits or restarts (a hang, a node loss, a worker failure).
const isDegraded = (job) => (job.state === 'WAITING' && Number(job.generation) > 0) ||
  job.state === 'RESTARTING';

function stateBadge(job) {
  const kind = isDegraded(job) ? 'state-degraded' : `state-${String(job.state).toLowerCase()}`;
  return badge(job.state, kind);
}

// A failure of the node itself (lost, silent, its session closed): it names a
// node but no worker (local rank -1), and its exit code means nothing.
const isNodeLoss = (f) => !!f.nodeId && Number(f.localRank ?? 0) < 0 && !f.hang;

// What a rank's speed was computed from (jobs.proto SpeedSource); for a
// script that reports nothing, its agent's CPU measure, shown even unscored.
function speedSource(p) {
  if (p.cpuBusy) return `CPU ${(100 * Number(p.cpuBusy)).toPrecision(3)} %`;
  return { SPEED_SOURCE_STEP_TIME: 'step time', SPEED_SOURCE_STEP_RATE: 'steps/s' }[p.speedSource] || '—';
}

function failureCause(f) {
  if (f.hang) return f.processStopped ? 'hang (process stopped)' : 'hang (no heartbeat)';
  if (isNodeLoss(f)) return 'node lost';
  if (f.signal) return `signal ${f.signal}`;
  if (f.nodeId) return `exit code ${f.exitCode ?? 0}`;
  return '';
}

// The worker's own last word: the exception line of its traceback, else the
// last line of its stderr tail (issue 25.1); '' when the agent sent neither.
function lastWords(f) {
  const text = (f.traceback || f.stderrTail || '').trimEnd();
  return text ? text.slice(text.lastIndexOf('\n') + 1) : '';
}

// Where the worker's whole stderr is: "node-a:/tmp/ddp_j/attempt_0/1/stderr.log".
const logsOf = (f) => (f.logPath ? `${f.nodeId}:${f.logPath}` : '');

// "node-a rank 1: exit code 7", "node-b: node lost", or the coordinator's reason.
function failureSummary(f) {
  if (!f) return '';
  if (!f.nodeId) return f.message || '';
  const who = isNodeLoss(f) ? f.nodeId : `${f.nodeId} rank ${f.globalRank}`;
  return `${who}: ${failureCause(f)}`;
}

// The cause of a job's last trouble: its root cause once it failed (or while
// it stops to fail), else the earliest failure of the newest generation that
// had one (a lost node before the knock-on failures it caused).
function lastFailure(job) {
  if (job.rootCause && (job.rootCause.nodeId || job.rootCause.message)) return job.rootCause;
  const failures = job.failures || [];
  if (!failures.length) return null;
  const newest = Math.max(...failures.map((f) => Number(f.generation)));
  return failures.find((f) => Number(f.generation) === newest);
}

// When the job's age stops: a finished job is as old as its run was long.
const ageOf = (job) => (Number(job.finishedUnixMs) || Date.now()) - Number(job.createdUnixMs);

// What a WAITING job waits for, and until when (the join timeout). The core
// does not report the deadline: the rendezvous opened when the job was
// created or when its last restart began (RESTARTING; it opens once the old
// generation's workers are stopped, so the countdown errs early by that much).
function waitingFor(job, events) {
  const s = job.settings || {};
  const registered = Number(job.registeredNodes) || 0;
  const need = Number(s.minNodes) - registered;
  let what = need > 0
    ? `waiting for ${need} more node${need === 1 ? '' : 's'} (${registered} of min ${s.minNodes} joined)`
    : `last call: ${registered} nodes joined, up to ${s.maxNodes} may join before the rendezvous closes`;
  const ran = events.filter((e) => e.type === 'GENERATION_OPENED').pop();
  const lost = events.filter((e) => e.type === 'NODE_LOST' && (!ran || Number(e.index) > Number(ran.index))).pop();
  if (lost) what += ` after losing node ${lost.nodeId}`;
  const opened = events.filter((e) => e.type === 'JOB_CREATED' || e.type === 'RESTARTING').pop();
  let deadline = null;
  if (need > 0 && opened) deadline = Number(opened.timeUnixMs) + Number(s.joinTimeoutMs);
  else if (need > 0 && Number(job.generation) === 0) deadline = Number(job.createdUnixMs) + Number(s.joinTimeoutMs);
  return { what, deadline };
}

function table(headers, rows, empty) {
  if (rows.length === 0) return h('div', { class: 'empty' }, empty);
  return h('table', {},
    h('thead', {}, h('tr', {}, headers.map(([text, cls]) => h('th', { class: cls }, text)))),
    h('tbody', {}, rows));
}

// ---- Jobs list ------------------------------------------------------------

function JobsView() {
  let timer = null;
  const root = h('div', {}, h('h1', {}, 'Jobs'), h('div', { id: 'jobs' }, 'Loading…'));
  main.replaceChildren(root);
  async function refresh() {
    try {
      const { jobs = [] } = await api('/v1/jobs');
      connected(true);
      jobs.sort((a, b) => Number(b.createdUnixMs) - Number(a.createdUnixMs));
      const rows = jobs.map((job) => {
        const s = job.settings || {};
        const others = job.registeredNodes - job.memberCount;
        const nodes = `${job.memberCount}` + (others > 0 ? ` + ${others} waiting or spare` : '');
        const failure = job.state === 'SUCCEEDED' || job.state === 'CANCELLED' ? null : lastFailure(job);
        const need = Number(s.minNodes) - Number(job.registeredNodes);
        const waits = job.state === 'WAITING' && need > 0 ? `waiting for ${need} more node${need === 1 ? '' : 's'}; ` : '';
        const problem = failure
          ? [waits, h('b', {}, failureSummary(failure)),
            failure.message && failure.nodeId && failure.message !== failureCause(failure) ? ` — ${failure.message}` : '']
          : [waits, job.message || ''];
        const rowClass = job.state === 'FAILED' ? 'row-failed' : isDegraded(job) ? 'row-degraded' : null;
        return h('tr', { 'data-job': job.jobId, class: rowClass },
          h('td', {}, h('a', { href: `#/jobs/${encodeURIComponent(job.jobId)}` }, job.jobId)),
          h('td', { 'data-field': 'state' }, stateBadge(job)),
          h('td', { class: 'num', 'data-field': 'nodes' }, nodes, h('span', { class: 'muted' }, ` (${s.minNodes}:${s.maxNodes})`)),
          h('td', { class: 'num', 'data-field': 'generation' }, job.generation),
          h('td', { class: 'num', 'data-field': 'restarts' }, `${job.restartCount} / ${s.maxRestarts}`),
          h('td', { class: 'num', 'data-field': 'age' }, duration(ageOf(job))),
          h('td', { class: 'problem', 'data-field': 'problem' }, problem));
      });
      document.getElementById('jobs').replaceChildren(table(
        [['Job'], ['State'], ['Nodes', 'num'], ['Generation', 'num'], ['Restarts', 'num'], ['Age', 'num'], ['Last failure / message']],
        rows, 'No jobs yet. Start one with ddp-client or POST /v1/jobs.'));
    } catch (e) {
      if (e instanceof Unauthorized) { needToken(e); return; }
      connected(false, e.message);
    }
  }
  refresh();
  timer = setInterval(refresh, 1000);
  return { stop() { clearInterval(timer); } };
}

// ---- One job ----------------------------------------------------------------

function JobView(jobId) {
  const events = [];
  let job = null;
  let source = null;
  let timer = null;
  let pending = null;
  let stopped = false;
  let rendered = false;
  let waitingDeadline = null;
  main.replaceChildren(h('div', {}, h('h1', {}, jobId), h('div', { id: 'job' }, 'Loading…')));

  function render() {
    if (!job) return;
    const first = !rendered;
    rendered = true;
    const s = job.settings || {};
    const finished = isFinished(job);
    const members = (job.members || []).slice().sort((a, b) => a.groupRank - b.groupRank);
    const memberRows = members.map((m) => {
      const first = Number(m.globalRankOffset);
      const age = Number(m.heartbeatAgeMs);
      return h('tr', { 'data-node': m.nodeId },
        h('td', { class: 'num' }, m.groupRank >= 0 ? m.groupRank : '—'),
        h('td', {}, m.nodeId),
        h('td', { class: 'num mono' }, first < 0 ? '—' : m.nproc > 1 ? `${first}–${first + m.nproc - 1}` : first),
        h('td', { class: 'num' }, m.nproc),
        h('td', { class: 'mono' }, m.address),
        h('td', { class: 'num ' + (!finished && age > Number(s.heartbeatTimeoutMs) / 2 ? 'stale' : '') }, age < 0 ? 'never' : duration(age)),
        h('td', {}, m.connected || finished ? (m.connected ? 'yes' : 'no') : h('span', { class: 'stale' }, 'no')));
    });
    // Per rank, what the workers reported (ddp_coordinator.report_progress),
    // or for a script that reports nothing its CPU busy share (cpuBusy).
    const progress = members.flatMap((m) => (m.progress || []).map((p) => ({ node: m.nodeId, ...p })))
      .sort((a, b) => Number(a.globalRank) - Number(b.globalRank));
    const progressRows = progress.map((p) => h('tr', { 'data-rank': p.globalRank, class: p.straggler ? 'row-degraded' : '' },
      h('td', { class: 'num' }, Number(p.globalRank) >= 0 ? p.globalRank : '—'),
      h('td', {}, `${p.node} / ${p.localRank || 0}`),
      h('td', { class: 'num' }, p.generation),
      h('td', { class: 'num', 'data-field': 'step' }, p.cpuBusy ? '—' : p.step || '0'),
      h('td', { class: 'num' }, p.stepsPerSecond ? Number(p.stepsPerSecond).toPrecision(3) : '—'),
      h('td', { class: 'num', 'data-field': 'speed' }, p.relativeSpeed ? Number(p.relativeSpeed).toFixed(2) : '—',
        p.straggler ? ' straggler' : ''),
      h('td', { 'data-field': 'speed-source' }, speedSource(p)),
      h('td', { class: 'num ' + (!finished && Number(p.ageMs) > Number(s.heartbeatTimeoutMs) ? 'stale' : '') },
        `${duration(Number(p.ageMs))} ago`),
      h('td', { class: 'mono' }, Object.keys(p.metrics || {}).sort()
        .map((k) => `${k}=${Number(p.metrics[k]).toPrecision(4)}`).join('  '))));
    const spareRows = (job.spares || []).map((m) => h('tr', {},
      h('td', {}, m.nodeId), h('td', { class: 'num' }, m.nproc), h('td', { class: 'mono' }, m.address),
      h('td', { class: 'num' }, duration(m.heartbeatAgeMs)), h('td', {}, m.connected ? 'yes' : 'no')));
    const failures = (job.failures || []).slice().reverse();
    const failureRows = failures.map((f) => h('tr', { 'data-failure': isNodeLoss(f) ? 'node-lost' : 'worker' },
      h('td', {}, clock(f.timeUnixMs)), h('td', { class: 'num' }, f.generation), h('td', {}, f.nodeId || '—'),
      h('td', { class: 'num' }, f.nodeId && !isNodeLoss(f) ? `${f.localRank} / ${f.globalRank}` : '—'),
      h('td', {}, failureCause(f)), h('td', { class: 'num' }, f.pid || ''),
      h('td', {}, f.message,
        lastWords(f) ? h('div', { class: 'mono', 'data-field': 'failure-error', title: logsOf(f) }, lastWords(f)) : null)));
    const root = job.rootCause && (job.rootCause.message || job.rootCause.nodeId) ? job.rootCause : null;
    const waiting = job.state === 'WAITING' ? waitingFor(job, events) : null;
    waitingDeadline = waiting ? waiting.deadline : null;
    const membersTitle = finished
      ? `Members of generation ${job.generation}, when the job finished (${members.length})`
      : `Members (${members.length})`;
    fill(document.getElementById('job'),
      h('div', { class: 'summary' },
        h('div', {}, h('span', {}, 'State'), h('b', { 'data-field': 'state' }, stateBadge(job))),
        h('div', {}, h('span', {}, 'Generation'), h('b', { 'data-field': 'generation' }, job.generation)),
        h('div', {}, h('span', {}, 'Restarts'), h('b', { 'data-field': 'restarts' }, `${job.restartCount} / ${s.maxRestarts}`)),
        h('div', {}, h('span', {}, 'Nodes'), h('b', {}, `${members.length} (${s.minNodes}:${s.maxNodes})`)),
        h('div', {}, h('span', {}, 'Workers per node'), h('b', {}, s.nprocPerNode)),
        h('div', {}, h('span', {}, finished ? 'Ran for' : 'Age'), h('b', { 'data-field': 'age' }, duration(ageOf(job))))),
      waiting ? h('p', { class: isDegraded(job) ? 'waiting degraded' : 'waiting', 'data-field': 'waiting' },
        waiting.what, h('span', { 'data-field': 'countdown' }, countdownText())) : null,
      job.message ? h('p', { class: 'message' }, job.message) : null,
      root ? h('div', { class: 'rootcause', 'data-field': 'root-cause' },
        h('h2', {}, 'Root cause'),
        h('div', {}, root.nodeId && isNodeLoss(root) ? `Node ${root.nodeId}, generation ${root.generation}: ` : '',
          root.nodeId && !isNodeLoss(root) ? `Node ${root.nodeId}, local rank ${root.localRank}, rank ${root.globalRank}, generation ${root.generation}: ` : '',
          h('b', {}, failureCause(root)), root.timeUnixMs && root.timeUnixMs !== '0' ? ` at ${clock(root.timeUnixMs)}` : ''),
        root.message && root.message !== failureCause(root) ? h('p', { class: 'message' }, root.message) : null,
        root.traceback ? h('pre', { class: 'mono', 'data-field': 'root-traceback' }, root.traceback) : null,
        root.stderrTail ? h('details', { 'data-field': 'root-stderr' }, h('summary', {}, 'Last lines of stderr'),
          h('pre', { class: 'mono' }, root.stderrTail)) : null,
        root.logPath ? h('p', { 'data-field': 'root-logs' }, 'Whole stderr: ', h('span', { class: 'mono' }, logsOf(root))) : null) : null,
      h('h2', {}, 'Generations'), generations(),
      h('h2', {}, membersTitle),
      table([['Group rank', 'num'], ['Node'], ['Global ranks', 'num'], ['Workers', 'num'], ['Address'], ['Heartbeat age', 'num'], ['Connected']],
        memberRows, finished ? 'No node was registered when the job finished.' : 'No members: the rendezvous is open.'),
      progressRows.length ? [h('h2', {}, 'Progress (as the workers reported it, or their CPU as the agent saw it)'),
        table([['Rank', 'num'], ['Node / local rank'], ['Generation', 'num'], ['Step', 'num'], ['Steps/s', 'num'],
          ['Speed vs median', 'num'], ['From'], ['Reported', 'num'], ['Metrics']], progressRows, '')] : null,
      // While the rendezvous is open, registered nodes are the next
      // generation's candidates, not spares.
      spareRows.length ? [h('h2', {}, job.state === 'WAITING'
        ? `Joined for the next generation (${spareRows.length})` : `Spares (${spareRows.length})`),
        table([['Node'], ['Workers', 'num'], ['Address'], ['Heartbeat age', 'num'], ['Connected']], spareRows, '')] : null,
      h('h2', {}, `Failures (${failures.length})`),
      table([['Time'], ['Generation', 'num'], ['Node'], ['Local / global rank', 'num'], ['Cause'], ['PID', 'num'], ['Message']],
        failureRows, 'No failures.'),
      (job.excludedNodes || []).length ? h('p', { class: 'message' }, `Excluded: ${job.excludedNodes.join(', ')}`) : null,
      h('h2', {}, 'Events'),
      table([['#', 'num'], ['Time'], ['Event'], ['Generation', 'num'], ['Node'], ['Message']],
        events.slice().reverse().slice(0, 200).map((e) => h('tr', {},
          h('td', { class: 'num' }, e.index), h('td', {}, clock(e.timeUnixMs)),
          h('td', {}, badge(e.type, `ev-${String(e.type).toLowerCase()}`)),
          h('td', { class: 'num' }, e.generation), h('td', {}, e.nodeId || ''), h('td', {}, e.message))),
        'No events kept yet.'));
    // For tools/cdp/bench_dashboard.py: time to first render after navigation.
    if (first) performance.mark('ddp:job-rendered');
  }

  function countdownText() {
    if (waitingDeadline === null) return '';
    const left = waitingDeadline - Date.now();
    return left > 0 ? `; join timeout in ${countdown(left)}` : '; join timeout due';
  }

  // Ticks the WAITING countdown between refreshes.
  function tick() {
    const el = document.querySelector('[data-field=countdown]');
    if (el) el.textContent = countdownText();
  }

  // Where the job's time went, as the coordinator counts it (Job.time:
  // coordinator/rendezvous/job_time.h, the one account, refreshed with the
  // job): the bar and, per generation, the downtime before it (detection and
  // rendezvous), how long it ran, and the work lost since its checkpoint.
  function generations() {
    const time = job.time || {};
    const entries = time.generations || [];
    const ms = (v) => Number(v || 0);
    const downtime = (g) => ms(g.detectionMs) + ms(g.rendezvousMs);
    const blocks = [];
    for (const g of entries) {
      const gen = Number(g.generation || 0);
      if (downtime(g) > 0) {
        blocks.push({ run: false, ms: downtime(g), label: 'rdzv',
          title: `detection ${duration(ms(g.detectionMs))}, rendezvous ${duration(ms(g.rendezvousMs))}` });
      }
      if (gen === 0) continue;
      blocks.push({ run: true, ms: ms(g.trainingMs) - ms(g.workLostMs), label: `gen ${gen}`,
        title: `gen ${gen}: ran ${duration(ms(g.trainingMs))} from ${clock(g.startedUnixMs)}` });
      if (ms(g.workLostMs) > 0) {
        blocks.push({ run: false, ms: ms(g.workLostMs), label: 'redo',
          title: `gen ${gen}: work lost since its last checkpoint, ${duration(ms(g.workLostMs))}` });
      }
    }
    const total = Math.max(1, blocks.reduce((sum, b) => sum + b.ms, 0));
    const bar = h('div', { class: 'timeline', 'data-field': 'timeline' }, blocks.map((b) => h('div', {
      class: b.run ? 'run' : 'lost', style: `flex: ${Math.max(0.01, b.ms / total)}`, title: b.title,
    }, h('span', {}, b.label))));
    const rows = entries.map((g) => {
      const gen = Number(g.generation || 0);
      const lost = h('td', { class: 'num', 'data-field': 'lost',
        title: `detection ${duration(ms(g.detectionMs))}, rendezvous ${duration(ms(g.rendezvousMs))}` },
        duration(downtime(g)));
      if (gen === 0) {  // the downtime after the last generation: so far, or until the job ended
        const ended = ms(g.endedUnixMs) > 0;
        return h('tr', { 'data-generation': 'next' },
          h('td', {}, ended ? 'none (the job ended)' : `next (${job.state.toLowerCase()})`), h('td', {}, '—'),
          lost, h('td', { class: 'num' }, '—'), h('td', { class: 'num' }, '—'), h('td', {}, '—'),
          h('td', {}, ended ? job.state.toLowerCase() : 'so far'));
      }
      const checkpoint = ms(g.lastCheckpointUnixMs) > 0
        ? `step ${g.lastCheckpointStep || 0} at ${clock(g.lastCheckpointUnixMs)}` : '—';
      return h('tr', { 'data-generation': gen },
        h('td', { class: 'num' }, gen), h('td', {}, clock(g.startedUnixMs)), lost,
        h('td', { class: 'num', 'data-field': 'ran' }, duration(ms(g.trainingMs))),
        h('td', { class: 'num', 'data-field': 'work-lost' }, duration(ms(g.workLostMs))),
        h('td', { 'data-field': 'checkpoint' }, checkpoint),
        h('td', {}, g.endedBy ? String(g.endedBy).replace(/_/g, ' ') : 'running'));
    });
    const lostTotal = ms(time.rendezvousMs) + ms(time.detectionMs) + ms(time.workLostMs);
    const omitted = Number(time.generationsOmitted || 0);
    return [bar, h('p', { class: 'muted', 'data-field': 'lost-total' },
      `Lost: ${duration(lostTotal)} of ${duration(lostTotal + ms(time.trainingMs))} ` +
      `(rendezvous ${duration(ms(time.rendezvousMs))}, detection ${duration(ms(time.detectionMs))}, ` +
      `work since checkpoint ${duration(ms(time.workLostMs))})` +
      (omitted ? `; ${omitted} older generations not listed` : '')),
    table([['Generation', 'num'], ['Started'], ['Lost before it', 'num'], ['Ran for', 'num'],
      ['Work lost since checkpoint', 'num'], ['Last checkpoint'], ['Ended by']],
      rows, 'No generation has run yet.')];
  }

  async function refresh() {
    try {
      job = await api(`/v1/jobs/${encodeURIComponent(jobId)}`);
      connected(true);
      render();
      if (!source && !stopped) follow();
    } catch (e) {
      if (e instanceof Unauthorized) { needToken(e); return; }
      connected(false, e.message);
      document.getElementById('job').replaceChildren(h('p', { class: 'error' }, e.message));
    }
  }

  function follow() {
    const from = Number(job.firstEventIndex) || Number(job.lastEventIndex) + 1;
    source = openEvents(`/v1/jobs/${encodeURIComponent(jobId)}:watch?from_index=${from}`, (data) => {
      const event = JSON.parse(data);
      if (events.length && Number(event.index) <= Number(events[events.length - 1].index)) return;
      events.push(event);
      clearTimeout(pending);
      pending = setTimeout(refresh, 50);
    }, (data) => {  // the stream's own error event: {code, message}
      const error = JSON.parse(data);
      source.close();
      source = null;
      if (error.code !== 14) connected(false, error.message);  // 14: shutting down, retry
    });
  }

  refresh();
  timer = setInterval(refresh, 2000);
  const ticker = setInterval(tick, 1000);
  return { stop() { stopped = true; clearInterval(timer); clearInterval(ticker); clearTimeout(pending); if (source) source.close(); } };
}

// ---- Key-value browser ------------------------------------------------------

function decode(b64) {
  const bytes = Uint8Array.from(atob(b64 || ''), (c) => c.charCodeAt(0));
  const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  return /[\u0000-\u0008\u000e-\u001f\ufffd]/.test(text) ? `(${bytes.length} bytes, binary)` : text;
}

function KvView() {
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const ns = h('input', { name: 'namespace', placeholder: 'namespace (usually the job id)', value: params.get('namespace') || '' });
  const prefix = h('input', { name: 'prefix', placeholder: 'key prefix', value: params.get('prefix') || '' });
  const out = h('div', {});
  async function load(event) {
    if (event) event.preventDefault();
    if (!ns.value) return;
    location.hash = `#/kv?namespace=${encodeURIComponent(ns.value)}&prefix=${encodeURIComponent(prefix.value)}`;
  }
  async function show() {
    if (!ns.value) { await showNamespaces(); return; }
    try {
      const q = new URLSearchParams({ prefix: prefix.value, limit: '500' });
      const r = await api(`/v1/kv/${encodeURIComponent(ns.value)}?${q}`);
      connected(true);
      const rows = (r.kvs || []).map((kv) => h('tr', {},
        h('td', { class: 'mono' }, decode(kv.key)), h('td', { class: 'mono' }, decode(kv.value).slice(0, 300)),
        h('td', { class: 'num' }, kv.modRevision), h('td', { class: 'num' }, kv.version),
        h('td', { class: 'num' }, kv.lease !== '0' ? kv.lease : '')));
      out.replaceChildren(
        h('p', { class: 'muted' }, `${rows.length} keys at revision ${r.revision}${r.more ? ' (more not shown)' : ''}`),
        table([['Key'], ['Value'], ['Modified at', 'num'], ['Version', 'num'], ['Lease', 'num']], rows, 'No keys.'));
    } catch (e) {
      if (e instanceof Unauthorized) { needToken(e); return; }
      out.replaceChildren(h('p', { class: 'error' }, e.message));
    }
  }
  // No namespace picked: the namespaces that hold keys, each a link.
  async function showNamespaces() {
    try {
      const r = await api('/v1/kv:namespaces');
      connected(true);
      const rows = (r.namespaces || []).map((n) => h('tr', { 'data-namespace': n.namespace },
        h('td', { class: 'mono' }, h('a', { href: `#/kv?namespace=${encodeURIComponent(n.namespace)}&prefix=` }, n.namespace)),
        h('td', { class: 'num' }, n.keys)));
      out.replaceChildren(
        h('p', { class: 'muted' }, `${rows.length} namespace${rows.length === 1 ? '' : 's'} at revision ${r.revision}`),
        table([['Namespace'], ['Keys', 'num']], rows, 'No keys in any namespace.'));
    } catch (e) {
      if (e instanceof Unauthorized) { needToken(e); return; }
      out.replaceChildren(h('p', { class: 'error' }, e.message));
    }
  }
  main.replaceChildren(h('div', {}, h('h1', {}, 'Key-value store'),
    h('form', { class: 'kv', onsubmit: load }, ns, prefix, h('button', { type: 'submit' }, 'Show')), out));
  show();
  return { stop() {} };
}

// ---- The fleet: nodes across jobs (GET /v1/nodes) ------------------------------

const NODE_STATE = { NODE_READY: 'ready', NODE_CORDONED: 'cordoned', NODE_QUARANTINED: 'quarantined' };
const INCIDENT_KIND = {
  NODE_INCIDENT_WORKER_FAILED: 'worker failed', NODE_INCIDENT_HANG: 'hang',
  NODE_INCIDENT_LEASE_LOST: 'lease lost', NODE_INCIDENT_CHECK_FAILED: 'check failed',
};

// "after 3 counted incidents within 1.0 h (set through the API at 10:42:07)".
function quarantinePolicyText(p) {
  const after = Number(p.after || 0);
  const rule = after === 0 ? 'never (after 0)'
    : `after ${after} counted incident${after === 1 ? '' : 's'} within ${duration(p.windowMs || 0)}`;
  const from = Number(p.setUnixMs || 0) > 0 ? `set through the API at ${clock(p.setUnixMs)}`
    : "the coordinator's --quarantine-after/--quarantine-window";
  return `Quarantine: ${rule} (${from})`;
}

function NodesView() {
  let timer = null;
  const list = h('div', { id: 'nodes' }, 'Loading…');
  const policy = h('p', { id: 'quarantine-policy', class: 'muted' });
  main.replaceChildren(h('div', {}, h('h1', {}, 'Nodes'), policy, list));
  async function refresh() {
    try {
      const [{ nodes = [] }, quarantine, { jobs = [] }] = await Promise.all(
        [api('/v1/nodes'), api('/v1/nodes:quarantinePolicy'), api('/v1/jobs')]);
      connected(true);
      policy.textContent = quarantinePolicyText(quarantine);
      // Drains live in the jobs (DrainNode, preemption): the earliest leave-at
      // per node, from each unfinished job's members (the list has none).
      const open = await Promise.all(jobs.filter((j) => !isFinished(j)).map(
        (j) => api(`/v1/jobs/${encodeURIComponent(j.jobId)}`).catch(() => null)));
      const draining = new Map();
      for (const job of open) {
        if (!job) continue;  // gone meanwhile, or not this token's
        for (const m of [...(job.members || []), ...(job.spares || [])]) {
          const at = Number(m.leavesAtUnixMs || 0);
          if (at > 0 && (!draining.has(m.nodeId) || at < draining.get(m.nodeId).at)) {
            draining.set(m.nodeId, { at, job: job.jobId, reason: m.drainReason || '' });
          }
        }
      }
      const rows = [];
      for (const n of nodes) {
        const drain = draining.get(n.nodeId);
        const state = drain && n.state === 'NODE_READY' ? 'draining' : (NODE_STATE[n.state] || 'unknown');
        const failing = (n.checks || []).filter((c) => !c.passed);
        const last = (n.incidents || []).slice(-1)[0];
        rows.push(h('tr', { 'data-node': n.nodeId, class: state === 'ready' || state === 'draining' ? null : 'row-failed' },
          h('td', { class: 'mono' }, n.nodeId),
          h('td', { 'data-field': 'state' }, badge(state, `node-${state}`)),
          h('td', { class: 'num', 'data-field': 'incidents' }, n.incidentCount || '0'),
          h('td', { 'data-field': 'checks' }, failing.length
            ? failing.map((c) => h('div', {}, h('b', {}, `${c.name}: `), (c.output || '').slice(-300)))
            : `${(n.checks || []).length} passed`),
          h('td', { class: 'problem', 'data-field': 'why' },
            drain ? h('div', {}, 'leaves in ', h('span', { 'data-field': 'leaves-in' }, countdown(drain.at - Date.now())),
              ` at the latest (job ${drain.job})${drain.reason ? `: ${drain.reason}` : ''}`) : '',
            n.stateReason ||
            (last ? `${clock(last.timeUnixMs)} ${INCIDENT_KIND[last.kind] || ''} ${last.jobId ? `job ${last.jobId}` : ''}: ${last.cause}` : '')),
          h('td', { 'data-field': 'last-job' }, n.lastJobId ? h('a', { href: `#/jobs/${encodeURIComponent(n.lastJobId)}` }, n.lastJobId) : '')));
      }
      list.replaceChildren(table(
        [['Node'], ['State'], ['Incidents', 'num'], ['Failing checks'], ['Why / last incident'], ['Last job']],
        rows, 'No node has registered yet.'));
    } catch (e) {
      if (e instanceof Unauthorized) { needToken(e); return; }
      connected(false, e.message);
    }
  }
  refresh();
  timer = setInterval(refresh, 2000);
  return { stop() { clearInterval(timer); } };
}

// ---- Routing ----------------------------------------------------------------

let view = null;
function route() {
  if (view) view.stop();
  const hash = location.hash || '#/jobs';
  const job = hash.match(/^#\/jobs\/([^?]+)$/);
  if (job) view = JobView(decodeURIComponent(job[1]));
  else if (hash.startsWith('#/kv')) view = KvView();
  else if (hash.startsWith('#/nodes')) view = NodesView();
  else view = JobsView();
}
window.addEventListener('hashchange', route);
route();
