// Redrive of failed runs (`svc runs redrive`, `svc dlq redrive`, a future admin route).
//
// A redrive never reopens a final run. It creates a NEW run of the same unit, tenant and payload with
// trigger `redrive`, causation_id = the failed run, the failed run's correlation id and a system
// actor naming the operator, and appends `redriven` (detail: the new run id) to the failed run's
// trail, in one transaction with the new run's outbox row (written by dispatch's own run writer).
// The failed run's row is locked first, so one failed run yields at most one redrive run however
// many operators or DLQ messages race: a second redrive reports the first. A redrive run that fails
// may be redriven in turn (it is a failed run like any other).
import type { Sql, TxSql } from '../../db/client.ts';
import { inUnitOfWork } from '../../db/unit-of-work.ts';
import type { QueueName } from '../../queue/names.ts';
import { defaultInstanceLabel, writeRedriveRun } from '../runtime/produce/dispatch.ts';
import type { Envelope } from '../runtime/produce/envelope.ts';
import { idempotencyKeyOf } from '../runtime/store/idempotency.ts';
import { OUTBOX_TABLE } from '../runtime/store/scope-tables.ts';
import { appendTrailEvent } from '../runtime/store/trail.ts';
import type { WorkUnit } from '../define/unit.ts';
import { CANCELLED } from './cancel-run.ts';
import { requireRun } from './find-run.ts';
import { listRuns, type RunFilters, type RunSummary } from './list-runs.ts';
import { checkOperatorLabel, checkRunId, OperateError } from './operate-error.ts';

/** Bulk redrive refuses more runs than this unless `max` says how many. */
export const BULK_REDRIVE_UNCONFIRMED_MAX = 1000;

export interface RedriveInput {
  runId: string;
  /** Who redrives (`--by`), recorded as the new run's actor label and on the `redriven` event. */
  by: string;
  /**
   * The envelope of the failed run's message (from its dead-letter copy): the payload source when the
   * outbox row is gone (sent rows are purged after 7 days). Its run id must be the run's.
   */
  envelope?: Envelope;
  /** Names this process on the trail. Default `<hostname>:<pid>`. */
  instance?: string;
  /**
   * The business key source of a unit declaring `idempotencyKey` (unitKeySource of the loaded units).
   * Such a unit's ledger row failed permanently with the run, and the same payload gives the same key:
   * the redrive reopens that row (failed_permanent → failed_retryable) in its transaction, or the new
   * run would fail at once with IDEMPOTENCY_FAILED_PERMANENTLY. Units keyed by run id need nothing.
   */
  keySource?: KeySource;
}

/** Business key source of a unit for a payload; undefined for a unit keyed by run id. */
export type KeySource = (unit: string, payload: unknown) => string | undefined;

/** The KeySource of a set of unit definitions. */
export function unitKeySource(units: ReadonlyMap<string, WorkUnit>): KeySource {
  return (name, payload) => {
    const unit = units.get(name);
    if (!unit?.idempotencyKey) return undefined;
    const parsed = unit.payload.safeParse(payload);
    return parsed.success ? unit.idempotencyKey(parsed.data as never) : undefined;
  };
}

export interface RedriveResult {
  result: 'redriven' | 'already_redriven';
  failedRunId: string;
  /** The redrive run: created now, or by an earlier redrive. */
  newRunId: string;
  unit: string;
  queue: QueueName;
  /** Tenant uid, null for a platform run. */
  tenant: string | null;
}

/** Actor label of a redrive run: `redrive:<by>`. */
export function redriveActorLabel(by: string): string {
  return `redrive:${by}`.slice(0, 128);
}

/** The redrive run of a failed run, if one exists. */
async function existingRedrive(tx: Sql | TxSql, scope: 'tenant' | 'platform', runId: string): Promise<string | null> {
  const [row] = await tx<{ run_id: string }[]>`
    SELECT run_id::text FROM ${tx(scope === 'tenant' ? 'task_runs' : 'platform_task_runs')}
     WHERE causation_id = ${runId} AND trigger = 'redrive' ORDER BY queued_at LIMIT 1`;
  return row?.run_id ?? null;
}

/**
 * Redrives one failed run inside the caller's transaction (which should apply an actor context, see
 * redriveRunNow). Refuses a missing run (RUN_NOT_FOUND), a run not `failed` (RUN_NOT_FAILED) and a run
 * whose payload is gone (RUN_PAYLOAD_GONE). After commit, signal the relay (src/kv/wake.ts).
 */
