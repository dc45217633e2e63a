// A fresh database holding the work and idempotency tables, plus tiny helpers to create the tenant,
// user and membership a run refers to. Once the domain migrations and 0015/0016 are in the template,
// this is just freshDatabase(); until then it adds stand-ins for tenants/users/memberships and loads
// the two frozen files itself, so these tests never depend on the order helpers land in.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { freshDatabase, type TestDatabase } from '../support/services.ts';
import type { Sql } from '../../src/db/client.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

export async function workDatabase(options: { max?: number } = {}): Promise<TestDatabase> {
  const db = await freshDatabase({ max: options.max ?? 8 });
  try {
    const [row] = await db.sql`SELECT to_regclass('public.tenants') IS NOT NULL AS tenants,
                                      to_regclass('public.task_runs') IS NOT NULL AS work,
                                      to_regclass('public.idempotency_keys') IS NOT NULL AS idem`;
    if (!row!.tenants) {
      await db.sql.unsafe(`
        CREATE TABLE tenants (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, uid text NOT NULL DEFAULT gen_random_uuid()::text);
        CREATE TABLE users (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY);
        CREATE TABLE memberships (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          user_id bigint NOT NULL REFERENCES users (id), tenant_id bigint NOT NULL REFERENCES tenants (id),
          UNIQUE (id, user_id, tenant_id));`);
    }
    if (!row!.idem) await db.sql.unsafe(fs.readFileSync(path.join(ROOT, 'sql/idempotency/0015_idempotency.sql'), 'utf8'));
    if (!row!.work) await db.sql.unsafe(fs.readFileSync(path.join(ROOT, 'sql/work/0016_work.sql'), 'utf8'));
  } catch (error) {
    await db.drop();
    throw error;
  }
  return db;
}

export interface TenantMember {
  tenantId: string;
  userId: string;
  membershipId: string;
}

const uid = () => randomUUID();

/** Whether the database holds the real domain schema (tenants need a blueprint) or the stand-ins. */
async function realSchema(sql: Sql): Promise<boolean> {
  const [r] = await sql`SELECT to_regclass('public.platform_tenant_blueprints') IS NOT NULL AS real`;
  return r!.real as boolean;
}

/** A tenant the runs, outbox rows and ledgers can reference. */
export async function createTenant(sql: Sql): Promise<string> {
  if (!(await realSchema(sql))) {
    const [t] = await sql`INSERT INTO tenants DEFAULT VALUES RETURNING id::text AS id`;
    return t!.id as string;
  }
  const [b] = await sql`INSERT INTO platform_tenant_blueprints (name, description)
    VALUES (${'test-blueprint-' + uid()}, 'test fixture') RETURNING id`;
  const [t] = await sql`INSERT INTO tenants (uid, name, blueprint_id)
    VALUES (${uid()}, ${'Test tenant ' + uid()}, ${b!.id}) RETURNING id::text AS id`;
  return t!.id as string;
}

async function createUser(sql: Sql): Promise<string> {
  if (!(await realSchema(sql))) {
    const [u] = await sql`INSERT INTO users DEFAULT VALUES RETURNING id::text AS id`;
    return u!.id as string;
  }
  const [p] = await sql`INSERT INTO parties (kind, display_name) VALUES ('person', 'Test Person') RETURNING id`;
  const [u] = await sql`INSERT INTO users (party_id) VALUES (${p!.id}) RETURNING id::text AS id`;
  return u!.id as string;
}

/** A tenant with one user and that user's membership. */
export async function createTenantMember(sql: Sql): Promise<TenantMember> {
  const tenantId = await createTenant(sql);
  const userId = await createUser(sql);
  const [m] = (await realSchema(sql))
    ? await sql`INSERT INTO memberships (uid, tenant_id, user_id) VALUES (${uid()}, ${tenantId}, ${userId}) RETURNING id::text AS id`
    : await sql`INSERT INTO memberships (tenant_id, user_id) VALUES (${tenantId}, ${userId}) RETURNING id::text AS id`;
  return { tenantId, userId, membershipId: m!.id as string };
}
