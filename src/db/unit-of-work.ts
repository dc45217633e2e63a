// Every operation opens its own unit of work: one transaction whose first statement applies the actor
// context as transaction-local settings, so triggers, policies and audit see who acts.
import type { Sql, TxSql } from './client.ts';

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

/** Sets app.tenant_id, app.user_id and app.process for the current transaction only. */
export async function applyActorContext(tx: TxSql, actor: Actor): Promise<void> {
  const { tenantId, userId, process: processName } = actorSettings(actor);
  await tx`SELECT set_config('app.tenant_id', ${tenantId}, true),
                  set_config('app.user_id', ${userId}, true),
                  set_config('app.process', ${processName}, true)`;
}

export async function inUnitOfWork<T>(sql: Sql, actor: Actor, work: (tx: TxSql) => Promise<T>): Promise<T> {
  return sql.begin(async (tx) => {
    await applyActorContext(tx, actor);
    return work(tx);
  }) as Promise<T>;
}
