// Stage 3 of a delivery: execution. Opens the effect transaction (actor context, statement deadline,
// the key's advisory lock), registers the delivery, claims the key in the ledger, runs the handler
// and, in the same transaction, records its success. Every way out other than success goes to the
// settlement stage.
import { inUnitOfWork } from '../../db/unit-of-work.ts';
import { recordRunFinished, recordRunStarted } from '../../observe/delivery-metrics.ts';
import { traceStage } from '../../observe/work-tracing.ts';
import type { Sql, TxSql } from '../../db/client.ts';
import { jsonbTextBytes } from '../../db/jsonb-text.ts';
import { DEFAULT_HEARTBEAT_INTERVAL_MS, RUN_JSON_MAX_BYTES } from '../../config/limits.ts';
import { watchForCancel, type CancelWatch } from '../operate/cancel-watch.ts';
import { runStatusKey } from '../../kv/keys.ts';
import { advisoryKeyOf, claimKeyAndStart, recordGateResultAndEvict, type GateState } from '../idempotency.ts';
import { finishDelivery, setRunProgress, transitionRun, type RunRow } from '../run-store.ts';
import { classifyFailure, IdempotencyKeyReused, PermanentFailure, UnitTimedOut, ValidationFailure } from '../unit-errors.ts';
import type { UnitOutcome, UnitRun } from '../unit.ts';
import {
  actorSettingsOf,
  cacheTtlOf,
  evict,
  fitOutcome,
  HeldElsewhere,
  isPlainObject,
  ledgerScope,
  releaseOwnGate,
  ReleasedOnShutdown,
  RunMovedOn,
  trail,
  type DeliveryContext,
  type DeliveryResult,
  type Failure,
} from './context.ts';
import { register, type Registration } from './registration.ts';
import { guardRunTransaction, RunTransactionClosed, type RunTransactionGuard } from './run-transaction.ts';
import { signalOutbox } from '../../kv/wake.ts';
import { createFollowUps, type FollowUps } from '../follow-up.ts';
import { release, settleFailure, settleRegistration } from './settlement.ts';
import { raceAbort } from './race-abort.ts';

/**
 * Opens the effect transaction first and takes the key's advisory lock in it, then registers the
 * delivery in its own transaction, then runs the handler in the effect transaction. Holding the lock
 * from before registration to the end of the effect leaves no window in which a concurrent duplicate
 * could register a second attempt (each slot holds at most these two transactions at once).
 */
