// `svc runs list` and the selection of bulk redrive: tenant and platform runs, newest first, by
// tenant uid, unit, status, queue, error code and a time window. Numeric ids never leave this
// module: a tenant is named by its `uid`, a run by its uuid.
import type { Sql, TxSql } from '../../db/client.ts';
import { QUEUE_NAMES, type QueueName } from '../../queue/names.ts';
import type { RunStatus, RunTrigger } from '../runtime/store/run-store.ts';
import { OperateError } from './operate-error.ts';
import { findStrandedRuns, type OverdueWindows, type StrandedRun } from '../runtime/store/stranded-runs.ts';

export const RUN_STATUSES: readonly RunStatus[] = ['queued', 'running', 'retrying', 'succeeded', 'failed', 'skipped'];
/** Default `--limit` of runs list. */
export const DEFAULT_LIST_LIMIT = 50;
/** Largest `--limit` of runs list. */
export const MAX_LIST_LIMIT = 1000;

/** A bound of the time window: an instant, or a duration before the database clock. */
export type TimeBound = { at: string } | { agoSeconds: number };

export interface RunFilters {
  /** Tenant uid: only that tenant's runs. */
  tenant?: string;
  /** Unit name. */
  unit?: string;
  statuses?: readonly RunStatus[];
  queue?: QueueName;
  /** Error code of a failed run (its outcome's, else its last `failed` event's). */
  errorCode?: string;
  /** queued_at at or after. */
  since?: TimeBound;
  /** queued_at before. */
  until?: TimeBound;
  /** Only runs not yet redriven (bulk redrive). */
  notRedriven?: boolean;
  /** Leave out runs an operator cancelled (failed with CANCELLED): bulk redrive's default. */
  notCancelled?: boolean;
  /** Default 50, at most 1000 for a list; bulk selection passes its own. */
  limit?: number;
}

/** The raw text options of the CLI (or a future admin route's query string). */
export interface RawRunFilters {
  tenant?: string | undefined;
  unit?: string | undefined;
  status?: string | undefined;
  queue?: string | undefined;
  errorCode?: string | undefined;
  since?: string | undefined;
  until?: string | undefined;
  limit?: string | undefined;
}

const UNIT_NAME = /^[a-z][a-z0-9._-]{1,63}$/;
const DURATION = /^(\d{1,6})(s|m|h|d)$/;
const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86400 } as const;

function invalid(message: string): never {
  throw new OperateError('RUN_FILTER_INVALID', message);
}

/** `2026-11-23T10:00:00Z` (an ISO instant with a zone) or `15m`, `2h`, `7d`, `30s` (that long ago). */
export function parseTimeBound(option: string, text: string): TimeBound {
  const d = DURATION.exec(text);
  if (d) return { agoSeconds: Number(d[1]) * UNIT_SECONDS[d[2] as keyof typeof UNIT_SECONDS] };
  if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(text) && !Number.isNaN(Date.parse(text))) {
    return { at: new Date(text).toISOString() };
  }
  return invalid(`--${option} must be an ISO instant with a zone (2026-11-23T10:00:00Z) or a duration such as 30s, 15m, 2h, 7d; got '${text.slice(0, 64)}'`);
}

