// The work tables of each run scope, named once. A statement over them is written once for both scopes:
// the tables go in as fragments (scopeTables), and what only a tenant table has (the
// tenant_id column: its place in a column list, its value, its condition) as a fragment that is empty
// in the platform scope. The statement text still differs per scope (other names, one column fewer),
// so each scope keeps its own prepared statement and plans, as when each was written out by hand.
import type postgres from 'postgres';
import type { Sql, TxSql } from '../../../db/client.ts';
import { CodedError } from '../../../errors/coded-error.ts';

/** tenant: task_runs / task_run_events / outbox_messages / idempotency_keys; platform: the platform_* tables (platform and system tasks). */
export type RunScope = 'tenant' | 'platform';

export type Db = Sql | TxSql;
export type Fragment = postgres.Fragment;

export const RUN_TABLE = { tenant: 'task_runs', platform: 'platform_task_runs' } as const;
export const TRAIL_TABLE = { tenant: 'task_run_events', platform: 'platform_task_run_events' } as const;
export const OUTBOX_TABLE = { tenant: 'outbox_messages', platform: 'platform_outbox_messages' } as const;
export const LEDGER_TABLE = { tenant: 'idempotency_keys', platform: 'platform_idempotency_keys' } as const;

/**
 * The scope's tables as fragments to interpolate, unquoted (the names are the constants above, never
 * input): the statement reads as written by hand, `UPDATE task_runs …`, which is what pg_stat_activity,
 * the logs and the tests that wait on a statement by its text see.
 */
export function scopeTables(sql: Db, scope: RunScope) {
  return {
    runs: sql.unsafe(RUN_TABLE[scope]),
    trail: sql.unsafe(TRAIL_TABLE[scope]),
    outbox: sql.unsafe(OUTBOX_TABLE[scope]),
    ledger: sql.unsafe(LEDGER_TABLE[scope]),
  };
}

/**
 * `fragment` in the tenant scope, an empty fragment in the platform one: a tenant-only column
 * (`tenant_id,`), value (`${tenantId}::bigint,`) or condition (`AND tenant_id = ${tenantId}`).
 */
export function tenantOnly(sql: Db, scope: RunScope, fragment: Fragment): Fragment {
  return scope === 'tenant' ? fragment : sql``;
}

export class RunScopeError extends CodedError<'RUN_SCOPE_INVALID'> {
  constructor(message: string) {
    super('RUN_SCOPE_INVALID', message);
    this.name = 'RunScopeError';
  }
}

/** Tenant rows need a tenant id, platform rows must not have one: a programming error otherwise. */
export function checkTenant(scope: RunScope, tenantId: string | null | undefined): string | null {
  if (scope === 'tenant') {
    if (!tenantId) throw new RunScopeError('a tenant run needs tenantId');
    return tenantId;
  }
  if (tenantId) throw new RunScopeError('a platform run has no tenantId');
  return null;
}
