// `svc runs list | show | redrive | cancel`: the operator's window on runs. A thin layer over
// src/work/operate/: it parses arguments, opens connections, prints. Bad input is one line on stderr
// and exit code 1 (thrown as OperateError to cli.ts), with nothing written.
import { parseArgs } from 'node:util';
import { evictRunStatus } from '../kv/run-status-cache.ts';
import { signalOutbox } from '../kv/wake.ts';
import { cancelRunNow } from '../work/operate/cancel-run.ts';
import { listRuns, listStuckRuns, parseRunFilters, type RunFilters, type RunSummary } from '../work/operate/list-runs.ts';
import { overdueConfig } from '../config/workers.ts';
import { checkOperatorLabel, checkRunId, OperateError } from '../work/operate/operate-error.ts';
import { redriveRun, redriveRunNow, redriveActorLabel, redriveRuns } from '../work/operate/redrive-run.ts';
import { showRun, type RunDetail } from '../work/operate/show-run.ts';
import { inUnitOfWork } from '../db/unit-of-work.ts';
import { printJson, printLine, printText, terminalText } from './terminal-text.ts';
import { loadKeySource, loadUnitTimeouts, openOperateConnections } from './operate-connections.ts';

const USAGE = `usage:
  svc runs list [--tenant <uid>] [--unit <name>] [--status <s>[,<s>]] [--queue <q>] [--since <instant|duration>] [--until <instant|duration>] [--limit <n>] [--json]
  svc runs list --stuck [--tenant <uid>] [--queue <q>] [--limit <n>] [--json]   active runs with no live delivery (what the rescuer sends again)
  svc runs show <runId> [--json]
  svc runs redrive <runId> --by <label> [--dry-run] [--json]
  svc runs redrive --status failed --unit <name> --since <instant|duration> [--until …] [--error-code <code>] [--include-cancelled] [--max <n>] --by <label> [--dry-run] [--json]
  svc runs cancel <runId> --by <label> [--reason <text>] [--json]`;

type Options = NonNullable<NonNullable<Parameters<typeof parseArgs>[0]>['options']>;

export function parse(args: string[], options: Options): { values: Record<string, string | boolean | undefined>; positionals: string[] } {
  try {
    const parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
    return { values: parsed.values as Record<string, string | boolean | undefined>, positionals: parsed.positionals };
  } catch (error) {
    throw new OperateError('RUN_FILTER_INVALID', `${(error as Error).message.split('\n')[0]} (svc runs --help)`);
  }
}

function onePositional(positionals: string[], what: string): string {
  if (positionals.length !== 1) throw new OperateError('RUN_FILTER_INVALID', `expected exactly one ${what}, got ${positionals.length} (svc runs --help)`);
  return positionals[0]!;
}

