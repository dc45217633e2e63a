// Stage 4 of a delivery: settlement. A success has its result copied to Redis and its message
// deleted; a transient failure schedules a retry with backoff, a permanent one (or the last receive)
// fails the run and dead-letters its message, a release on shutdown puts the run back in the queue,
// and a delivery that did not execute is settled by what its registration found. A settlement never
// overrides another delivery's (RunMovedOn).
import { recordRunFinished, recordRunMetFinal } from '../../../observe/delivery-metrics.ts';
import { inUnitOfWork } from '../../../db/unit-of-work.ts';
import type { TxSql } from '../../../db/client.ts';
import { backoffSeconds, clampToReceipt, retryDelaySeconds } from './backoff.ts';
import { failKey, readKey, recordGateResult, recordGateResultsAndEvict, type GateResult } from '../store/idempotency.ts';
import { runStatusKey } from '../../../kv/keys.ts';
import { signalOutbox, signalRoom } from '../../../kv/wake.ts';
import { traceStage } from '../../../observe/work-tracing.ts';
import { classifyFailure } from '../../define/unit-errors.ts';
import type { UnitOutcome } from '../../define/unit.ts';
import { countAttempt, FINAL_RUN_STATUSES, readRun, transitionRun, type RunRow } from '../store/run-store.ts';
import {
  cacheTtlOf,
  deadLetterContext,
  evict,
  HeldElsewhere,
  ledgerScope,
  releaseOwnGate,
  ReleasedOnShutdown,
  RunMovedOn,
  trail,
  type DeliveryContext,
  type RunnerDeps,
  type DeliveryResult,
  type Failure,
} from '../execute/context.ts';
import type { Registration } from '../execute/registration.ts';
import { cancelledStartInstant, wasCancelled } from './cancellation.ts';
import { failedOutcome } from './failure-outcome.ts';
import { rateLimitDelaySeconds } from '../execute/rate-window.ts';
import { finalDeliveryNote } from './final-delivery.ts';

/**
 * After the effect committed: its place in the consumer is given back at once (nothing left of the
 * delivery runs unit code, and its effect connection is the pool's again or about to be), the relay
 * is woken once if the handler wrote follow-ups, the result is in Redis with the status cache evicted
 * (`recorded`: recordResults of this delivery, or of its whole group commit), and the message is deleted.
 */
export async function settleSuccess(
  c: DeliveryContext,
  run: RunRow,
  done: { outcome: UnitOutcome; replayed: boolean; followUpsSince: number | null },
  recorded: Promise<void>,
): Promise<DeliveryResult> {
  c.port.handlerReturned?.();
  if (!done.replayed && done.followUpsSince !== null) await signalOutbox(c.deps.redis, { since: done.followUpsSince }); // after commit, once per attempt
  await recorded;
  await c.port.ack();
  recordRunFinished(run, 'succeeded'); // svc_runs_finished_total, svc_run_duration_seconds (src/observe)
  return done.replayed ? 'replayed' : 'succeeded';
}

/** What a committed success writes to Redis: its run's cached status evicted, its result in its gate. */
export function gateResultOf(c: DeliveryContext, outcome: UnitOutcome): GateResult {
  return { evictKey: runStatusKey(c.envelope.run_id), gateKey: c.gateKey, fingerprint: c.fingerprint, outcome };
}

/**
 * After the commit of one or more successes: once the eviction sent at their registration is done
 * (`evicted`), every result copied to its gate and every cached status evicted again, in one pipeline,
 * and, with fairness on, a relay waiting for room woken (its runs left flight), in the same write when
 * auto-pipelined.
 */
export async function recordResults(deps: RunnerDeps, evicted: Promise<void>, results: readonly GateResult[]): Promise<void> {
  await evicted;
  await Promise.all([recordGateResultsAndEvict(deps.redis, results, cacheTtlOf(deps)), deps.roomSignals ? signalRoom(deps.redis) : undefined]);
}

/**
 * An executing attempt whose effect rolled back (`error` is why; `reason`, when set, is the abort
 * reason of its signal, which wins: a statement cancelled by our own deadline reports as a query
 * error). A key held by another execution waits its turn, a release puts the run back in the queue,
 * anything else is a failure of the attempt.
 */
export async function settleExecuted(
  c: DeliveryContext,
  run: RunRow,
  attempt: number,
  error: unknown,
  reason: unknown,
  startedAt: string | null,
  leaseMs: number,
): Promise<DeliveryResult> {
  if (error instanceof HeldElsewhere) {
    await releaseOwnGate(c);
    await c.port.retryAfter(Math.max(1, Math.ceil(leaseMs / 1000)));
    return 'held';
  }
  if (error instanceof ReleasedOnShutdown || reason instanceof ReleasedOnShutdown) {
    return traceStage('settlement', c.envelope.name, () => release(c, run, attempt, startedAt)); // span (src/observe)
  }
  const cause = reason ?? error;
  return traceStage('settlement', c.envelope.name, () => settleFailure(c, run, classifyFailure(cause), startedAt, attempt)); // span (src/observe)
}

