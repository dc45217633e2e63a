// Stage 2 of a delivery: registration. Locks the run, records the delivery in the trail
// (`received`), and either starts the attempt (`running`, attempts + 1) or records why this delivery
// will not execute (final run, held key, replay, early failure, missing run). A delivery whose rate
// window the database holds (Redis down) takes its place here, or writes nothing and waits (rate-window.ts).
import { inUnitOfWork } from '../../../db/unit-of-work.ts';
import type { TxSql } from '../../../db/client.ts';
import { tryLockKey, tryLockRunExecution, type GateState } from '../store/idempotency.ts';
import { FINAL_RUN_STATUSES, readRun, transitionRun, type RunRow } from '../store/run-store.ts';
import { OUTBOX_TABLE } from '../store/scope-tables.ts';
import { finalDeliveryNote } from '../complete/final-delivery.ts';
import { ratePlaceDetail, roomInRateWindow } from './rate-window.ts';
import { actorSettingsOf, fitOutcome, trail, type DeliveryContext, type Failure } from './context.ts';

export type Registration =
  | { kind: 'missing' }
  | { kind: 'final'; run: RunRow; deadLettered: boolean }
  | { kind: 'early'; run: RunRow }
  | { kind: 'held'; retryAfterMs: number }
  /** The unit's rate window (held by the database) has no room for the next `waitMs`: nothing was recorded. */
  | { kind: 'rate_full'; waitMs: number }
  | { kind: 'replayed'; run: RunRow }
  /**
   * On the usual path (one statement) only: `receivedAt`, the `received` instant (text), and `keyed`,
   * whether the ledger had a row for the key once this delivery held its lock.
   */
  | { kind: 'execute'; run: RunRow; attempt: number; scheduledFor: string | null; receivedAt?: string; keyed?: boolean | null };

/**
 * Registration transaction: lock the run, record the delivery, start the attempt. `keyLocked` says
 * whether the effect transaction (already open) holds the key's advisory lock.
 */
export async function register(
  c: DeliveryContext,
  early: Failure | null,
  gate: GateState,
  keyLocked: boolean,
  leaseMs: number,
  /** The receive's instant for `received`, when it is recorded later than the receive (a group member claimed fresh). */
  receivedAt?: string,
): Promise<Registration> {
  const { scope, tenantId, envelope } = c;
  const rateWindow = c.delivery.rateWindow;
  if (!early && keyLocked && (gate.state === 'acquired' || gate.state === 'unavailable') && !rateWindow) {
    // The usual delivery: one autocommitted statement (actor context, lock, running, `received`).
    const started = await c.deps.starts.start(scope, actorSettingsOf(c.actor), tenantId, c.deps.workerInstance, {
      runId: envelope.run_id,
      receiveCount: c.delivery.receiveCount,
      messageId: c.delivery.messageId,
      receivedAt,
      key: c.key,
    });
    if (started) {
      return { kind: 'execute', run: started.run, attempt: started.run.attempts, scheduledFor: started.scheduledFor, receivedAt: started.receivedAt, keyed: started.keyed };
    }
    // Missing or final: nothing was written; the general path below records it.
  }
  return inUnitOfWork(c.deps.sql, c.actor, async (tx): Promise<Registration> => {
    // Waits for the relay's commit of this run's outbox row (its FOR UPDATE conflicts with KEY SHARE),
    // so `received` follows `sent` in the trail, as startDelivery does.
    await tx`SELECT 1 FROM ${tx(OUTBOX_TABLE[scope])} WHERE run_id = ${envelope.run_id} FOR KEY SHARE`;
    // FOR NO KEY UPDATE, not FOR UPDATE: the open effect transaction of a duplicate holds a KEY SHARE
    // lock on the run (its trail rows reference it), and this registration must not wait for it.
    await tx`SELECT 1 FROM ${tx(scope === 'tenant' ? 'task_runs' : 'platform_task_runs')}
              WHERE run_id = ${envelope.run_id} ${tenantId ? tx`AND tenant_id = ${tenantId}` : tx``} FOR NO KEY UPDATE`;
    const run = await readRun(tx, scope, { runId: envelope.run_id, tenantId });
    if (!run) return { kind: 'missing' };
    await recordSendProvedByDelivery(tx, c, run);
    if (FINAL_RUN_STATUSES.has(run.status)) {
      const rows =
        run.status === 'failed'
          ? await tx`SELECT 1 FROM ${tx(scope === 'tenant' ? 'task_run_events' : 'platform_task_run_events')}
                      WHERE run_id = ${run.runId} AND event = 'dead_lettered' LIMIT 1`
          : [1];
      // The note says when the message of a dead-lettered or cancelled run came back (src/work/runtime/complete/final-delivery.ts).
      await trail(tx, c, run, 'received', run.attempts, { detail: finalDeliveryNote(run, rows.length > 0).detail });
      return { kind: 'final', run, deadLettered: rows.length > 0 };
    }
    if (early) {
      // A delivery that will not execute never settles a run another delivery is executing (a
      // duplicate past the fifth receive, a worker of a rolling deploy that lacks the unit): it waits
      // its turn, and comes back when that execution has settled the run.
      // Any active status: a group member executes its run while it is still `queued` or `retrying`
      // (its registration deferred to its commit, group-opening.ts), holding the key's advisory lock.
      if (await executingElsewhere(tx, c)) {
        await trail(tx, c, run, 'received', run.attempts, { detail: { held: 'executing' } });
        return { kind: 'held', retryAfterMs: leaseMs };
      }
      // Only the spec's transitions: the delivery makes the run `running` (queued/retrying → running;
      // attempts unchanged, no handler runs), and settleFailure moves it on from `running`.
      const taken = await takeRun(tx, c, run);
      await trail(tx, c, run, 'received', run.attempts);
      return { kind: 'early', run: taken };
    }
    if (gate.state === 'completed') {
      // Another run with the same business key already produced this result: replay it.
      await trail(tx, c, run, 'received', run.attempts, { detail: { replay: 'gate' } });
      const taken = await takeRun(tx, c, run);
      await transitionRun(tx, scope, { runId: run.runId, tenantId, to: 'succeeded', from: ['running'], outcome: fitOutcome(gate.outcome), progress: 100 });
      await trail(tx, c, run, 'succeeded', run.attempts, { detail: { replayed: true }, occurredAt: 'run_finished' });
      return { kind: 'replayed', run: taken };
    }
    if (!keyLocked) {
      // Without the Redis gate, the key's advisory lock is held by the open effect transaction of a duplicate.
      await trail(tx, c, run, 'received', run.attempts, { detail: { held: 'ledger' } });
      return { kind: 'held', retryAfterMs: leaseMs };
    }
    if (rateWindow) {
      const waitMs = await roomInRateWindow(tx, scope, rateWindow);
      if (waitMs !== null) return { kind: 'rate_full', waitMs };
    }
    const started = await transitionRun(tx, scope, { runId: run.runId, tenantId, to: 'running', from: ['queued', 'running', 'retrying'], attempts: 'increment' });
    await trail(tx, c, run, 'received', started!.attempts, rateWindow ? { detail: ratePlaceDetail(rateWindow) } : {});
    const [origin] =
      scope === 'platform'
        ? await tx<{ at: string }[]>`SELECT to_char(scheduled_for AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at
            FROM platform_task_run_schedule_origins WHERE run_id = ${run.runId}`
        : [];
    return { kind: 'execute', run: started!, attempt: started!.attempts, scheduledFor: origin?.at ?? null };
  });
}