/** A text table; each cell is printed terminal-safe (a field may come from a queue message or a handler). */
export function table(headers: string[], rows: string[][]): string {
  const safe = rows.map((r) => r.map((c) => terminalText(c)));
  const widths = headers.map((h, i) => Math.max(h.length, ...safe.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  return [line(headers), ...safe.map(line)].join('\n');
}

function runsTable(runs: RunSummary[]): string {
  return table(
    ['RUN', 'TENANT', 'UNIT', 'QUEUE', 'STATUS', 'TRIGGER', 'ATTEMPTS', 'ERROR', 'QUEUED AT', 'ACTOR'],
    runs.map((r) => [r.runId, r.tenant ?? '-', r.unit, r.queue, r.status, r.trigger, String(r.attempts), r.errorCode ?? '-', r.queuedAt, r.actor]),
  );
}

function detailText(d: RunDetail): string {
  const r = d.run;
  const fields = [
    `run         ${r.runId}`,
    `tenant      ${d.tenant ?? '- (platform run)'}`,
    `unit        ${r.name}   queue ${r.queue}   trigger ${r.trigger}`,
    `actor       ${r.actorKind} ${r.actorLabel}`,
    `status      ${r.status}   attempts ${r.attempts}   progress ${r.progress}%`,
    `outcome     ${JSON.stringify(r.outcome)}`,
    `queued      ${r.queuedAt}   started ${r.startedAt ?? '-'}   finished ${r.finishedAt ?? '-'}`,
    `correlation ${r.correlationId}   causation ${r.causationId}`,
    `redrive of  ${d.redriveOf ?? '-'}`,
    `redriven as ${d.redrivenAs ?? '-'}`,
    `unique key  ${d.uniqueKey ?? '-'}`,
    `serial key  ${d.serialKey ?? '-'}`,
    `ledger      ${d.ledger ? `${d.ledger.status} (attempt ${d.ledger.attempt}, expires ${d.ledger.expiresAt}) ${JSON.stringify(d.ledger.outcome)}` : '-'}`,
    `outbox      ${d.outbox ? `${d.outbox.queue}, ${d.outbox.sentAt ? `sent ${d.outbox.sentAt}` : `pending since ${d.outbox.availableAt}`}, ${d.outbox.attempts} failed send(s); payload ${JSON.stringify(d.outbox.envelope.payload)}` : '- (purged, or never sent)'}`,
  ].map((line) => terminalText(line));
  const lines = [
    ...fields,
    '',
    'trail:',
    table(
      ['AT', 'EVENT', 'ATTEMPT', 'RECEIVE', 'ERROR', 'WORKER', 'DETAIL'],
      d.trail.map((t) => [
        t.occurredAt,
        t.event,
        String(t.attempt),
        String(t.receiveCount),
        t.errorCode ? `${t.errorCode} (${t.errorType})` : '-',
        t.workerInstance,
        Object.keys(t.detail).length ? JSON.stringify(t.detail) : '',
      ]),
    ),
  ];
  return lines.join('\n');
}

/** `runs list --stuck`: judged as the rescuer judges (visibility per queue and margin from the environment, unit timeouts from the build's units). */
async function listStuck(filters: RunFilters, json: boolean): Promise<number> {
  const { visibilitySeconds, marginMs } = overdueConfig(process.env);
  const units = await loadUnitTimeouts();
  const c = await openOperateConnections('svc runs', { sqs: false });
  try {
    const runs = await listStuckRuns(c.sql, { visibilitySeconds, marginMs, unitTimeoutSeconds: units }, filters);
    if (json) for (const r of runs) printJson(r);
    else if (runs.length === 0) printLine('no stuck runs');
    else {
      printText(
        table(
          ['RUN', 'TENANT', 'UNIT', 'QUEUE', 'STATUS', 'STATE', 'REASON', 'ATTEMPTS', 'WAITED', 'SINCE', 'RESCUES'],
          runs.map((r) => [r.runId, r.tenant ?? '-', r.unit, r.queue, r.status, r.state, r.reason, String(r.attempts), `${r.waitedSeconds}s`, r.since, String(r.rescues)]),
        ),
      );
    }
    return 0;
  } finally {
    await c.close();
  }
}

/** Thrown inside a transaction to roll a dry run back after its checks ran. */
class DryRunRollback extends Error {}

export async function run(args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  if (!sub || sub === '--help' || sub === '-h' || sub === 'help') {
    printText(USAGE);
    return sub ? 0 : 1;
  }
  const json = { type: 'boolean' } as const;
  const text = { type: 'string' } as const;
  const out = printJson;

  if (sub === 'list') {
    const { values, positionals } = parse(rest, { tenant: text, unit: text, status: text, queue: text, since: text, until: text, limit: text, json, stuck: { type: 'boolean' } });
    if (positionals.length) throw new OperateError('RUN_FILTER_INVALID', `runs list takes no positional argument, got '${positionals[0]!.slice(0, 64)}'`);
    const { stuck, ...rawFilters } = values;
    const filters = parseRunFilters(rawFilters);
    if (stuck) {
      const other = (['unit', 'status', 'since', 'until'] as const).find((k) => values[k] !== undefined);
      if (other) throw new OperateError('RUN_FILTER_INVALID', `--stuck takes --tenant, --queue and --limit only, not --${other}`);
      return listStuck(filters, Boolean(values.json));
    }
    const c = await openOperateConnections('svc runs', { sqs: false });
    try {
      const runs = await listRuns(c.sql, filters);
      if (values.json) for (const r of runs) out(r);
      else printText(runs.length ? runsTable(runs) : 'no runs match');
      return 0;
    } finally {
      await c.close();
    }
  }

  if (sub === 'show') {
    const { values, positionals } = parse(rest, { json });
    const runId = checkRunId(onePositional(positionals, 'run id'));
    const c = await openOperateConnections('svc runs', { sqs: false });
    try {
      const keySource = await loadKeySource();
      const detail = await showRun(c.sql, runId, keySource ? { keySource } : {});
      if (values.json) printJson(detail);
      else printText(detailText(detail));
      return 0;
    } finally {
      await c.close();
    }
  }

  if (sub === 'redrive') {
    const { values, positionals } = parse(rest, {
      by: text, 'dry-run': { type: 'boolean' }, json, status: text, unit: text, since: text, until: text, 'error-code': text, max: text, tenant: text, queue: text,
      'include-cancelled': { type: 'boolean' },
    });
    const by = checkOperatorLabel(values.by as string | undefined);
    const dryRun = Boolean(values['dry-run']);
    if (positionals.length > 0) {
      const runId = checkRunId(onePositional(positionals, 'run id'));
      const filterGiven = ['status', 'unit', 'since', 'until', 'error-code', 'max', 'tenant', 'queue', 'include-cancelled'].find((k) => values[k] !== undefined);
      if (filterGiven) throw new OperateError('RUN_FILTER_INVALID', `--${filterGiven} selects runs in bulk: give either a run id or filters, not both`);
      const c = await openOperateConnections('svc runs', { sqs: false });
      const keySource = await loadKeySource();
      const withKeys = keySource ? { keySource } : {};
      try {
        if (dryRun) {
          // The real checks and writes, rolled back: the plan is exactly what a real run would do.
          let planned: Awaited<ReturnType<typeof redriveRun>> | undefined;
          await inUnitOfWork(c.sql, { kind: 'system', label: redriveActorLabel(by) }, async (tx) => {
            planned = await redriveRun(tx, { runId, by, ...withKeys });
            throw new DryRunRollback();
          }).catch((error: unknown) => {
            if (!(error instanceof DryRunRollback)) throw error;
          });
          const p = planned!;
          if (values.json) out({ dryRun: true, ...p, newRunId: p.result === 'redriven' ? null : p.newRunId, result: p.result === 'redriven' ? 'would_redrive' : p.result });
          else printLine(p.result === 'redriven' ? `dry run: would redrive run ${p.failedRunId} (${p.unit}) as a new run on ${p.queue}; nothing written` : `dry run: run ${p.failedRunId} is already redriven as ${p.newRunId}; nothing written`);
          return 0;
        }
        const result = await redriveRunNow(c.sql, { runId, by, ...withKeys });
        await signalOutbox(c.redis);
        if (values.json) out(result);
        else printLine(result.result === 'redriven' ? `redriven: run ${result.failedRunId} (${result.unit}) → new run ${result.newRunId}` : `already redriven: run ${result.failedRunId} → run ${result.newRunId} (nothing new written)`);
        return 0;
      } finally {
        await c.close();
      }
    }
    // Bulk: status failed, a unit and a window are required, so a typo never redrives everything.
    if (values.status !== 'failed') {
      throw new OperateError(
        values.status === undefined ? 'RUN_FILTER_INVALID' : 'RUN_NOT_FAILED',
        values.status === undefined ? 'bulk redrive needs --status failed (or give one run id)' : `only failed runs are redriven: --status must be failed, got '${String(values.status).slice(0, 64)}'`,
      );
    }
    if (values.unit === undefined || values.since === undefined) throw new OperateError('RUN_FILTER_INVALID', 'bulk redrive needs --unit <name> and --since <instant|duration>');
    const filters = parseRunFilters({
      unit: values.unit as string, since: values.since as string, until: values.until as string | undefined,
      errorCode: values['error-code'] as string | undefined, tenant: values.tenant as string | undefined, queue: values.queue as string | undefined,
    });
    let max: number | undefined;
    if (values.max !== undefined) {
      if (!/^\d{1,7}$/.test(values.max as string) || Number(values.max) < 1) throw new OperateError('RUN_FILTER_INVALID', `--max must be a whole number of at least 1, got '${String(values.max).slice(0, 64)}'`);
      max = Number(values.max);
    }
    const c = await openOperateConnections('svc runs', { sqs: false });
    try {
      const keySource = await loadKeySource();
      const outcome = await redriveRuns(c.sql, { filters, by, dryRun, includeCancelled: Boolean(values['include-cancelled']), ...(max !== undefined ? { max } : {}), ...(keySource ? { keySource } : {}) });
      if (outcome.results.length) await signalOutbox(c.redis);
      if (values.json) {
        if (dryRun) for (const r of outcome.selected) out({ dryRun: true, result: 'would_redrive', failedRunId: r.runId, unit: r.unit, queue: r.queue, tenant: r.tenant, errorCode: r.errorCode });
        else for (const r of outcome.results) out(r);
      } else if (dryRun) {
        printLine(`dry run: would redrive ${outcome.selected.length} failed run(s); nothing written`);
        if (outcome.selected.length) printText(runsTable(outcome.selected));
      } else {
        for (const r of outcome.results) {
          printLine(r.result === 'refused' ? `refused: run ${r.failedRunId} (${r.unit}): ${r.code}: ${r.message}` : `${r.result === 'redriven' ? 'redriven' : 'already redriven'}: run ${r.failedRunId} (${r.unit}) → new run ${r.newRunId}`);
        }
        printLine(`${outcome.results.filter((r) => r.result === 'redriven').length} run(s) redriven`);
      }
      return 0;
    } finally {
      await c.close();
    }
  }

  if (sub === 'cancel') {
    const { values, positionals } = parse(rest, { by: text, reason: text, json });
    const runId = checkRunId(onePositional(positionals, 'run id'));
    const by = checkOperatorLabel(values.by as string | undefined);
    const c = await openOperateConnections('svc runs', { sqs: false });
    try {
      const result = await cancelRunNow(c.sql, { runId, by, ...(values.reason !== undefined ? { reason: values.reason as string } : {}) });
      await evictRunStatus(c.redis, runId);
      if (values.json) out(result);
      else printLine(result.result === 'cancelled' ? `cancelled: run ${runId} (${result.unit}) was ${result.previousStatus}, now failed with CANCELLED` : `already cancelled: run ${runId} (nothing new written)`);
      return 0;
    } finally {
      await c.close();
    }
  }

  throw new OperateError('RUN_FILTER_INVALID', `unknown subcommand 'runs ${sub.slice(0, 32)}': use list, show, redrive or cancel (svc runs --help)`);
}
