// What a claim of the key that did not find it fresh means for the attempt, shared by a delivery with
// its own effect transaction (execution.ts) and a member of a group commit (group-execution.ts).
import type { TxSql } from '../../../db/client.ts';
import type { ClaimResult } from '../store/idempotency.ts';
import { transitionRun, type RunRow } from '../store/run-store.ts';
import { IdempotencyKeyReused, PermanentFailure } from '../../define/unit-errors.ts';
import type { UnitOutcome } from '../../define/unit.ts';
import { fitOutcome, HeldElsewhere, RunMovedOn, trail, type DeliveryContext } from './context.ts';

/**
 * Throws what refuses the attempt (a reused key, a key that failed for good, a key held by another
 * execution); a `completed` key is replayed in `tx` (run `succeeded` with the recorded outcome) and
 * its outcome returned; a claimed key returns null: the handler runs.
 */
export async function actOnClaim(tx: TxSql, c: DeliveryContext, run: RunRow, attempt: number, claim: ClaimResult): Promise<{ replayed: UnitOutcome } | null> {
  const unitName = c.unit!.name;
  if (claim.kind === 'reused') throw new IdempotencyKeyReused(unitName);
  if (claim.kind === 'failed_permanent') {
    throw new PermanentFailure('IDEMPOTENCY_FAILED_PERMANENTLY', `an earlier execution with this idempotency key of '${unitName}' failed permanently`);
  }
  if (claim.kind === 'held') throw new HeldElsewhere();
  if (claim.kind === 'completed') {
    const replayed = await transitionRun(tx, c.scope, { runId: run.runId, tenantId: c.tenantId, to: 'succeeded', from: ['running'], outcome: fitOutcome(claim.outcome), progress: 100 });
    if (!replayed) throw new RunMovedOn();
    await trail(tx, c, run, 'succeeded', attempt, { detail: { replayed: true }, occurredAt: 'run_finished' });
    return { replayed: claim.outcome };
  }
  return null;
}

/**
 * The database clock's instant as text, to the microsecond: the `started` instant of a claim that
 * took over an existing ledger row (a rolled-back attempt's `started` is rewritten with it).
 */
export async function claimInstant(tx: TxSql): Promise<string> {
  const [clock] = await tx<{ at: string }[]>`SELECT clock_timestamp()::text AS at`;
  return clock!.at;
}

/** Writes `started` now (a claim that took over an existing ledger row) and returns its instant. */
export async function startNow(tx: TxSql, c: DeliveryContext, run: RunRow, attempt: number): Promise<string> {
  const at = await claimInstant(tx);
  await trail(tx, c, run, 'started', attempt);
  return at;
}
