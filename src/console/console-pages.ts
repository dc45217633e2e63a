// The console's pages as server-rendered HTML: no build chain, no script, one small stylesheet. Every
// value from the database goes through `esc`. Every action is a link to a confirmation page whose form
// does the write, so nothing is changed by one click, and all of it works without JavaScript.
import type { OutboxBacklog, QueueDepth } from '../observe/backlog.ts';
import type { DeadLetter, DlqRedriveReport } from '../work/operate/dead-letter-queue.ts';
import type { BulkRedriveOutcome } from '../work/operate/redrive-run.ts';
import type { RunSummary, StuckRunSummary } from '../work/operate/list-runs.ts';
import { RUN_STATUSES } from '../work/operate/list-runs.ts';
import type { RunDetail } from '../work/operate/show-run.ts';
import { QUEUE_NAMES, type QueueName } from '../queue/names.ts';

export function esc(value: unknown): string {
  return String(value ?? '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;gap:20px;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600}header form{margin-left:auto}
main{padding:16px 20px;max-width:1300px}
table{border-collapse:collapse;width:100%;background:#fff}th,td{padding:5px 8px;border-bottom:1px solid #e3e6eb;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.status{padding:1px 6px;border-radius:8px;font-size:12px;font-weight:600}
.succeeded{background:#d7f5df;color:#11652b}.failed{background:#fde0e0;color:#8e1b1b}.running{background:#dfe9ff;color:#1c3f94}
.retrying{background:#fff1cc;color:#7a5400}.queued{background:#ececec;color:#444}.skipped{background:#ececec;color:#666}
form.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:end;margin:0 0 12px}form.filters label{display:flex;flex-direction:column;font-size:12px}
input,select,button{font:inherit;padding:3px 6px}button{cursor:pointer}
.panel{background:#fff;border:1px solid #e3e6eb;padding:12px;margin:0 0 16px}.error{border-color:#e0a0a0;background:#fff5f5}
ol.timeline{list-style:none;margin:0;padding:0 0 0 14px;border-left:3px solid #c9ced8}
ol.timeline li{margin:0 0 10px;padding-left:10px;position:relative}
ol.timeline li:before{content:'';position:absolute;left:-21px;top:4px;width:11px;height:11px;border-radius:50%;background:#8a93a6}
ol.timeline li.ev-failed:before,ol.timeline li.ev-dead_lettered:before{background:#c0392b}ol.timeline li.ev-succeeded:before{background:#27ae60}
code,pre{font:12px ui-monospace,monospace}pre{margin:2px 0;white-space:pre-wrap;word-break:break-all}
.muted{color:#6b7385}.actions{display:flex;gap:8px;align-items:center}h1{font-size:20px;margin:0 0 12px}h2{font-size:16px;margin:0 0 8px}
a.button,button.primary{display:inline-block;padding:3px 10px;border:1px solid #1c3f94;border-radius:3px;background:#fff;color:#1c3f94;text-decoration:none}
button.danger,a.button.danger{border-color:#8e1b1b;color:#8e1b1b}header .who{margin-left:auto}header .who+form{margin-left:0}
nav.bar{display:flex;gap:14px;align-items:center;margin:0 0 10px;flex-wrap:wrap}nav.bar .current{font-weight:700}
a.redriven{font-size:12px;white-space:nowrap}td.num a{color:inherit}textarea{font:inherit;width:100%;max-width:600px}
`;

/** Who is looking: the operator's name when logged in (null on a read-only console or the login page). */
export interface Viewer {
  operator: string | null;
}

export function page(title: string, body: string, viewer: Viewer = { operator: null }, options: { refreshSeconds?: number } = {}): string {
  const refresh = options.refreshSeconds ? `<meta http-equiv="refresh" content="${options.refreshSeconds}">` : '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)} · svc console</title>
<meta name="viewport" content="width=device-width,initial-scale=1">${refresh}<style>${STYLE}</style></head>
<body><header><a href="/">svc console</a><span class="muted">runs across every tenant</span>${
    viewer.operator !== null
      ? `<span class="who">logged in as <strong id="operator">${esc(viewer.operator)}</strong></span><form method="post" action="/logout"><button type="submit" id="logout">Log out</button></form>`
      : ''
  }</header><main>${body}</main></body></html>`;
}

export function loginPage(message?: { code: string; text: string }, name = ''): string {
  return page(
    'Log in',
    `<h1>Log in</h1>${message ? `<div class="panel error" role="alert"><strong>${esc(message.code)}</strong>: ${esc(message.text)}</div>` : ''}
<form method="post" action="/login" class="panel"><p><label>Your name (recorded on every redrive and cancel)<br>
<input name="name" value="${esc(name)}" autocomplete="username" size="40" maxlength="64" required></label></p>
<p><label>Console token (SVC_CONSOLE_TOKEN)<br>
<input type="password" name="token" autocomplete="current-password" size="70" required></label></p>
<button type="submit">Log in</button></form>`,
  );
}

export function errorPage(status: number, code: string, message: string, viewer: Viewer): string {
  return page(
    `Error ${status}`,
    `<h1>${status === 404 ? 'Not found' : 'Request refused'}</h1><div class="panel error" role="alert"><strong>${esc(code)}</strong>: ${esc(message)}</div><p><a href="/">Back to the runs</a></p>`,
    viewer,
  );
}

export type ListFilters = Record<'tenant' | 'unit' | 'status' | 'queue' | 'since' | 'until', string>;

/** Run counts per queue and status. */
export type StatusCounts = Map<string, Map<string, number>>;

export interface RunsView {
  filters: ListFilters;
  runs: RunSummary[];
  /** Index of the first run shown among all that match (offset paging). */
  offset: number;
  pageSize: number;
  /** True when older runs follow this page. */
  hasMore: boolean;
  counts: StatusCounts | null;
  /** Failed run id → its redrive run (from its `redriven` trail event). */
  redrivenAs: ReadonlyMap<string, string>;
  depths: QueueDepth[] | null;
  backlog: OutboxBacklog | null;
  writable: boolean;
  viewer: Viewer;
  /** Auto-refresh period in seconds; 0 = off. */
  refresh: number;
}

/** Auto-refresh periods offered on the list (seconds; 0 = off). */
export const REFRESH_CHOICES = [0, 5, 15, 60] as const;

/** The list's query string for these filters (empty ones left out) and extra parameters. */
export function listQuery(filters: Partial<ListFilters>, extra: Record<string, string | number> = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
  for (const [k, v] of Object.entries(extra)) if (v !== '' && v !== 0) q.set(k, String(v));
  const text = q.toString();
  return text ? `?${text}` : '';
}

function statusBadge(status: string): string {
  return `<span class="status ${esc(status)}">${esc(status)}</span>`;
}

function queuesPanel(counts: StatusCounts | null, depths: QueueDepth[] | null, backlog: OutboxBacklog | null): string {
  const depthOf = new Map((depths ?? []).map((d) => [d.queue as string, d]));
  const count = (queue: string | null, status: string) => {
    const n = queue === null ? [...(counts?.values() ?? [])].reduce((sum, m) => sum + (m.get(status) ?? 0), 0) : (counts?.get(queue)?.get(status) ?? 0);
    return `<td class="num" data-status="${esc(status)}"><a href="/${esc(listQuery({ status, ...(queue ? { queue } : {}) }))}">${n}</a></td>`;
  };
  const depthCells = (queue: string) => {
    const d = depthOf.get(queue);
    if (!d) return `<td class="num muted">–</td><td class="num muted">–</td><td class="num dead-letter muted">–</td>`;
    return `<td class="num">${d.visible}</td><td class="num">${d.inFlight}</td><td class="num dead-letter"><a href="/dead-letters/${esc(queue)}">${d.deadLetter}</a></td>`;
  };
  const rows = QUEUE_NAMES.map((q) => `<tr data-queue="${esc(q)}"><td>${esc(q)}</td>${RUN_STATUSES.map((s) => count(q, s)).join('')}${depthCells(q)}</tr>`).join('');
  const total = `<tr id="totals"><th>all queues</th>${RUN_STATUSES.map((s) => count(null, s)).join('')}<td colspan="3"></td></tr>`;
  const notes = [
    counts ? '' : 'run counts unavailable',
    depths ? '' : 'queue depths unavailable (no SQS connection configured, or it did not answer)',
  ].filter(Boolean);
  const outbox = backlog
    ? `Outbox: <strong id="outbox-pending">${backlog.pending}</strong> unsent, oldest ${backlog.oldestPendingSeconds.toFixed(1)} s`
    : 'Outbox: unavailable';
  return `<section class="panel" id="queues"><h2>Queues</h2><table><thead><tr><th>queue</th>${RUN_STATUSES.map((s) => `<th>${esc(s)}</th>`).join('')}<th>visible</th><th>in flight</th><th>dead-letter</th></tr></thead>
<tbody>${rows}${total}</tbody></table><p class="muted">${outbox}${notes.length ? ` · ${esc(notes.join(' · '))}` : ''}</p></section>`;
}

function redrivenMark(newRunId: string | null | undefined): string {
  return newRunId ? ` <a class="redriven" href="/runs/${esc(newRunId)}">redriven → <code>${esc(newRunId.slice(0, 8))}</code></a>` : '';
}

export function runsPage(v: RunsView): string {
  const f = v.filters;
  const option = (value: string, selected: string, label = value) => `<option value="${esc(value)}"${value === selected ? ' selected' : ''}>${esc(label)}</option>`;
  const form = `<form class="filters" method="get" action="/" id="filters">
<label>tenant<input name="tenant" value="${esc(f.tenant)}" placeholder="tenant uid" size="14"></label>
<label>unit<input name="unit" value="${esc(f.unit)}" placeholder="billing.send_invoice" size="22"></label>
<label>status<select name="status">${option('', f.status, 'any')}${RUN_STATUSES.map((s) => option(s, f.status)).join('')}</select></label>
<label>queue<select name="queue">${option('', f.queue, 'any')}${QUEUE_NAMES.map((q) => option(q, f.queue)).join('')}</select></label>
<label>queued since<input name="since" value="${esc(f.since)}" placeholder="15m or 2026-11-23T10:00:00Z" size="22"></label>
<label>until<input name="until" value="${esc(f.until)}" placeholder="ISO instant or 1h" size="16"></label>
${v.refresh ? `<input type="hidden" name="refresh" value="${v.refresh}">` : ''}<button type="submit">Filter</button> <a href="/${v.refresh ? listQuery({}, { refresh: v.refresh }) : ''}">clear</a></form>`;
  const here = (extra: Record<string, string | number> = {}) => `/${listQuery(f, { offset: v.offset, refresh: v.refresh, ...extra })}`;
  const refreshBar = `<nav class="bar" id="refresh"><a href="${esc(here())}" id="refresh-now">Refresh</a><span>auto-refresh:</span>${REFRESH_CHOICES.map(
    (s) => `<a href="${esc(here({ refresh: s }))}" data-refresh="${s}"${s === v.refresh ? ' class="current"' : ''}>${s === 0 ? 'off' : `${s} s`}</a>`,
  ).join('')}<a href="/stuck" id="stuck-link">Stuck runs</a>${v.writable && v.viewer.operator !== null ? `<a class="button" id="bulk-redrive" href="/redrive${esc(listQuery({ ...f, status: '' }))}">Redrive failed runs matching these filters…</a>` : ''}</nav>`;
  const rows = v.runs
    .map(
      (r) => `<tr class="run" data-run-id="${esc(r.runId)}"><td><a href="/runs/${esc(r.runId)}"><code>${esc(r.runId)}</code></a></td><td>${esc(r.tenant ?? '(platform)')}</td>
<td>${esc(r.unit)}</td><td>${esc(r.queue)}</td><td>${statusBadge(r.status)}${redrivenMark(v.redrivenAs.get(r.runId))}</td><td class="num">${r.attempts}</td><td>${esc(r.trigger)}</td>
<td>${esc(r.errorCode ?? '')}</td><td>${esc(r.queuedAt)}</td><td>${esc(r.finishedAt ?? '')}</td></tr>`,
    )
    .join('');
  const paging = `<nav class="bar paging" id="paging">${
    v.offset > 0 ? `<a id="newer" rel="prev" href="${esc(here({ offset: Math.max(0, v.offset - v.pageSize) }))}">← newer</a>` : '<span class="muted">← newer</span>'
  }<span>${v.runs.length ? `runs <span id="run-range">${v.offset + 1}–${v.offset + v.runs.length}</span>` : 'no runs here'} (newest first, ${v.pageSize} a page)</span>${
    v.hasMore ? `<a id="older" rel="next" href="${esc(here({ offset: v.offset + v.pageSize }))}">older →</a>` : '<span class="muted">older →</span>'
  }</nav>`;
  const table = `<table id="runs"><thead><tr><th>run</th><th>tenant</th><th>unit</th><th>queue</th><th>status</th><th>attempts</th><th>trigger</th><th>error</th><th>queued</th><th>finished</th></tr></thead>
<tbody>${rows || '<tr><td colspan="10" class="muted">no run matches these filters</td></tr>'}</tbody></table>
${paging}<p class="muted"><span id="run-count">${v.runs.length}</span> runs shown.${v.writable ? '' : ' Read-only: set SVC_CONSOLE_TOKEN to redrive or cancel.'}</p>`;
  return page('Runs', `${queuesPanel(v.counts, v.depths, v.backlog)}<h1>Runs</h1>${form}${refreshBar}${table}`, v.viewer, { refreshSeconds: v.refresh });
}

export function runPage(d: RunDetail, options: { writable: boolean; viewer: Viewer; notice?: string }): string {
  const r = d.run;
  const facts: Array<[string, string]> = [
    ['status', statusBadge(r.status)],
    ['unit', esc(r.name)],
    ['queue', esc(r.queue)],
    ['tenant', esc(d.tenant ?? '(platform)')],
    ['trigger', esc(r.trigger)],
    ['actor', `${esc(r.actorKind)} · ${esc(r.actorLabel)}`],
    ['attempts', String(r.attempts)],
    ['correlation id', `<code>${esc(r.correlationId)}</code>`],
    ['causation id', `<code>${esc(r.causationId)}</code>`],
    ['queued', esc(r.queuedAt)],
    ['started', esc(r.startedAt ?? '')],
    ['finished', esc(r.finishedAt ?? '')],
  ];
  // The keys the run was dispatched with: the unit's unique key, the serial key that orders it.
  if (d.uniqueKey) facts.push(['unique key', `<code>${esc(d.uniqueKey)}</code>`]);
  if (d.serialKey) facts.push(['serial key', `<code>${esc(d.serialKey)}</code>`]);
  if (d.redriveOf) facts.push(['redrive of', `<a href="/runs/${esc(d.redriveOf)}"><code>${esc(d.redriveOf)}</code></a>`]);
  if (d.redrivenAs) facts.push(['redriven as', `<a id="redriven-as" href="/runs/${esc(d.redrivenAs)}"><code>${esc(d.redrivenAs)}</code></a>`]);
  const timeline = d.trail
    .map(
      (t) => `<li class="event ev-${esc(t.event)}" data-event="${esc(t.event)}"><strong>${esc(t.event)}</strong> <span class="muted">${esc(t.occurredAt)} · attempt ${t.attempt} · receive ${t.receiveCount} · ${esc(t.workerInstance)}</span>
${t.errorCode ? `<div>error <code>${esc(t.errorCode)}</code> ${esc(t.errorType)}</div>` : ''}${
        t.event === 'redriven' && typeof t.detail.redrive_run_id === 'string' ? `<div>${redrivenMark(t.detail.redrive_run_id)}</div>` : ''
      }${Object.keys(t.detail).length ? `<pre>${esc(JSON.stringify(t.detail))}</pre>` : ''}</li>`,
    )
    .join('');
  const act = options.writable && options.viewer.operator !== null;
  const canRedrive = act && r.status === 'failed' && !d.redrivenAs;
  const canCancel = act && ['queued', 'running', 'retrying'].includes(r.status);
  const actions =
    canRedrive || canCancel
      ? `<div class="actions panel">${canRedrive ? `<a class="button" id="redrive" href="/runs/${esc(r.runId)}/redrive">Redrive (new run)…</a>` : ''}${
          canCancel ? `<a class="button danger" id="cancel" href="/runs/${esc(r.runId)}/cancel">Cancel run…</a>` : ''
        }</div>`
      : '';
  const envelope = d.outbox?.envelope;
  const payload =
    envelope && 'payload' in envelope
      ? `<pre class="panel" id="payload">${esc(JSON.stringify(envelope.payload, null, 2))}</pre>`
      : `<p class="panel muted" id="payload">The payload is no longer stored here (the outbox row is purged 7 days after sending); its dead-letter message may still hold it.</p>`;
  const outcome = Object.keys(r.outcome).length ? `<h2>Outcome</h2><pre class="panel" id="outcome">${esc(JSON.stringify(r.outcome, null, 2))}</pre>` : '';
  return page(
    `Run ${r.runId}`,
    `${options.notice ? `<div class="panel" role="status" id="notice">${esc(options.notice)}</div>` : ''}<h1>Run <code>${esc(r.runId)}</code></h1>
<table class="panel" id="facts">${facts.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${v}</td></tr>`).join('')}</table>${actions}
<h2>Trail</h2><ol class="timeline" id="timeline">${timeline}</ol>${outcome}<h2>Payload</h2>${payload}`,
    options.viewer,
  );
}

const confirmField = '<input type="hidden" name="confirm" value="yes">';
const hidden = (fields: Record<string, string>) =>
  Object.entries(fields)
    .filter(([, v]) => v !== '')
    .map(([k, v]) => `<input type="hidden" name="${esc(k)}" value="${esc(v)}">`)
    .join('');

/** The confirmation of one run's redrive or cancel: the form that writes (cancel asks for a reason). */
export function confirmRunPage(action: 'redrive' | 'cancel', d: RunDetail, viewer: Viewer, recordedAs: string): string {
  const r = d.run;
  const what =
    action === 'redrive'
      ? `A new run of <strong>${esc(r.name)}</strong> (tenant ${esc(d.tenant ?? '(platform)')}) is created with the same payload; this failed run links to it.`
      : `The ${esc(r.status)} run of <strong>${esc(r.name)}</strong> (tenant ${esc(d.tenant ?? '(platform)')}) ends failed with CANCELLED; a running attempt is aborted and its effect rolled back.`;
  const reason =
    action === 'cancel'
      ? `<p><label>Reason (recorded on the trail, at most 500 characters)<br><textarea name="reason" id="reason" rows="3" maxlength="500"></textarea></label></p>`
      : '';
  return page(
    `${action === 'redrive' ? 'Redrive' : 'Cancel'} run ${r.runId}?`,
    `<h1>${action === 'redrive' ? 'Redrive' : 'Cancel'} run <code>${esc(r.runId)}</code>?</h1>
<form method="post" action="/runs/${esc(r.runId)}/${action}" class="panel" id="confirm-form"><p>${what} Recorded as <code>${esc(recordedAs)}</code>.</p>${reason}${confirmField}
<div class="actions"><button type="submit" class="primary${action === 'cancel' ? ' danger' : ''}" id="confirm">${action === 'redrive' ? 'Yes, redrive it' : 'Yes, cancel it'}</button><a href="/runs/${esc(r.runId)}">No, back to the run</a></div></form>`,
    viewer,
  );
}

function selectionTable(runs: readonly RunSummary[]): string {
  return `<table id="selection"><thead><tr><th>run</th><th>tenant</th><th>unit</th><th>queue</th><th>error</th><th>queued</th></tr></thead><tbody>${runs
    .map(
      (r) =>
        `<tr class="run" data-run-id="${esc(r.runId)}"><td><a href="/runs/${esc(r.runId)}"><code>${esc(r.runId)}</code></a></td><td>${esc(r.tenant ?? '(platform)')}</td><td>${esc(r.unit)}</td><td>${esc(r.queue)}</td><td>${esc(r.errorCode ?? '')}</td><td>${esc(r.queuedAt)}</td></tr>`,
    )
    .join('')}</tbody></table>`;
}

/** The confirmation of a bulk redrive: what the dry run selected, and the form redriving at most that many. */
export function confirmBulkPage(filters: Omit<ListFilters, 'status'>, selected: readonly RunSummary[], viewer: Viewer, recordedAs: string, shownMax: number): string {
  const described = Object.entries(filters).filter(([, v]) => v !== '').map(([k, v]) => `${esc(k)} ${esc(v)}`).join(', ') || 'no filter';
  const body =
    selected.length === 0
      ? `<p class="panel" id="selected-count" data-count="0">No failed run that is not yet redriven (nor cancelled) matches ${described}.</p>`
      : `<form method="post" action="/redrive" class="panel" id="confirm-form"><p id="selected-count" data-count="${selected.length}"><strong>${selected.length}</strong> failed runs match (${described}): each gets a new run with its payload (newest first, at most ${selected.length}; cancelled runs are left out). Recorded as <code>${esc(recordedAs)}</code>.</p>
${hidden(filters)}<input type="hidden" name="max" value="${selected.length}">${confirmField}
<div class="actions"><button type="submit" class="primary" id="confirm">Yes, redrive ${selected.length} runs</button><a href="/${esc(listQuery({ ...filters, status: 'failed' }))}">No, back to the list</a></div></form>
${selectionTable(selected.slice(0, shownMax))}${selected.length > shownMax ? `<p class="muted">and ${selected.length - shownMax} more</p>` : ''}`;
  return page('Redrive failed runs?', `<h1>Redrive failed runs?</h1>${body}`, viewer);
}

export function bulkResultPage(outcome: BulkRedriveOutcome, viewer: Viewer): string {
  const rows = outcome.results
    .map((r) =>
      r.result === 'refused'
        ? `<tr class="result" data-run-id="${esc(r.failedRunId)}" data-result="refused"><td><a href="/runs/${esc(r.failedRunId)}"><code>${esc(r.failedRunId)}</code></a></td><td>refused</td><td><code>${esc(r.code)}</code> ${esc(r.message)}</td></tr>`
        : `<tr class="result" data-run-id="${esc(r.failedRunId)}" data-result="${esc(r.result)}"><td><a href="/runs/${esc(r.failedRunId)}"><code>${esc(r.failedRunId)}</code></a></td><td>${esc(r.result)}</td><td><a class="new-run" href="/runs/${esc(r.newRunId)}"><code>${esc(r.newRunId)}</code></a></td></tr>`,
    )
    .join('');
  return page(
    'Redrive done',
    `<h1>Redrive done</h1><div class="panel" role="status" id="notice">${outcome.results.filter((r) => r.result === 'redriven').length} redriven of ${outcome.results.length} selected.</div>
<table id="results"><thead><tr><th>failed run</th><th>result</th><th>new run</th></tr></thead><tbody>${rows}</tbody></table><p><a href="/?status=failed">Back to the failed runs</a></p>`,
    viewer,
  );
}

export interface DeadLettersView {
  queue: QueueName;
  letters: readonly DeadLetter[];
  /** Run id → its redrive run, for letters whose run is already redriven. */
  redrivenAs: ReadonlyMap<string, string>;
  /** Listed at most. */
  max: number;
  writable: boolean;
  viewer: Viewer;
  recordedAs: string | null;
}

/** A dead-letter queue's messages, already-redriven runs marked, and the confirmation of its redrive. */
export function deadLettersPage(v: DeadLettersView): string {
  const rows = v.letters
    .map(
      (l) => `<tr class="letter" data-message-id="${esc(l.messageId)}" data-run-id="${esc(l.runId ?? '')}"><td>${l.runId ? `<a href="/runs/${esc(l.runId)}"><code>${esc(l.runId)}</code></a>` : '<span class="muted">not a run envelope</span>'}${redrivenMark(l.runId ? v.redrivenAs.get(l.runId) : undefined)}</td>
<td>${esc(l.unit ?? '')}</td><td>${esc(l.runStatus ?? 'no such run')}</td><td>${esc(l.errorCode ?? '')}</td><td class="num">${esc(l.receiveCount ?? '')}</td><td class="num">${esc(l.ageSeconds ?? '')}</td><td>${esc(l.sourceQueue ?? '')}</td></tr>`,
    )
    .join('');
  const act = v.writable && v.viewer.operator !== null && v.letters.length > 0;
  const form = act
    ? `<form method="post" action="/dead-letters/${esc(v.queue)}/redrive" class="panel" id="confirm-form"><p>Redrive the failed run of each message (a new run with its payload, from the outbox or the message) and delete the message after that commit; messages whose run is already redriven are deleted; others are left. Recorded as <code>${esc(v.recordedAs)}</code>.</p>
<input type="hidden" name="max" value="${v.letters.length}">${confirmField}<button type="submit" class="primary" id="confirm">Redrive the dead letters of ${esc(v.queue)}</button></form>`
    : '';
  return page(
    `Dead letters of ${v.queue}`,
    `<h1>Dead letters of <code>${esc(v.queue)}</code></h1>${form}
<table id="letters"><thead><tr><th>run</th><th>unit</th><th>run status</th><th>error</th><th>receives</th><th>age (s)</th><th>from</th></tr></thead>
<tbody>${rows || '<tr><td colspan="7" class="muted">the dead-letter queue is empty</td></tr>'}</tbody></table>
<p class="muted"><span id="letter-count">${v.letters.length}</span> messages shown (at most ${v.max}). Reading hides them for a moment and puts them back.</p><p><a href="/">Back to the runs</a></p>`,
    v.viewer,
  );
}

export function deadLetterResultPage(queue: QueueName, report: DlqRedriveReport, viewer: Viewer): string {
  const rows = report.outcomes
    .map(
      (o) => `<tr class="result" data-run-id="${esc(o.letter.runId ?? '')}" data-action="${esc(o.action)}"><td>${o.letter.runId ? `<a href="/runs/${esc(o.letter.runId)}"><code>${esc(o.letter.runId)}</code></a>` : ''}</td><td>${esc(o.action)}</td><td>${
        o.newRunId ? `<a class="new-run" href="/runs/${esc(o.newRunId)}"><code>${esc(o.newRunId)}</code></a>` : ''
      }</td><td>${esc(o.reason ?? '')}</td></tr>`,
    )
    .join('');
  return page(
    `Dead letters of ${queue} redriven`,
    `<h1>Dead letters of <code>${esc(queue)}</code> redriven</h1><div class="panel" role="status" id="notice">${report.outcomes.filter((o) => o.action === 'redriven').length} runs redriven, ${
      report.outcomes.filter((o) => o.action === 'already_redriven').length
    } messages of runs redriven before deleted, ${report.outcomes.filter((o) => o.action === 'left').length} left.</div>
<table id="results"><thead><tr><th>run</th><th>action</th><th>new run</th><th>reason</th></tr></thead><tbody>${rows}</tbody></table><p><a href="/dead-letters/${esc(queue)}">Back to the dead letters</a> · <a href="/">the runs</a></p>`,
    viewer,
  );
}

export interface StuckView {
  /** null: the console was started without the windows to judge them. */
  runs: readonly StuckRunSummary[] | null;
  viewer: Viewer;
}

/** Runs past their due with no live delivery: what the rescuer sends again (svc runs list --stuck). */
export function stuckPage(v: StuckView): string {
  if (v.runs === null) return page('Stuck runs', '<h1>Stuck runs</h1><p class="muted">unavailable: this console cannot judge overdue runs</p>', v.viewer);
  const rows = v.runs
    .map(
      (r) => `<tr class="stuck" data-run-id="${esc(r.runId)}"><td><a href="/runs/${esc(r.runId)}"><code>${esc(r.runId)}</code></a></td><td>${esc(r.tenant ?? '(platform)')}</td>
<td>${esc(r.unit)}</td><td>${esc(r.queue)}</td><td>${statusBadge(r.status)}</td><td>${esc(r.state)}</td><td>${esc(r.reason)}</td><td class="num">${r.waitedSeconds}</td><td>${esc(r.since)}</td><td class="num">${r.rescues}</td></tr>`,
    )
    .join('');
  const table = `<table id="stuck-runs"><thead><tr><th>run</th><th>tenant</th><th>unit</th><th>queue</th><th>status</th><th>state</th><th>reason</th><th>waited s</th><th>since</th><th>rescues</th></tr></thead>
<tbody>${rows || '<tr><td colspan="10" class="muted">no stuck run: every active run has a live delivery or is within its window</td></tr>'}</tbody></table>`;
  return page(
    'Stuck runs',
    `<h1>Stuck runs</h1><p class="muted">Active runs past their queue's visibility, their unit's timeout and the margin with no live delivery, longest waiting first. The rescuer beside the relay sends them again.</p>${table}<p class="muted"><span id="stuck-count">${v.runs.length}</span> stuck.</p>`,
    v.viewer,
  );
}
