// Finds a run by id in either run table. Operators hold a run id (from a log, a DLQ message, the API)
// without knowing whether it is a tenant or a platform run; the scope comes from the table holding it.
import type { Sql, TxSql } from '../../db/client.ts';
import { readRun, type RunRow } from '../runtime/store/run-store.ts';
import type { RunScope } from '../runtime/store/scope-tables.ts';
import { checkRunId, OperateError } from './operate-error.ts';

export interface FoundRun {
  scope: RunScope;
  run: RunRow;
  /** The tenant's public `uid` for a tenant run, null for a platform run. */
  tenantUid: string | null;
}

/** The run with this id, or null. `forUpdate` locks the row until the transaction ends. */
export async function findRun(tx: Sql | TxSql, runId: string, options: { forUpdate?: boolean } = {}): Promise<FoundRun | null> {
  const id = checkRunId(runId);
  const [tenant] = await tx<{ tenant_id: string; uid: string }[]>`
    SELECT r.tenant_id::text, t.uid FROM task_runs r JOIN tenants t ON t.id = r.tenant_id WHERE r.run_id = ${id}`;
  if (tenant) {
    const run = await readRun(tx as TxSql, 'tenant', { runId: id, tenantId: tenant.tenant_id }, options);
    return run ? { scope: 'tenant', run, tenantUid: tenant.uid } : null;
  }
  const run = await readRun(tx as TxSql, 'platform', { runId: id }, options);
  return run ? { scope: 'platform', run, tenantUid: null } : null;
}

/** As findRun, refusing a missing run with RUN_NOT_FOUND. */
export async function requireRun(tx: Sql | TxSql, runId: string, options: { forUpdate?: boolean } = {}): Promise<FoundRun> {
  const found = await findRun(tx, runId, options);
  if (!found) throw new OperateError('RUN_NOT_FOUND', `no run has id ${checkRunId(runId)}: check the id (svc runs list shows recent runs)`);
  return found;
}
