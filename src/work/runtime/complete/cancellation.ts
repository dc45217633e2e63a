// What a cancel means to the runtime: the error code and abort reason of a cancelled run, the check a
// running worker polls (cancel-watch.ts) and the test settlement makes of a final run. The operator's
// side, which writes the cancel, is src/work/operate/cancel-run.ts.
import type { Sql, TxSql } from '../../../db/client.ts';
import { PermanentFailure } from '../../define/unit-errors.ts';
import type { RunKey, RunStatus } from '../store/run-store.ts';
import { RUN_TABLE, type RunScope } from '../store/scope-tables.ts';

/** Error code of a cancelled run. */
export const CANCELLED = 'CANCELLED';

/** The abort reason of a running handler whose run an operator cancelled. Permanent: never retried. */
export class RunCancelled extends PermanentFailure {
  constructor(runId: string) {
    super(CANCELLED, `run ${runId} was cancelled by an operator: the attempt is aborted and its effect rolled back`);
    this.name = 'RunCancelled';
  }
}

export function isCancelledOutcome(outcome: Record<string, unknown>): boolean {
  return (outcome.error as { code?: unknown } | undefined)?.code === CANCELLED;
}

/** True when an operator cancelled the run (it is `failed` with CANCELLED): what a running worker polls. */
export async function isRunCancelled(sql: Sql | TxSql, scope: RunScope, key: RunKey): Promise<boolean> {
  const [row] = await sql<{ cancelled: boolean }[]>`
    SELECT status = 'failed' AND outcome->'error'->>'code' = ${CANCELLED} AS cancelled FROM ${sql(RUN_TABLE[scope])}
     WHERE run_id = ${key.runId} ${key.tenantId ? sql`AND tenant_id = ${key.tenantId}` : sql``}`;
  return row?.cancelled === true;
}

/**
 * When an operator cancelled the run during `attempt` (its `failed` ends that attempt): the instant to
 * record that attempt's rolled-back `started` at, `startedAt` or, for an attempt that started after the
 * cancel committed (before its worker heard of it), the cancel's, so nothing of the attempt follows the
 * run's final event. Null when the run was not cancelled during this attempt.
 */
export async function cancelledStartInstant(tx: TxSql, scope: RunScope, key: RunKey, attempt: number, startedAt: string): Promise<string | null> {
  const [row] = await tx<{ at: string }[]>`
    SELECT least(${startedAt}::text::timestamptz, finished_at)::text AS at FROM ${tx(RUN_TABLE[scope])}
     WHERE run_id = ${key.runId} ${key.tenantId ? tx`AND tenant_id = ${key.tenantId}` : tx``}
       AND status = 'failed' AND outcome->'error'->>'code' = ${CANCELLED} AND attempts = ${attempt} AND finished_at IS NOT NULL`;
  return row?.at ?? null;
}

/** True for the outcome of a cancelled run (the runner acknowledges its message without dead-lettering it). */
export function wasCancelled(run: { status: RunStatus; outcome: Record<string, unknown> }): boolean {
  return run.status === 'failed' && isCancelledOutcome(run.outcome);
}