/** Settles a delivery that did not execute (finished run, held key, replay, early failure, no run). */
export async function settleRegistration(c: DeliveryContext, registration: Registration, early: Failure | null): Promise<DeliveryResult> {
  const { deps, port } = c;
  if (registration.kind !== 'held' && registration.kind !== 'rate_full') await evict(c);
  switch (registration.kind) {
    case 'missing': {
      await releaseOwnGate(c);
      c.log.error('the run of this message does not exist: dead-lettered');
      await port.deadLetter(deadLetterContext(c, { code: 'RUN_NOT_FOUND', type: 'NotFoundFailure', message: 'no run row matches the message', permanent: true }));
      await port.ack();
      return 'failed';
    }
    case 'final': {
      // A late duplicate of a finished run. Repopulate the gate from the ledger when Redis lacked it.
      if (registration.run.status === 'succeeded' && c.key && c.gateToken) {
        const row = await readKey(deps.sql, ledgerScope(c), c.key);
        if (row?.status === 'completed') await recordGateResult(deps.redis, c.gateKey!, row.fingerprint, row.outcome, cacheTtlOf(deps));
        else await releaseOwnGate(c);
      } else {
        await releaseOwnGate(c);
      }
      // A cancelled run's message is acknowledged, never dead-lettered; a dead-lettered run's message that came back is logged.
      const note = finalDeliveryNote(registration.run, registration.deadLettered);
      if (note.warning) c.log.warn({ status: registration.run.status }, note.warning);
      if (registration.run.status === 'failed' && !registration.deadLettered && !wasCancelled(registration.run)) {
        const f: Failure = { code: 'RUN_FAILED', type: 'RunFailed', message: 'the run had failed before its message was dead-lettered', permanent: true };
        await deadLetter(c, registration.run, f);
      }
      await port.ack();
      recordRunMetFinal(registration.run); // svc_runs_finished_total{status="cancelled"} (src/observe)
      return 'settled';
    }
    case 'held':
      await releaseOwnGate(c);
      await port.retryAfter(Math.max(1, Math.ceil(registration.retryAfterMs / 1000)));
      return 'held';
    case 'rate_full':
      // Nothing of the delivery was recorded: it goes back until the window has room, keeping its receives.
      await releaseOwnGate(c);
      await port.waitTurn(rateLimitDelaySeconds(registration.waitMs));
      return 'held';
    case 'replayed':
      await port.ack();
      recordRunFinished(registration.run, 'succeeded'); // svc_runs_finished_total, svc_run_duration_seconds (src/observe)
      return 'replayed';
    case 'early':
      return settleFailure(c, registration.run, early!, null, registration.run.attempts);
    case 'execute':
      throw new Error('unreachable: an executed delivery settles in deliver()');
  }
}

/** The `started` event of a rolled-back attempt is recorded again, so the trail shows every attempt. */
async function rememberStart(tx: TxSql, c: DeliveryContext, run: RunRow, attempt: number, startedAt: string | null): Promise<void> {
  if (startedAt !== null) await trail(tx, c, run, 'started', attempt, { detail: { startedAt, effect: 'rolled_back' }, occurredAt: startedAt });
}

/**
 * The run left `running` under this attempt. When an operator's cancel moved it (its `failed` ends
 * the attempt), the attempt's `started`, written in the effect transaction the cancel rolled back, is
 * recorded here as any rolled-back attempt's, so the trail shows that the handler ran. Anyone else's
 * settlement recorded this attempt's end itself: nothing is written.
 */
async function rememberCancelledStart(tx: TxSql, c: DeliveryContext, run: RunRow, attempt: number, startedAt: string | null): Promise<void> {
  if (startedAt === null) return;
  const at = await cancelledStartInstant(tx, c.scope, { runId: run.runId, tenantId: c.tenantId }, attempt, startedAt);
  if (at !== null) await trail(tx, c, run, 'started', attempt, { detail: { startedAt, effect: 'rolled_back', cancelled: true }, occurredAt: at });
}

/**
 * A group member whose registration was deferred to its group's finish (group-execution.ts), whose run
 * was settled by someone else (an operator's cancel) before that registration was written: the attempt
 * is counted and its `received` and rolled-back `started` recorded at their instants, so the trail
 * shows that its handler ran. The other settlement stands (settleMovedOn follows).
 */
