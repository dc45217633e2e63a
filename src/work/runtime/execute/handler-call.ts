// The handler's call inside the effect transaction, shared by a delivery that has the transaction to
// itself (execution.ts) and by the members of a group commit (group-commit.ts): the guarded
// `run.transaction`, the follow-ups, the `run` object, the call raced against the attempt's signal
// and the check of what the handler returned.
import { inUnitOfWork } from '../../../db/unit-of-work.ts';
import type { TxSql } from '../../../db/client.ts';
import { jsonbTextBytes } from '../../../db/jsonb-text.ts';
import { RUN_JSON_MAX_BYTES } from '../../../config/limits.ts';
import { traceStage } from '../../../observe/work-tracing.ts';
import { createFollowUps, type FollowUps } from '../produce/follow-up.ts';
import { setRunProgress, type RunRow } from '../store/run-store.ts';
import { ValidationFailure } from '../../define/unit-errors.ts';
import type { UnitOutcome, UnitRun, WorkUnit } from '../../define/unit.ts';
import { evict, isPlainObject, trail, type DeliveryContext } from './context.ts';
import { raceAbort } from './race-abort.ts';
import { withoutStageBounds } from '../../../db/stage-deadline.ts';
import { guardRunTransaction, RunTransactionClosed, type RunTransactionGuard } from './run-transaction.ts';

export interface HandlerCall {
  run: RunRow;
  attempt: number;
  scheduledFor: string | null;
  payload: unknown;
  /** Aborted by the attempt's deadline, a release on shutdown or an operator's cancel. */
  signal: AbortSignal;
  /** Called once, just before the handler's first statement on `run.transaction` (or a follow-up's) is sent. */
  beforeFirstStatement?: () => void;
  /** Awaited before each progress() writes (a group member whose registration was deferred registers first). */
  beforeProgress?: () => Promise<void>;
}

export interface HandlerResult {
  outcome: UnitOutcome;
  /** Whether the handler wrote follow-up runs (wake the relay after commit). */
  followUps: FollowUps;
}

/**
 * Calls the handler with `tx` as its `run.transaction`, closed the moment the attempt ends (the
 * handler returns or throws, or the signal aborts), and checks its outcome (a JSON object of at most
 * RUN_JSON_MAX_BYTES as the CHECK measures it). Rejects with the handler's error or the signal's reason.
 */
export async function callHandler(c: DeliveryContext, tx: TxSql, call: HandlerCall): Promise<HandlerResult> {
  const unit = c.unit as WorkUnit;
  const { run, attempt } = call;
  const guarded = guardRunTransaction(tx, call.beforeFirstStatement);
  const close = () => guarded.close();
  call.signal.addEventListener('abort', close, { once: true });
  try {
    call.signal.throwIfAborted();
    const followUps = createFollowUps({ tx: guarded.tx, runId: run.runId, correlationId: run.correlationId, tenantId: c.tenantId, units: c.deps.units, instance: c.deps.workerInstance });
    const runObject: UnitRun = {
      runId: run.runId,
      name: unit.name,
      attempt,
      scheduledFor: call.scheduledFor,
      tenantId: c.tenantId,
      correlationId: run.correlationId,
      async now() {
        const [row] = await c.deps.sql<{ ms: number }[]>`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms`;
        return new Date(row!.ms);
      },
      // Built on first use, as the delivery's own (context.ts): most handlers never log.
      get logger() {
        const logger = c.log.child({ attempt });
        Object.defineProperty(this, 'logger', { value: logger });
        return logger;
      },
      progress: (percent: number) => reportProgress(c, guarded, run, attempt, percent, call.beforeProgress),
      transaction: guarded.tx,
      signal: call.signal,
      ...followUps.api,
    };
    // The handler's own code is bounded by its unit's timeout, never by a stage deadline of the delivery.
    const handling = withoutStageBounds(() => traceStage('handler', unit.name, async () => unit.handler(call.payload as never, runObject))); // span (src/observe)
    const returned = await raceAbort(handling, call.signal);
    guarded.close();
    const outcome = returned === undefined ? {} : returned;
    if (!isPlainObject(outcome)) throw new ValidationFailure(`handler of '${unit.name}' must return a JSON object or nothing`);
    // Measured as the CHECK measures it (octet_length(outcome::text) of the jsonb), not compact JSON.
    if (jsonbTextBytes(outcome) > RUN_JSON_MAX_BYTES) {
      throw new ValidationFailure(`handler of '${unit.name}' returned an outcome over ${RUN_JSON_MAX_BYTES} bytes`);
    }
    return { outcome, followUps };
  } finally {
    guarded.close();
    call.signal.removeEventListener('abort', close);
  }
}

/** progress(percent): its own short transaction (status row + `progress` event), cache evicted. */
async function reportProgress(
  c: DeliveryContext,
  handlerTx: RunTransactionGuard,
  run: RunRow,
  attempt: number,
  percent: number,
  before: (() => Promise<void>) | undefined,
): Promise<void> {
  if (!handlerTx.open) throw new RunTransactionClosed();
  if (!Number.isFinite(percent) || percent < 0 || percent > 100) {
    throw new ValidationFailure(`progress must be a number from 0 to 100, got ${String(percent)}`);
  }
  if (before) await before();
  const value = Math.round(percent);
  await inUnitOfWork(c.deps.sql, c.actor, async (tx) => {
    if (await setRunProgress(tx, c.scope, { runId: run.runId, tenantId: c.tenantId }, value)) {
      await trail(tx, c, run, 'progress', attempt, { detail: { percent: value } });
    }
  });
  await evict(c);
}