/**
 * A delivery proves its message was sent: an outbox row still pending here means the relay died
 * between SendMessageBatch and its commit. Marking it sent now (with `sent` before this delivery's
 * `received`) keeps the relay from sending a second message and the trail causal.
 */
async function recordSendProvedByDelivery(tx: TxSql, c: DeliveryContext, run: RunRow): Promise<void> {
  const rows = await tx<{ queue: string }[]>`UPDATE ${tx(OUTBOX_TABLE[c.scope])} SET sent_at = clock_timestamp()
                                              WHERE run_id = ${run.runId} AND sent_at IS NULL RETURNING queue`;
  if (rows.length === 0) return;
  await trail(tx, c, { queue: rows[0]!.queue as RunRow['queue'] }, 'sent', 0, {
    receiveCount: 0,
    detail: { message_id: c.delivery.messageId, recorded_by: 'delivery' },
  });
}

/**
 * True when another delivery is executing this run right now. An effect transaction holds the run's
 * execution lock from its opening to its end (tryLockRunExecution); one that has written a `started`
 * row also holds a KEY SHARE lock on the run row (the row references it), which FOR UPDATE SKIP LOCKED
 * sees without waiting (this transaction's own FOR NO KEY UPDATE does not conflict with itself); a
 * group member holds the key's advisory lock.
 */
async function executingElsewhere(tx: TxSql, c: DeliveryContext): Promise<boolean> {
  const [free] = await tx<{ locked: boolean }[]>`SELECT ${tryLockRunExecution(tx, c.envelope.run_id)} AS locked
                         FROM ${tx(c.scope === 'tenant' ? 'task_runs' : 'platform_task_runs')}
                         WHERE run_id = ${c.envelope.run_id} FOR UPDATE SKIP LOCKED`;
  if (!free?.locked) return true;
  const key = c.key ?? c.probeKey;
  return key !== undefined && !(await tryLockKey(tx, key));
}

/**
 * Makes a queued or retrying run `running` for a delivery that will not execute the handler (early
 * failure, replay), attempts unchanged; a run already `running` stays as it is. Returns the run as it
 * now is. The caller holds the run row locked.
 */
async function takeRun(tx: TxSql, c: DeliveryContext, run: RunRow): Promise<RunRow> {
  if (run.status === 'running') return run;
  const taken = await transitionRun(tx, c.scope, { runId: run.runId, tenantId: c.tenantId, to: 'running', from: ['queued', 'retrying'] });
  return taken ?? run;
}
