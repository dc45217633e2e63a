// Every operation opens its own unit of work: one transaction whose first statement applies the actor
// context as transaction-local settings, so triggers, policies and audit see who acts.
import type { Sql, TxSql } from './client.ts';
import { inPipelinedTransaction } from './pipelined-begin.ts';

export type Actor =
  | { kind: 'user'; tenantId: string; userId: string; membershipId: string; label: string }
  | { kind: 'system'; tenantId?: string | null; label: string }
  | { kind: 'scheduler'; label: string };

/** The values of app.tenant_id, app.user_id and app.process for an actor ('' when not applicable). */
export function actorSettings(actor: Actor): { tenantId: string; userId: string; process: string } {
  return {
    tenantId: actor.kind === 'scheduler' ? '' : (actor.tenantId ?? ''),
    userId: actor.kind === 'user' ? actor.userId : '',
    process: actor.kind === 'user' ? '' : actor.label,
  };
}

/**
 * The actor context as a fragment of an existing statement (no round trip of its own):
 * `WITH ctx AS MATERIALIZED (${actorContextSelect(tx, actor)}) ... WHERE EXISTS (SELECT 1 FROM ctx)`.
 * An uncorrelated EXISTS is an init-plan, so the settings apply before the statement touches a row.
 */
export function actorContextSelect(tx: TxSql, actor: Actor) {
  const s = actorSettings(actor);
  return tx`SELECT set_config('app.tenant_id', ${s.tenantId}, true) AS t, set_config('app.user_id', ${s.userId}, true) AS u,
                   set_config('app.process', ${s.process}, true) AS p`;
}

/**
 * Runs `work` in one transaction under the actor's context. Neither BEGIN nor the context is waited for:
 * both go out in the same write as the work's first statement (src/db/pipelined-begin.ts
 * inPipelinedTransaction, guarded against a BEGIN that failed), which PostgreSQL runs after them on the
 * same connection, so a unit of work pays no round trip for either. If setting the context fails, the
 * transaction is aborted: the work's statements fail and nothing commits, and the error reported is
 * the context's own.
 */
export async function inUnitOfWork<T>(sql: Sql, actor: Actor, work: (tx: TxSql) => Promise<T>): Promise<T> {
  return inPipelinedTransaction(sql, (tx) => [actorContextSelect(tx, actor)], work);
}