/** Validates text filters; every problem is one clear line (RUN_FILTER_INVALID). */
export function parseRunFilters(raw: RawRunFilters): RunFilters {
  const f: RunFilters = {};
  if (raw.tenant !== undefined) {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(raw.tenant)) invalid(`--tenant must be a tenant uid (letters, digits, _ or -), got '${raw.tenant.slice(0, 64)}'`);
    f.tenant = raw.tenant;
  }
  if (raw.unit !== undefined) {
    if (!UNIT_NAME.test(raw.unit)) invalid(`--unit must be a unit name such as billing.send_invoice, got '${raw.unit.slice(0, 64)}'`);
    f.unit = raw.unit;
  }
  if (raw.status !== undefined) {
    const statuses = raw.status.split(',').map((s) => s.trim());
    const unknown = statuses.filter((s) => !(RUN_STATUSES as readonly string[]).includes(s));
    if (unknown.length > 0 || statuses.length === 0) {
      invalid(`--status takes one or more of ${RUN_STATUSES.join(', ')} separated by commas; '${unknown.join(',').slice(0, 64)}' is not a status`);
    }
    f.statuses = [...new Set(statuses)] as RunStatus[];
  }
  if (raw.queue !== undefined) {
    if (!(QUEUE_NAMES as readonly string[]).includes(raw.queue)) invalid(`--queue must be one of ${QUEUE_NAMES.join(', ')}, got '${raw.queue.slice(0, 64)}'`);
    f.queue = raw.queue as QueueName;
  }
  if (raw.errorCode !== undefined) {
    if (!/^[A-Za-z0-9_.:-]{1,128}$/.test(raw.errorCode)) invalid(`--error-code must be an error code such as VALIDATION_FAILED, got '${raw.errorCode.slice(0, 64)}'`);
    f.errorCode = raw.errorCode;
  }
  if (raw.since !== undefined) f.since = parseTimeBound('since', raw.since);
  if (raw.until !== undefined) f.until = parseTimeBound('until', raw.until);
  if (raw.limit !== undefined) {
    if (!/^\d{1,7}$/.test(raw.limit) || Number(raw.limit) < 1 || Number(raw.limit) > MAX_LIST_LIMIT) {
      invalid(`--limit must be a whole number from 1 to ${MAX_LIST_LIMIT}, got '${raw.limit.slice(0, 64)}'`);
    }
    f.limit = Number(raw.limit);
  }
  return f;
}

/** One line of runs list. Instants are ISO 8601 UTC. */
export interface RunSummary {
  runId: string;
  /** Tenant uid, null for a platform run. */
  tenant: string | null;
  unit: string;
  queue: QueueName;
  status: RunStatus;
  trigger: RunTrigger;
  attempts: number;
  actor: string;
  /** Error code of a failed run, else null. */
  errorCode: string | null;
  queuedAt: string;
  finishedAt: string | null;
}

const iso = (sql: Sql | TxSql, column: string) => sql.unsafe(`to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`);

function bound(sql: Sql | TxSql, b: TimeBound) {
  return 'at' in b ? sql`${b.at}::timestamptz` : sql`clock_timestamp() - make_interval(secs => ${b.agoSeconds})`;
}

/** Runs matching the filters, newest first (queued_at, then run id). */
export async function listRuns(sql: Sql | TxSql, filters: RunFilters = {}): Promise<RunSummary[]> {
  const limit = filters.limit ?? DEFAULT_LIST_LIMIT;
  const where = (alias: string) => [
    filters.unit ? sql`AND ${sql(alias)}.name = ${filters.unit}` : sql``,
    filters.statuses ? sql`AND ${sql(alias)}.status = ANY(${filters.statuses as string[]}::text[])` : sql``,
    filters.queue ? sql`AND ${sql(alias)}.queue = ${filters.queue}` : sql``,
    filters.since ? sql`AND ${sql(alias)}.queued_at >= ${bound(sql, filters.since)}` : sql``,
    filters.until ? sql`AND ${sql(alias)}.queued_at < ${bound(sql, filters.until)}` : sql``,
  ];
  // Each branch is limited too (newest first) unless an outer filter may drop rows, so a plain list
  // reads at most `limit` rows per table instead of sorting every run.
  const innerLimit = filters.errorCode || filters.notRedriven || filters.notCancelled ? sql`` : sql`ORDER BY r.queued_at DESC, r.run_id DESC LIMIT ${limit}`;
  // The error code: the outcome's (set when the run failed), else the last `failed` event's (runs
  // that failed before outcomes carried it).
  const tenantRuns = sql`
    SELECT r.run_id, t.uid AS tenant, r.name, r.queue, r.status, r.trigger, r.attempts, r.actor_label, r.queued_at, r.finished_at,
           CASE WHEN r.status = 'failed' THEN COALESCE(r.outcome->'error'->>'code',
             (SELECT e.error_code FROM task_run_events e WHERE e.run_id = r.run_id AND e.event = 'failed' ORDER BY e.id DESC LIMIT 1)) END AS error_code,
           EXISTS (SELECT 1 FROM task_runs c WHERE c.causation_id = r.run_id AND c.trigger = 'redrive') AS redriven
      FROM task_runs r JOIN tenants t ON t.id = r.tenant_id
     WHERE true ${filters.tenant ? sql`AND t.uid = ${filters.tenant}` : sql``} ${where('r')} ${innerLimit}`;
  const platformRuns = sql`
    SELECT r.run_id, NULL::text AS tenant, r.name, r.queue, r.status, r.trigger, r.attempts, r.actor_label, r.queued_at, r.finished_at,
           CASE WHEN r.status = 'failed' THEN COALESCE(r.outcome->'error'->>'code',
             (SELECT e.error_code FROM platform_task_run_events e WHERE e.run_id = r.run_id AND e.event = 'failed' ORDER BY e.id DESC LIMIT 1)) END AS error_code,
           EXISTS (SELECT 1 FROM platform_task_runs c WHERE c.causation_id = r.run_id AND c.trigger = 'redrive') AS redriven
      FROM platform_task_runs r
     WHERE true ${where('r')} ${innerLimit}`;
  const rows = await sql<Record<string, unknown>[]>`
    SELECT run_id::text, tenant, name, queue, status, trigger, attempts, actor_label, error_code,
           ${iso(sql, 'queued_at')} AS queued_at_text, ${iso(sql, 'finished_at')} AS finished_at_text
      FROM ((${tenantRuns}) ${filters.tenant ? sql`` : sql`UNION ALL (${platformRuns})`}) x
     WHERE true
       ${filters.errorCode ? sql`AND x.error_code = ${filters.errorCode}` : sql``}
       ${filters.notRedriven ? sql`AND NOT x.redriven` : sql``}
       ${filters.notCancelled ? sql`AND x.error_code IS DISTINCT FROM 'CANCELLED'` : sql``}
     ORDER BY x.queued_at DESC, x.run_id DESC
     LIMIT ${limit}`;
  return rows.map((r) => ({
    runId: r.run_id as string,
    tenant: (r.tenant as string | null) ?? null,
    unit: r.name as string,
    queue: r.queue as QueueName,
    status: r.status as RunStatus,
    trigger: r.trigger as RunTrigger,
    attempts: r.attempts as number,
    actor: r.actor_label as string,
    errorCode: (r.error_code as string | null) || null,
    queuedAt: r.queued_at_text as string,
    finishedAt: (r.finished_at_text as string | null) ?? null,
  }));
}