export async function deliver(c: DeliveryContext, early: Failure | null, gate: GateState, payload: unknown, leaseMs: number): Promise<DeliveryResult> {
  const { deps, scope, tenantId, port } = c;
  const unit = c.unit;
  const controller = new AbortController();
  // run.transaction as the handler holds it: closed on abort (timeout, release) before the rollback is
  // sent, and when the handler returns or the scope ends, so no late statement reaches the database.
  let handlerTx: RunTransactionGuard | null = null;
  controller.signal.addEventListener('abort', () => handlerTx?.close(), { once: true });
  const timeoutMs = (unit?.timeoutSeconds ?? 60) * 1000;
  let timer: NodeJS.Timeout | undefined;
  // Polls for an operator's cancel while the handler runs (src/work/operate/cancel-watch.ts).
  let cancelWatch: CancelWatch | undefined;
  // The effect transaction's backend while it is open: a release cancels its current statement, or
  // the ROLLBACK would queue behind a handler statement (pg_sleep, a lock wait) past the stop budget.
  let effectBackend: EffectBackend | null = null;
  const onRelease = () => {
    controller.abort(new ReleasedOnShutdown());
    if (effectBackend) {
      cancelStatement(deps.sql, effectBackend).catch((error: unknown) => c.log.warn({ err: error }, 'could not cancel the statement of a released run'));
    }
  };
  let registration: Registration | undefined;
  let evicted: Promise<void> = Promise.resolve();
  let startedAt: string | null = null;
  let followUps: FollowUps | undefined; // run.dispatch/run.publish (issue 14): their rows commit with the effect
  const needsLock = Boolean(c.key) && !early && gate.state !== 'held' && gate.state !== 'completed';
  try {
    const result = await deps.sql.begin(async (tx) => {
      try {
        return await effect(tx);
      } finally {
        handlerTx?.close();
      }
    });
    async function effect(tx: TxSql) {
      // One statement: the actor context (as inUnitOfWork), the deadline of every statement of this
      // transaction (a handler statement cannot outlive the unit's timeout even if the handler ignores
      // the signal) and the key's advisory lock.
      const settings = actorSettingsOf(c.actor);
      const [opened] = await tx<{ locked: boolean; pid: number; xact_start: string }[]>`
        SELECT set_config('app.tenant_id', ${settings.tenantId}, true), set_config('app.user_id', ${settings.userId}, true),
               set_config('app.process', ${settings.process}, true), set_config('statement_timeout', ${String(timeoutMs)}, true),
               ${needsLock ? tx`pg_try_advisory_xact_lock(${advisoryKeyOf(c.key!)}::bigint)` : tx`true`} AS locked,
               pg_backend_pid() AS pid, (extract(epoch FROM now()) * 1000000)::int8::text AS xact_start`;
      effectBackend = { pid: opened!.pid, xactStart: opened!.xact_start };
      registration = await traceStage('registration', c.envelope.name, () => register(c, early, gate, opened!.locked, leaseMs)); // span (src/observe)
      if (registration.kind !== 'execute') return null;
      recordRunStarted(registration.run, registration.attempt); // svc_run_pickup_seconds (src/observe)
      // Not awaited: later Redis commands of this delivery go down the same connection after it.
      evicted = evict(c);
      const { run, attempt, scheduledFor } = registration;
      // The deadline starts with the execution; a release on shutdown aborts it too.
      timer = setTimeout(() => controller.abort(new UnitTimedOut(unit!.name, unit!.timeoutSeconds)), timeoutMs);
      cancelWatch = watchForCancel({
        sql: deps.sql,
        scope,
        run: { runId: run.runId, tenantId },
        intervalMs: deps.cancelCheckIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS,
        // As a release: abort the handler and cancel its statement; settlement then finds the run failed and acks.
        onCancel: (reason) => {
          controller.abort(reason);
          if (effectBackend) cancelStatement(deps.sql, effectBackend).catch((error: unknown) => c.log.warn({ err: error }, 'could not cancel the statement of a cancelled run'));
        },
        onError: (error) => c.log.warn({ err: error }, 'could not check whether the run was cancelled'),
      });
      if (deps.releaseSignal?.aborted) onRelease();
      else deps.releaseSignal?.addEventListener('abort', onRelease, { once: true });
      controller.signal.throwIfAborted();
      const claim = await claimKeyAndStart(tx, ledgerScope(c), c.key!, c.fingerprint!, leaseMs, {
        runId: run.runId,
        attempt,
        receiveCount: c.delivery.receiveCount,
        queue: run.queue,
        workerInstance: deps.workerInstance,
      });
      if (claim.kind === 'reused') throw new IdempotencyKeyReused(unit!.name);
      if (claim.kind === 'failed_permanent') {
        throw new PermanentFailure('IDEMPOTENCY_FAILED_PERMANENTLY', `an earlier execution with this idempotency key of '${unit!.name}' failed permanently`);
      }
      if (claim.kind === 'held') throw new HeldElsewhere();
      if (claim.kind === 'completed') {
        const replayed = await transitionRun(tx, scope, { runId: run.runId, tenantId, to: 'succeeded', from: ['running'], outcome: fitOutcome(claim.outcome), progress: 100 });
        if (!replayed) throw new RunMovedOn();
        await trail(tx, c, run, 'succeeded', attempt, { detail: { replayed: true }, occurredAt: 'run_finished' });
        return { replayed: true, outcome: claim.outcome };
      }
      if (claim.startedAt !== undefined) {
        startedAt = claim.startedAt; // `started` was written with the claim
      } else {
        const [clock] = await tx<{ at: string }[]>`SELECT clock_timestamp()::text AS at`;
        startedAt = clock!.at;
        await trail(tx, c, run, 'started', attempt);
      }
      const guarded = guardRunTransaction(tx);
      handlerTx = guarded;
      if (controller.signal.aborted) guarded.close();
      followUps = createFollowUps({ tx: guarded.tx, runId: run.runId, correlationId: run.correlationId, tenantId, units: deps.units, instance: deps.workerInstance });
      const runObject: UnitRun = {
        runId: run.runId,
        name: unit!.name,
        attempt,
        scheduledFor,
        tenantId,
        correlationId: run.correlationId,
        async now() {
          const [row] = await deps.sql<{ ms: number }[]>`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms`;
          return new Date(row!.ms);
        },
        logger: c.log.child({ attempt }),
        progress: (percent: number) => reportProgress(c, guarded, run, attempt, percent),
        transaction: guarded.tx,
        signal: controller.signal,
        ...followUps.api,
      };
      const handling = traceStage('handler', unit!.name, async () => unit!.handler(payload as never, runObject)); // span (src/observe)
      const returned = await raceAbort(handling, controller.signal);
      guarded.close();
      const outcome = returned === undefined ? {} : returned;
      if (!isPlainObject(outcome)) throw new ValidationFailure(`handler of '${unit!.name}' must return a JSON object or nothing`);
      // Measured as the CHECK measures it (octet_length(outcome::text) of the jsonb), not compact JSON.
      if (jsonbTextBytes(outcome) > RUN_JSON_MAX_BYTES) {
        throw new ValidationFailure(`handler of '${unit!.name}' returned an outcome over ${RUN_JSON_MAX_BYTES} bytes`);
      }
      // Ledger `completed`, run `succeeded`, trail `succeeded`: one statement, committed with the effect.
      // Not awaited here, so COMMIT goes out in the same write right behind it (one round trip, not two).
      // If it fails, the transaction is aborted and that COMMIT rolls back: the rejection is awaited
      // below, after sql.begin returns, and takes the failure path exactly as a throw in here would.
      const finished = finishDelivery(tx, scope, {
        runId: run.runId,
        tenantId,
        attempt,
        receiveCount: c.delivery.receiveCount,
        queue: run.queue,
        workerInstance: deps.workerInstance,
        outcome: outcome as Record<string, unknown>,
        ledger: { key: c.key!, retentionMs: deps.retentionMs },
      });
      finished.catch(() => {}); // observed below
      return { replayed: false, outcome: outcome as UnitOutcome, finished };
    }
    effectBackend = null;
    cancelWatch?.stop();
    if (result?.finished) await result.finished;
    clearTimeout(timer);
    deps.releaseSignal?.removeEventListener('abort', onRelease);
    if (result) {
      if (!result.replayed && followUps?.wrote()) await signalOutbox(deps.redis); // after commit, once per attempt
      await evicted;
      await recordGateResultAndEvict(deps.redis, runStatusKey(c.envelope.run_id), c.gateKey, c.fingerprint, result.outcome, cacheTtlOf(deps));
      await port.ack();
      if (registration?.kind === 'execute') recordRunFinished(registration.run, 'succeeded'); // svc_runs_finished_total, svc_run_duration_seconds (src/observe)
      return result.replayed ? 'replayed' : 'succeeded';
    }
  } catch (error) {
    effectBackend = null;
    cancelWatch?.stop();
    clearTimeout(timer);
    deps.releaseSignal?.removeEventListener('abort', onRelease);
    await evicted;
    if (registration?.kind !== 'execute') throw error; // the registration itself failed: the consumer retries
    const { run, attempt } = registration;
    if (error instanceof HeldElsewhere) {
      await releaseOwnGate(c);
      await port.retryAfter(Math.max(1, Math.ceil(leaseMs / 1000)));
      return 'held';
    }
    if (error instanceof ReleasedOnShutdown || controller.signal.reason instanceof ReleasedOnShutdown) {
      return traceStage('settlement', c.envelope.name, () => release(c, run, attempt, startedAt)); // span (src/observe)
    }
    // A statement cancelled by our own deadline reports as a query error: the timeout is the cause.
    const cause = controller.signal.aborted ? controller.signal.reason : error;
    return traceStage('settlement', c.envelope.name, () => settleFailure(c, run, classifyFailure(cause), startedAt, attempt)); // span (src/observe)
  }
  return traceStage('settlement', c.envelope.name, () => settleRegistration(c, registration!, early)); // span (src/observe)
}

