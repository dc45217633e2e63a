// Every operation opens its own unit of work: one transaction whose first statement applies the actor
// context as transaction-local settings, so triggers, policies and audit see who acts.
import type { Sql, TxSql } from './client.ts';

export type Actor =
  | { kind: 'user'; tenantId: string; userId: string; membershipId: string; label: string }
  | { kind: 'system'; tenantId?: string | null; label: string }
  | { kind: 'scheduler'; label: string };

/** Sets app.tenant_id, app.user_id and app.process for the current transaction only. */
export async function applyActorContext(tx: TxSql, actor: Actor): Promise<void> {
  const tenantId = actor.kind === 'scheduler' ? '' : (actor.tenantId ?? '');
  const userId = actor.kind === 'user' ? actor.userId : '';
  const processName = actor.kind === 'user' ? '' : actor.label;
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
