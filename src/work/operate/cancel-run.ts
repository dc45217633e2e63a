// Cancel of a run (`svc runs cancel`, a future admin route). A cancelled run ends `failed` with error
// code CANCELLED (no new status value): its outcome says so, and its trail gets `failed` with who
// cancelled and why.
//
// - queued or retrying: the run is failed at once. Its message, when it arrives, meets a final run
//   and is acknowledged without running (the runner's `final` registration).
// - running: the same transition, written while the worker's effect transaction is still open. The
//   cancel locks the run row FOR NO KEY UPDATE, which does not wait for the KEY SHARE locks the effect
//   transaction holds through its trail rows' foreign keys, so the cancel commits at once. Its
//   NOTIFY (cancel-notices.ts), delivered at that commit, makes the worker read the run at once; its
//   heartbeat poll (cancel-watch.ts) is the fallback. The worker aborts `run.signal` with
//   RunCancelled and cancels its current statement; the effect transaction rolls back, and its
//   settlement finds the run no longer `running`, so it records only the rolled-back attempt's
//   `started` (the handler did run) and acknowledges the message. Should the handler finish before the
//   worker hears, its finishing statement is guarded (running → succeeded only) and fails, which rolls
//   the effect back just the same. No retry either way.
// - already cancelled: reported again (idempotent). Succeeded, skipped or failed otherwise: refused.
//
// A queued run's outbox row still pending is withdrawn in the same transaction (its `sent_at` set, no
// `sent` on the trail; the `failed` event says `outbox_withdrawn`): the relay never sends it, it no
// longer counts as pending, and purge deletes it after the retention. A row a relay pass holds locked
// right now is left to that pass (SKIP LOCKED: the cancel never waits for a send, and never holds the
// run's lock while waiting for the row's, which the relay takes in the other order): sent, its message
// meets a final run; refused, the relay gives it up because its run is final (src/work/runtime/produce/relay.ts).
import type { Sql, TxSql } from '../../db/client.ts';
import { inUnitOfWork } from '../../db/unit-of-work.ts';
import { defaultInstanceLabel } from '../runtime/produce/dispatch.ts';
import { FINAL_RUN_STATUSES, readRun, transitionRun, type RunKey, type RunStatus } from '../runtime/store/run-store.ts';
import { OUTBOX_TABLE, RUN_TABLE } from '../runtime/store/scope-tables.ts';
import { appendTrailEvent } from '../runtime/store/trail.ts';
import { CANCELLED, isCancelledOutcome, RunCancelled, isRunCancelled, wasCancelled } from '../runtime/complete/cancellation.ts';
import { failedOutcome } from '../runtime/complete/failure-outcome.ts';
import { notifyCancelled } from '../runtime/execute/cancel-notices.ts';
import { requireRun } from './find-run.ts';
import { checkOperatorLabel, checkRunId, OperateError } from './operate-error.ts';

export interface CancelInput {
  runId: string;
  /** Who cancels (`--by`), recorded on the trail. */
  by: string;
  /** Why (`--reason`), recorded on the trail; at most 500 characters. */
  reason?: string;
  /** Names this process on the trail. Default `<hostname>:<pid>`. */
  instance?: string;
}

export interface CancelResult {
  result: 'cancelled' | 'already_cancelled';
  runId: string;
  /** Status the run had when this cancel found it. */
  previousStatus: RunStatus;
  unit: string;
  /** Tenant uid, null for a platform run. */
  tenant: string | null;
}

/** Cancels one run inside the caller's transaction (see cancelRunNow for its own unit of work). */
export async function cancelRun(tx: TxSql, input: CancelInput): Promise<CancelResult> {
  const by = checkOperatorLabel(input.by);
  const reason = (input.reason ?? '').trim();
  if (reason.length > 500) throw new OperateError('RUN_FILTER_INVALID', '--reason must be at most 500 characters');
  const found = await requireRun(tx, input.runId);
  const { scope, tenantUid } = found;
  const key: RunKey = { runId: found.run.runId, tenantId: found.run.tenantId };
  // NO KEY UPDATE: the open effect transaction of a running run holds KEY SHARE on it; FOR UPDATE would wait for it to end.
  await tx`SELECT 1 FROM ${tx(RUN_TABLE[scope])} WHERE run_id = ${key.runId} FOR NO KEY UPDATE`;
  const run = (await readRun(tx, scope, key))!;
  const base = { runId: run.runId, previousStatus: run.status, unit: run.name, tenant: tenantUid };
  if (run.status === 'failed' && isCancelledOutcome(run.outcome)) return { result: 'already_cancelled', ...base };
  if (FINAL_RUN_STATUSES.has(run.status)) {
    throw new OperateError('RUN_ALREADY_FINAL', `run ${run.runId} is already ${run.status}: a finished run cannot be cancelled`);
  }
  const message = `cancelled by ${by}${reason ? `: ${reason}` : ''}`;
  await transitionRun(tx, scope, {
    ...key,
    to: 'failed',
    from: ['queued', 'running', 'retrying'],
    outcome: failedOutcome({ code: CANCELLED, type: 'RunCancelled', message }),
  });
  // Sent at commit to the workers' listeners; a handler may run even for a `queued` run (a group member
  // whose registration waits for its group's finish), so every cancel notifies.
  await notifyCancelled(tx, key.runId);
  const outbox = OUTBOX_TABLE[scope];
  const withdrawn = await tx`UPDATE ${tx(outbox)} SET sent_at = clock_timestamp() WHERE id IN (
      SELECT id FROM ${tx(outbox)} WHERE run_id = ${key.runId} AND sent_at IS NULL FOR UPDATE SKIP LOCKED) RETURNING id`;
  await appendTrailEvent(tx, scope, {
    ...key,
    event: 'failed',
    attempt: run.attempts,
    queue: run.queue,
    workerInstance: (input.instance ?? defaultInstanceLabel()).slice(0, 128),
    errorCode: CANCELLED,
    errorType: 'RunCancelled',
    // The final event carries the run's finished_at exactly, as every settlement's does (causal trail order).
    occurredAt: 'run_finished',
    detail: { cancelled_by: by, reason, previous_status: run.status, ...(withdrawn.length > 0 ? { outbox_withdrawn: true } : {}) },
  });
  return { result: 'cancelled', ...base };
}

/** cancelRun in its own unit of work (system actor `cancel:<by>`). Evict the run-status cache after it. */
export async function cancelRunNow(sql: Sql, input: CancelInput): Promise<CancelResult> {
  checkRunId(input.runId);
  const by = checkOperatorLabel(input.by);
  return inUnitOfWork(sql, { kind: 'system', label: `cancel:${by}`.slice(0, 128) }, (tx) => cancelRun(tx, input));
}

export { CANCELLED, RunCancelled, isRunCancelled, wasCancelled };