interface EffectBackend {
  pid: number;
  /** now() of the effect transaction in epoch microseconds: the cancel hits only that transaction, never a later user of the connection. */
  xactStart: string;
}

/** Cancels the current statement of the effect transaction (on another connection; no-op once it ended). */
async function cancelStatement(sql: Sql, backend: EffectBackend): Promise<void> {
  await sql`SELECT pg_cancel_backend(pid) FROM pg_stat_activity
             WHERE pid = ${backend.pid} AND (extract(epoch FROM xact_start) * 1000000)::int8 = ${backend.xactStart}::text::int8`;
}

/** progress(percent): its own short transaction (status row + `progress` event), cache evicted. */
async function reportProgress(c: DeliveryContext, handlerTx: RunTransactionGuard, run: RunRow, attempt: number, percent: number): Promise<void> {
  if (!handlerTx.open) throw new RunTransactionClosed();
  if (!Number.isFinite(percent) || percent < 0 || percent > 100) {
    throw new ValidationFailure(`progress must be a number from 0 to 100, got ${String(percent)}`);
  }
  const value = Math.round(percent);
  await inUnitOfWork(c.deps.sql, c.actor, async (tx) => {
    if (await setRunProgress(tx, c.scope, { runId: run.runId, tenantId: c.tenantId }, value)) {
      await trail(tx, c, run, 'progress', attempt, { detail: { percent: value } });
    }
  });
  await evict(c);
}