export async function recordMovedOnAttempt(c: DeliveryContext, receivedAt: string, startedAt: string | null): Promise<void> {
  const counted = await inUnitOfWork(c.deps.sql, c.actor, async (tx) => {
    const run = await countAttempt(tx, c.scope, { runId: c.envelope.run_id, tenantId: c.tenantId });
    if (!run) return false;
    await trail(tx, c, run, 'received', run.attempts, { occurredAt: receivedAt });
    await rememberStart(tx, c, run, run.attempts, startedAt);
    return true;
  });
  // Its attempts changed: a status a poller cached after the cancel is stale.
  if (counted) await evict(c);
}

/**
 * A delivery given back before its turn came (the worker stopped while it waited for its unit's slot):
 * nothing of it was written, so only its gate is released and its message goes back at once, without
 * spending the receive.
 */
export async function giveBackUnstarted(c: DeliveryContext): Promise<DeliveryResult> {
  await releaseOwnGate(c);
  await c.port.giveBack();
  return 'released';
}

export async function release(c: DeliveryContext, run: RunRow, attempt: number, startedAt: string | null): Promise<DeliveryResult> {
  const released = await inUnitOfWork(c.deps.sql, c.actor, async (tx) => {
    if (!(await transitionRun(tx, c.scope, { runId: run.runId, tenantId: c.tenantId, to: 'queued', from: ['running'] }))) {
      await rememberCancelledStart(tx, c, run, attempt, startedAt);
      return false;
    }
    await rememberStart(tx, c, run, attempt, startedAt);
    await trail(tx, c, run, 'released_on_shutdown', attempt);
    return true;
  });
  if (!released) return settleMovedOn(c, 0);
  await evict(c);
  await releaseOwnGate(c);
  await c.port.retryAfter(0);
  c.log.warn('released on shutdown: the message is visible again');
  return 'released';
}

export async function settleFailure(c: DeliveryContext, run: RunRow, f: Failure, startedAt: string | null, attempt: number): Promise<DeliveryResult> {
  const exhausted = c.delivery.receiveCount >= c.maxReceives;
  const errorFields = { errorCode: f.code, errorType: f.type };
  if (!f.permanent && !exhausted) {
    const delaySeconds = retryDelayOf(c);
    const moved = await voidIfMovedOn(c, async (tx) => {
      // running → retrying only: a run another delivery already settled keeps its settlement.
      if (!(await transitionRun(tx, c.scope, { runId: run.runId, tenantId: c.tenantId, to: 'retrying', from: ['running'] }))) {
        await rememberCancelledStart(tx, c, run, attempt, startedAt);
        return 'moved';
      }
      if (c.key) await failKey(tx, ledgerScope(c), c.key, c.fingerprint!, 'failed_retryable', c.deps.retentionMs);
      await rememberStart(tx, c, run, attempt, startedAt);
      await trail(tx, c, run, 'retry_scheduled', attempt, { ...errorFields, detail: { message: f.message, retryInSeconds: delaySeconds } });
    });
    if (moved) return settleMovedOn(c, delaySeconds);
    await evict(c);
    await releaseOwnGate(c);
    const applied = await retryAfterOrFallBack(c, run, attempt, delaySeconds);
    c.log.warn({ code: f.code, retryInSeconds: applied }, 'transient failure: retry scheduled');
    return 'retrying';
  }
  const reuse = f.code === 'IDEMPOTENCY_KEY_REUSED';
  const moved = await voidIfMovedOn(c, async (tx) => {
    // running → failed only (an early failure or the fifth receive made the run `running` first).
    // The outcome says why, publicly (src/work/runtime/complete/failure-outcome.ts).
    if (!(await transitionRun(tx, c.scope, { runId: run.runId, tenantId: c.tenantId, to: 'failed', from: ['running'], outcome: failedOutcome(f) }))) {
      await rememberCancelledStart(tx, c, run, attempt, startedAt);
      return 'moved';
    }
    // A reused key belongs to another request: its ledger row is left as it is.
    if (c.key && !reuse) await failKey(tx, ledgerScope(c), c.key, c.fingerprint!, 'failed_permanent', c.deps.retentionMs);
    await rememberStart(tx, c, run, attempt, startedAt);
    await trail(tx, c, run, 'failed', attempt, {
      ...errorFields,
      occurredAt: 'run_finished',
      detail: { message: f.message, permanent: f.permanent, receivesExhausted: exhausted && !f.permanent },
    });
  });
  if (moved) return settleMovedOn(c, retryDelayOf(c));
  await evict(c);
  await releaseOwnGate(c);
  await deadLetter(c, run, f, attempt);
  await c.port.ack();
  recordRunFinished(run, 'failed'); // svc_runs_finished_total, svc_run_duration_seconds (src/observe)
  c.log.error({ code: f.code }, 'permanent failure: run failed, message dead-lettered');
  return 'failed';
}