export async function redriveRun(tx: TxSql, input: RedriveInput): Promise<RedriveResult> {
  const by = checkOperatorLabel(input.by);
  const { scope, run, tenantUid } = await requireRun(tx, input.runId, { forUpdate: true });
  const base = { failedRunId: run.runId, unit: run.name, queue: run.queue, tenant: tenantUid };
  if (run.status !== 'failed') {
    throw new OperateError(
      'RUN_NOT_FAILED',
      `run ${run.runId} is ${run.status}: only failed runs are redriven${run.status === 'succeeded' || run.status === 'skipped' ? '' : ' (cancel it first with svc runs cancel if it must not run)'}`,
    );
  }
  const earlier = await existingRedrive(tx, scope, run.runId);
  if (earlier) return { result: 'already_redriven', newRunId: earlier, ...base };
  const [outbox] = await tx<{ envelope: Envelope }[]>`SELECT envelope FROM ${tx(OUTBOX_TABLE[scope])} WHERE run_id = ${run.runId}`;
  const envelope = outbox?.envelope ?? (input.envelope?.run_id === run.runId ? input.envelope : undefined);
  if (!envelope) {
    throw new OperateError(
      'RUN_PAYLOAD_GONE',
      `run ${run.runId} has no outbox row any more (sent rows are purged after 7 days), so its payload is unknown here: redrive it from its dead-letter message with svc dlq redrive`,
    );
  }
  const instance = (input.instance ?? defaultInstanceLabel()).slice(0, 128);
  const created = await writeRedriveRun(tx, instance, {
    target: { name: run.name, queue: run.queue },
    kind: envelope.kind,
    payload: envelope.payload,
    tenantId: run.tenantId,
    actorLabel: redriveActorLabel(by),
    correlationId: run.correlationId,
    causationId: run.runId,
    ...(envelope.kind === 'event' && envelope.event !== undefined && envelope.version !== undefined
      ? { event: { type: envelope.event, version: envelope.version } }
      : {}),
  });
  const source = input.keySource?.(run.name, envelope.payload);
  let reopened = false;
  if (source !== undefined) {
    const ledger = scope === 'tenant' ? 'idempotency_keys' : 'platform_idempotency_keys';
    const rows = await tx`UPDATE ${tx(ledger)} SET status = 'failed_retryable', updated_at = clock_timestamp()
      WHERE idempotency_key = ${idempotencyKeyOf(run.name, source)} ${run.tenantId ? tx`AND tenant_id = ${run.tenantId}` : tx``}
        AND status = 'failed_permanent' RETURNING id`;
    reopened = rows.length > 0;
  }
  await appendTrailEvent(tx, scope, {
    runId: run.runId,
    tenantId: run.tenantId,
    event: 'redriven',
    attempt: run.attempts,
    queue: run.queue,
    workerInstance: instance,
    detail: { redrive_run_id: created.runId, by, ...(reopened ? { ledger_reopened: true } : {}) },
  });
  return { result: 'redriven', newRunId: created.runId, ...base };
}

/** redriveRun in its own unit of work (system actor `redrive:<by>`). */
export async function redriveRunNow(sql: Sql, input: RedriveInput): Promise<RedriveResult> {
  checkRunId(input.runId);
  const by = checkOperatorLabel(input.by);
  return inUnitOfWork(sql, { kind: 'system', label: redriveActorLabel(by) }, (tx) => redriveRun(tx, input));
}

export interface BulkRedriveInput {
  /** Selection: the unit, the window, an error code (status is always `failed`, not yet redriven). */
  filters: Omit<RunFilters, 'statuses' | 'notRedriven' | 'notCancelled' | 'limit'>;
  /**
   * Also select runs an operator cancelled. Default false: fixing a broken unit must not bring back
   * work a colleague cancelled; `filters.errorCode: 'CANCELLED'` asks for them by name too.
   */
  includeCancelled?: boolean;
  by: string;
  /** At most this many runs (newest first). Without it more than 1,000 matching runs are refused. */
  max?: number;
  /** Select and report; write nothing. */
  dryRun?: boolean;
  instance?: string;
  /** Business key sources of the units (see RedriveInput.keySource). */
  keySource?: KeySource;
}

/** A selected run the bulk redrive could not redrive (e.g. RUN_PAYLOAD_GONE); nothing was written for it. */
export interface RedriveRefusal {
  result: 'refused';
  failedRunId: string;
  unit: string;
  code: string;
  message: string;
}

export interface BulkRedriveOutcome {
  dryRun: boolean;
  /** The selected runs (newest first). */
  selected: RunSummary[];
  /** One per selected run, in order; empty on a dry run. */
  results: Array<RedriveResult | RedriveRefusal>;
}

/**
 * Redrives the failed, not yet redriven runs matching the filters (cancelled runs only when asked), each in its own transaction (one
 * failure leaves the others' commits). Refuses (BULK_LIMIT_EXCEEDED, nothing written) when more than
 * 1,000 runs match and no `max` is given.
 */
export async function redriveRuns(sql: Sql, input: BulkRedriveInput): Promise<BulkRedriveOutcome> {
  const by = checkOperatorLabel(input.by);
  if (input.max !== undefined && (!Number.isInteger(input.max) || input.max < 1)) {
    throw new OperateError('RUN_FILTER_INVALID', '--max must be a whole number of at least 1');
  }
  const limit = input.max ?? BULK_REDRIVE_UNCONFIRMED_MAX + 1;
  const notCancelled = !input.includeCancelled && input.filters.errorCode !== CANCELLED;
  const selected = await listRuns(sql, { ...input.filters, statuses: ['failed'], notRedriven: true, notCancelled, limit: Math.max(limit, 1) });
  if (input.max === undefined && selected.length > BULK_REDRIVE_UNCONFIRMED_MAX) {
    throw new OperateError(
      'BULK_LIMIT_EXCEEDED',
      `more than ${BULK_REDRIVE_UNCONFIRMED_MAX} failed runs match: narrow the filters or pass --max <n> to redrive at most n of them (newest first)`,
    );
  }
  if (input.dryRun) return { dryRun: true, selected, results: [] };
  const results: BulkRedriveOutcome['results'] = [];
  for (const run of selected) {
    try {
      results.push(
        await redriveRunNow(sql, { runId: run.runId, by, ...(input.instance ? { instance: input.instance } : {}), ...(input.keySource ? { keySource: input.keySource } : {}) }),
      );
    } catch (error) {
      // One run's refusal (its payload gone, a concurrent cancel…) leaves the others to be redriven.
      if (!(error instanceof OperateError)) throw error;
      results.push({ result: 'refused', failedRunId: run.runId, unit: run.unit, code: error.code, message: error.message });
    }
  }
  return { dryRun: false, selected, results };
}