/** One line of `runs list --stuck`: an active run with no live delivery, as the rescuer judges it. */
export interface StuckRunSummary {
  runId: string;
  /** Tenant uid, null for a platform run. */
  tenant: string | null;
  unit: string;
  queue: QueueName;
  status: RunStatus;
  /** sent (sent, not received), running (running without a lease) or retrying (retry overdue). */
  state: string;
  /** Why the rescuer would send it again (sent_not_received, running_without_lease, retry_overdue, payload_gone). */
  reason: string;
  attempts: number;
  /** Its last progress, ISO 8601 UTC, and the seconds since. */
  since: string;
  waitedSeconds: number;
  /** Times it was rescued already. */
  rescues: number;
}

/** Active runs examined per table by `--stuck` (oldest last change first). */
const STUCK_SCAN_LIMIT = 10_000;

/**
 * The stuck runs (src/work/runtime/store/stranded-runs.ts: past their window with no live delivery), longest
 * waiting first; `tenant` and `queue` narrow them.
 */
export async function listStuckRuns(
  sql: Sql | TxSql,
  windows: OverdueWindows,
  filters: Pick<RunFilters, 'tenant' | 'queue' | 'limit'> = {},
): Promise<StuckRunSummary[]> {
  const scopes = filters.tenant ? (['tenant'] as const) : (['tenant', 'platform'] as const);
  const found: StrandedRun[] = [];
  for (const scope of scopes) found.push(...(await findStrandedRuns(sql, scope, windows, { scan: { limit: STUCK_SCAN_LIMIT } })).runs);
  return found
    .filter((r) => (!filters.tenant || r.tenant === filters.tenant) && (!filters.queue || r.queue === filters.queue))
    .sort((a, b) => b.waitedSeconds - a.waitedSeconds)
    .slice(0, filters.limit ?? DEFAULT_LIST_LIMIT)
    .map((r) => ({
      runId: r.runId,
      tenant: r.tenant,
      unit: r.unit,
      queue: r.queue,
      status: r.status,
      state: r.state,
      reason: r.reason,
      attempts: r.attempts,
      since: r.since,
      waitedSeconds: Math.round(r.waitedSeconds),
      rescues: r.rescues,
    }));
}