/**
 * The delay of this delivery's retry, in whole seconds: the unit's backoff, clamped to what the queue
 * accepts for this message (its visibility reaches 12 h past its receipt at most, src/work/runtime/complete/backoff.ts).
 */
function retryDelayOf(c: DeliveryContext): number {
  const delay = retryDelaySeconds(c.unit, c.delivery.receiveCount, c.deps.backoff);
  return clampToReceipt(delay, c.delivery.receivedAtMs === undefined ? undefined : performance.now() - c.delivery.receivedAtMs);
}

/** The queue refused the visibility change itself (its value), not a failure to reach it. */
function refusedVisibility(error: unknown): boolean {
  const e = error as { name?: unknown; Code?: unknown; message?: unknown } | null;
  return /InvalidParameterValue/.test(`${String(e?.name)} ${String(e?.Code)}`) || /VisibilityTimeout/.test(String(e?.message));
}

/**
 * Makes the message visible again after `delaySeconds`. Should the queue refuse that delay anyway (its
 * reckoning of the message's 12 h differs from ours: some count them from the send), the runtime's
 * default backoff for this receive is used instead, at most the refused delay, and 0 if that is refused
 * too; a second `retry_scheduled` row then says what was refused and what was applied. Returns the
 * delay applied.
 */
async function retryAfterOrFallBack(c: DeliveryContext, run: RunRow, attempt: number, delaySeconds: number): Promise<number> {
  try {
    await c.port.retryAfter(delaySeconds);
    return delaySeconds;
  } catch (error) {
    if (delaySeconds === 0 || !refusedVisibility(error)) throw error;
    let applied = Math.min(delaySeconds - 1, backoffSeconds(c.delivery.receiveCount, c.deps.backoff));
    try {
      await c.port.retryAfter(applied);
    } catch (again) {
      if (applied === 0 || !refusedVisibility(again)) throw again;
      applied = 0;
      await c.port.retryAfter(0);
    }
    c.log.warn({ refusedSeconds: delaySeconds, retryInSeconds: applied }, 'the queue refused the retry delay: a shorter one was applied');
    await inUnitOfWork(c.deps.sql, c.actor, (tx) =>
      trail(tx, c, run, 'retry_scheduled', attempt, {
        detail: { fallback: true, refusedSeconds: delaySeconds, retryInSeconds: applied, queueMessage: String((error as Error).message ?? '').slice(0, 200) },
      }),
    );
    return applied;
  }
}

/**
 * Runs a settling unit of work; true when it found the run no longer running: it returned 'moved'
 * (committing only what it wrote for the attempt's trail) or threw RunMovedOn (nothing written).
 */
async function voidIfMovedOn(c: DeliveryContext, work: (tx: TxSql) => Promise<void | 'moved'>): Promise<boolean> {
  try {
    return (await inUnitOfWork(c.deps.sql, c.actor, work)) === 'moved';
  } catch (error) {
    if (error instanceof RunMovedOn) return true;
    throw error;
  }
}

/**
 * This delivery's run was settled (or released, or retried) by another delivery meanwhile: that
 * settlement stands and nothing is written for this one. A finished run's message is deleted; a
 * run still active comes back with its message, whose next delivery sorts it out.
 */
export async function settleMovedOn(c: DeliveryContext, retryInSeconds: number): Promise<DeliveryResult> {
  await releaseOwnGate(c);
  const run = await inUnitOfWork(c.deps.sql, c.actor, (tx) => readRun(tx, c.scope, { runId: c.envelope.run_id, tenantId: c.tenantId }));
  c.log.warn({ status: run?.status }, 'the run left running under this delivery: its own settlement stands');
  if (!run || FINAL_RUN_STATUSES.has(run.status)) {
    await c.port.ack();
    if (run) recordRunMetFinal(run); // svc_runs_finished_total{status="cancelled"} (src/observe)
    return 'settled';
  }
  await c.port.retryAfter(retryInSeconds);
  return 'held';
}

async function deadLetter(c: DeliveryContext, run: RunRow, f: Failure, attempt = run.attempts): Promise<void> {
  await c.port.deadLetter(deadLetterContext(c, f));
  await inUnitOfWork(c.deps.sql, c.actor, async (tx) => {
    await trail(tx, c, run, 'dead_lettered', attempt, { errorCode: f.code, errorType: f.type });
  });
}
