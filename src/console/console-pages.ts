// The console's pages as server-rendered HTML: no build chain, no script, one small stylesheet. Every
// value from the database goes through `esc`.
import type { OutboxBacklog, QueueDepth } from '../observe/backlog.ts';
import type { RunSummary } from '../work/operate/list-runs.ts';
import { RUN_STATUSES } from '../work/operate/list-runs.ts';
import type { RunDetail } from '../work/operate/show-run.ts';
import { QUEUE_NAMES } from '../queue/names.ts';

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
.muted{color:#6b7385}.actions{display:flex;gap:8px}h1{font-size:20px;margin:0 0 12px}h2{font-size:16px;margin:0 0 8px}
`;

export function page(title: string, body: string, options: { loggedIn?: boolean } = {}): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)} · svc console</title>
<meta name="viewport" content="width=device-width,initial-scale=1"><style>${STYLE}</style></head>
<body><header><a href="/">svc console</a><span class="muted">runs across every tenant</span>${
    options.loggedIn ? '<form method="post" action="/logout"><button type="submit">Log out</button></form>' : ''
  }</header><main>${body}</main></body></html>`;
}

export function loginPage(message?: string): string {
  return page(
    'Log in',
    `<h1>Log in</h1>${message ? `<div class="panel error" role="alert">${esc(message)}</div>` : ''}
<form method="post" action="/login" class="panel"><label>Console token (SVC_CONSOLE_TOKEN)<br>
<input type="password" name="token" autocomplete="current-password" size="70" required></label>
<button type="submit">Log in</button></form>`,
  );
}

export function errorPage(status: number, code: string, message: string, loggedIn: boolean): string {
  return page(
    `Error ${status}`,
    `<h1>${status === 404 ? 'Not found' : 'Request refused'}</h1><div class="panel error" role="alert"><strong>${esc(code)}</strong>: ${esc(message)}</div><p><a href="/">Back to the runs</a></p>`,
    { loggedIn },
  );
}

export interface RunsView {
  filters: Record<'tenant' | 'unit' | 'status' | 'queue' | 'since' | 'until', string>;
  runs: RunSummary[];
  depths: QueueDepth[] | null;
  backlog: OutboxBacklog | null;
  writable: boolean;
  loggedIn: boolean;
}

function statusBadge(status: string): string {
  return `<span class="status ${esc(status)}">${esc(status)}</span>`;
}

function depthsPanel(depths: QueueDepth[] | null, backlog: OutboxBacklog | null): string {
  const rows = depths
    ? depths
        .map((d) => `<tr data-queue="${esc(d.queue)}"><td>${esc(d.queue)}</td><td class="num">${d.visible}</td><td class="num">${d.inFlight}</td><td class="num dead-letter">${d.deadLetter}</td></tr>`)
        .join('')
    : `<tr><td colspan="4" class="muted">queue depths unavailable (no SQS connection configured, or it did not answer)</td></tr>`;
  const outbox = backlog
    ? `Outbox: <strong id="outbox-pending">${backlog.pending}</strong> unsent, oldest ${backlog.oldestPendingSeconds.toFixed(1)} s`
    : 'Outbox: unavailable';
  return `<section class="panel" id="queues"><h2>Queues</h2><table><thead><tr><th>queue</th><th>visible</th><th>in flight</th><th>dead-letter</th></tr></thead>
<tbody>${rows}</tbody></table><p class="muted">${outbox}</p></section>`;
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
<button type="submit">Filter</button> <a href="/">clear</a></form>`;
  const rows = v.runs
    .map(
      (r) => `<tr class="run" data-run-id="${esc(r.runId)}"><td><a href="/runs/${esc(r.runId)}"><code>${esc(r.runId)}</code></a></td><td>${esc(r.tenant ?? '(platform)')}</td>
<td>${esc(r.unit)}</td><td>${esc(r.queue)}</td><td>${statusBadge(r.status)}</td><td class="num">${r.attempts}</td><td>${esc(r.trigger)}</td>
<td>${esc(r.errorCode ?? '')}</td><td>${esc(r.queuedAt)}</td><td>${esc(r.finishedAt ?? '')}</td></tr>`,
    )
    .join('');
  const table = `<table id="runs"><thead><tr><th>run</th><th>tenant</th><th>unit</th><th>queue</th><th>status</th><th>attempts</th><th>trigger</th><th>error</th><th>queued</th><th>finished</th></tr></thead>
<tbody>${rows || '<tr><td colspan="10" class="muted">no run matches these filters</td></tr>'}</tbody></table>
<p class="muted"><span id="run-count">${v.runs.length}</span> runs shown (newest first, at most 200).${v.writable ? '' : ' Read-only: set SVC_CONSOLE_TOKEN to redrive or cancel.'}</p>`;
  return page('Runs', `${depthsPanel(v.depths, v.backlog)}<h1>Runs</h1>${form}${table}`, { loggedIn: v.loggedIn });
}

export function runPage(d: RunDetail, options: { writable: boolean; loggedIn: boolean; notice?: string }): string {
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
  if (d.redriveOf) facts.push(['redrive of', `<a href="/runs/${esc(d.redriveOf)}"><code>${esc(d.redriveOf)}</code></a>`]);
  if (d.redrivenAs) facts.push(['redriven as', `<a id="redriven-as" href="/runs/${esc(d.redrivenAs)}"><code>${esc(d.redrivenAs)}</code></a>`]);
  const timeline = d.trail
    .map(
      (t) => `<li class="event ev-${esc(t.event)}" data-event="${esc(t.event)}"><strong>${esc(t.event)}</strong> <span class="muted">${esc(t.occurredAt)} · attempt ${t.attempt} · receive ${t.receiveCount} · ${esc(t.workerInstance)}</span>
${t.errorCode ? `<div>error <code>${esc(t.errorCode)}</code> ${esc(t.errorType)}</div>` : ''}${Object.keys(t.detail).length ? `<pre>${esc(JSON.stringify(t.detail))}</pre>` : ''}</li>`,
    )
    .join('');
  const canRedrive = options.writable && r.status === 'failed' && !d.redrivenAs;
  const canCancel = options.writable && ['queued', 'running', 'retrying'].includes(r.status);
  const actions =
    canRedrive || canCancel
      ? `<div class="actions panel">${canRedrive ? `<form method="post" action="/runs/${esc(r.runId)}/redrive"><button type="submit" id="redrive">Redrive (new run)</button></form>` : ''}${
          canCancel ? `<form method="post" action="/runs/${esc(r.runId)}/cancel"><button type="submit" id="cancel">Cancel run</button></form>` : ''
        }</div>`
      : '';
  const outcome = Object.keys(r.outcome).length ? `<h2>Outcome</h2><pre class="panel">${esc(JSON.stringify(r.outcome, null, 2))}</pre>` : '';
  return page(
    `Run ${r.runId}`,
    `${options.notice ? `<div class="panel" role="status" id="notice">${esc(options.notice)}</div>` : ''}<h1>Run <code>${esc(r.runId)}</code></h1>
<table class="panel" id="facts">${facts.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${v}</td></tr>`).join('')}</table>${actions}
<h2>Trail</h2><ol class="timeline" id="timeline">${timeline}</ol>${outcome}`,
    { loggedIn: options.loggedIn },
  );
}
