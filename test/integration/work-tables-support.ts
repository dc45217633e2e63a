// A fresh migrated database for the work and idempotency tests (the template holds every migration,
// 0015/0016 included), plus the tenant, user and membership a run refers to, built from the real
// domain rows (a tenant needs a blueprint, a user a party) with the domain fixture helpers.
import { randomUUID } from 'node:crypto';
import { freshDatabase, type TestDatabase } from '../support/services.ts';
import type { Sql } from '../../src/db/client.ts';
import type { Actor } from '../../src/db/unit-of-work.ts';
import { createBlueprint, createMembership, createPerson, createTenantRow } from './domain-support.ts';

export async function workDatabase(options: { max?: number } = {}): Promise<TestDatabase> {
  return freshDatabase({ max: options.max ?? 8 });
}

export interface TenantMember {
  tenantId: string;
  userId: string;
  membershipId: string;
}

/** A tenant the runs, outbox rows and ledgers can reference (on a blueprint of its own). */
export async function createTenant(sql: Sql): Promise<string> {
  return createTenantRow(sql, await createBlueprint(sql), `Test tenant ${randomUUID()}`);
}

/** A tenant with one user and that user's membership. */
export async function createTenantMember(sql: Sql): Promise<TenantMember> {
  const tenantId = await createTenant(sql);
  const { userId } = await createPerson(sql, 'Test Person');
  const membershipId = await createMembership(sql, tenantId, userId);
  return { tenantId, userId, membershipId };
}

/** The member as the user actor of a dispatch in its tenant. */
export function memberActor(member: TenantMember): Actor {
  return { kind: 'user', ...member, label: `user:${member.userId}` };
}
