// Fixture rows for the domain use-case tests (test/integration/domain-*.test.ts): a small world of two
// tenants built under every composite foreign key the schema has (tenant-pinned brokers, members acting
// for brokers, group accounts at an institution and the store codes they own), plus helpers to insert a
// row and create a permission. Ids are strings, as postgres.js reads bigint.
import { randomUUID } from 'node:crypto';
import type { Sql, TxSql } from '../../src/db/client.ts';

export type Row = Record<string, any>;

export async function insertRow(sql: Sql | TxSql, table: string, values: Row): Promise<Row> {
  const [row] = await (sql as Sql)`INSERT INTO ${(sql as Sql)(table)} ${(sql as Sql)(values)} RETURNING *`;
  return row!;
}

/** Runs `work` in a transaction that always rolls back (for refusals that must write nothing). */
export async function inRolledBack(sql: Sql, work: (tx: TxSql) => Promise<unknown>): Promise<unknown> {
  const rollback = new Error('rollback');
  try {
    await sql.begin(async (tx) => {
      await work(tx);
      throw rollback;
    });
  } catch (error) {
    if (error !== rollback) throw error;
  }
  return undefined;
}

let permissionCounter = 0;
/** A permission with a code unique to this test process. */
export async function createPermission(sql: Sql, scope: 'platform' | 'tenant' | 'broker', deprecated = false): Promise<string> {
  permissionCounter += 1;
  const code = `test.${scope}.p${permissionCounter}_${randomUUID().slice(0, 8)}`;
  const row = await insertRow(sql, 'permissions', {
    code,
    scope,
    description: `test permission ${code}`,
    ...(deprecated ? { deprecated_at: '2024-01-01T00:00:00Z' } : {}),
  });
  return row.id as string;
}

export interface Person {
  partyId: string;
  userId: string;
}

export async function createPerson(sql: Sql, name: string): Promise<Person> {
  const party = await insertRow(sql, 'parties', { kind: 'person', display_name: name });
  await insertRow(sql, 'person_profiles', { party_id: party.id, full_name: name });
  const user = await insertRow(sql, 'users', { party_id: party.id });
  return { partyId: party.id, userId: user.id };
}

export async function createBlueprint(sql: Sql, name = `blueprint ${randomUUID()}`): Promise<string> {
  return (await insertRow(sql, 'platform_tenant_blueprints', { name, description: 'test blueprint' })).id;
}

/** A tenant inserted directly (tests of tenant creation itself use createTenantFromBlueprint). */
export async function createTenantRow(sql: Sql, blueprintId: string, name = 'Tenant'): Promise<string> {
  return (await insertRow(sql, 'tenants', { uid: randomUUID(), name, blueprint_id: blueprintId })).id;
}

export async function createMembership(sql: Sql, tenantId: string, userId: string): Promise<string> {
  return (await insertRow(sql, 'memberships', { uid: randomUUID(), tenant_id: tenantId, user_id: userId })).id;
}

/** A membership acting for a broker (membership_brokers), open from `validFrom`. */
export async function actFor(
  sql: Sql,
  tenantId: string,
  membershipId: string,
  userId: string,
  brokerId: string,
  role: 'master' | 'member' = 'member',
  validFrom = '2024-01-01',
): Promise<string> {
  return (
    await insertRow(sql, 'membership_brokers', {
      tenant_id: tenantId, membership_id: membershipId, user_id: userId, broker_id: brokerId, role, valid_from: validFrom,
    })
  ).id;
}

export interface TenantSide {
  id: string;
  accountId: string;
}

/**
 * Two tenants (A and B, same blueprint), brokers b1 and b2 (both in A, b1 also in B), and people:
 * ana (member of A acting for b1 and b2, member of B acting for b1), bia (member of A acting for b1 and
 * b2), caio (member of B acting for b1) and an administrator (member of A, master of b1 and b2).
 */
export interface DomainWorld {
  blueprintId: string;
  a: TenantSide;
  b: TenantSide;
  b1: string;
  b2: string;
  ana: Person & { membershipA: string; membershipB: string; linkA1: string; linkA2: string; linkB1: string };
  bia: Person & { membershipA: string; linkA1: string; linkA2: string };
  caio: Person & { membershipB: string; linkB1: string };
  admin: Person & { membershipA: string; linkA1: string; linkA2: string };
}

export async function buildDomainWorld(sql: Sql): Promise<DomainWorld> {
  const blueprintId = await createBlueprint(sql);
  const company = await insertRow(sql, 'parties', { kind: 'company', display_name: 'Group Co' });
  await insertRow(sql, 'company_profiles', { party_id: company.id, legal_name: 'Group Co SA', tax_id: '11222333000181' });
  const tenant = async (name: string): Promise<TenantSide> => {
    const id = await createTenantRow(sql, blueprintId, name);
    const account = await insertRow(sql, 'tenant_accounts', { tenant_id: id, company_party_id: company.id });
    return { id, accountId: account.id };
  };
  const a = await tenant('Tenant A');
  const b = await tenant('Tenant B');

  const broker = async (name: string) => {
    const party = await insertRow(sql, 'parties', { kind: 'person', display_name: name });
    return (await insertRow(sql, 'brokers', { uid: randomUUID(), party_id: party.id })).id as string;
  };
  const b1 = await broker('Broker One');
  const b2 = await broker('Broker Two');
  await insertRow(sql, 'tenant_brokers', { tenant_id: a.id, broker_id: b1 });
  await insertRow(sql, 'tenant_brokers', { tenant_id: a.id, broker_id: b2 });
  await insertRow(sql, 'tenant_brokers', { tenant_id: b.id, broker_id: b1 });

  const anaP = await createPerson(sql, 'Ana');
  const anaMA = await createMembership(sql, a.id, anaP.userId);
  const anaMB = await createMembership(sql, b.id, anaP.userId);
  const ana = {
    ...anaP,
    membershipA: anaMA,
    membershipB: anaMB,
    linkA1: await actFor(sql, a.id, anaMA, anaP.userId, b1),
    linkA2: await actFor(sql, a.id, anaMA, anaP.userId, b2),
    linkB1: await actFor(sql, b.id, anaMB, anaP.userId, b1),
  };
  const biaP = await createPerson(sql, 'Bia');
  const biaMA = await createMembership(sql, a.id, biaP.userId);
  const bia = {
    ...biaP,
    membershipA: biaMA,
    linkA1: await actFor(sql, a.id, biaMA, biaP.userId, b1),
    linkA2: await actFor(sql, a.id, biaMA, biaP.userId, b2),
  };
  const caioP = await createPerson(sql, 'Caio');
  const caioMB = await createMembership(sql, b.id, caioP.userId);
  const caio = { ...caioP, membershipB: caioMB, linkB1: await actFor(sql, b.id, caioMB, caioP.userId, b1) };
  const adminP = await createPerson(sql, 'Admin');
  const adminMA = await createMembership(sql, a.id, adminP.userId);
  const admin = {
    ...adminP,
    membershipA: adminMA,
    linkA1: await actFor(sql, a.id, adminMA, adminP.userId, b1, 'master'),
    linkA2: await actFor(sql, a.id, adminMA, adminP.userId, b2, 'master'),
  };
  return { blueprintId, a, b, b1, b2, ana, bia, caio, admin };
}

/** An institution both tenants work with: each tenant's group account there and its group store code. */
export interface Institution {
  id: string;
  /** Group-account store codes (owner: the tenant's financial_institution_accounts row). */
  groupCodeA: string;
  groupCodeB: string;
  /** Store codes owned by brokers of tenant A. */
  b1CodeA: string;
  b2CodeA: string;
}

let institutionCounter = 0;
export async function createInstitution(sql: Sql, world: DomainWorld): Promise<Institution> {
  institutionCounter += 1;
  const fi = await insertRow(sql, 'financial_institutions', {
    code: `${institutionCounter}${randomUUID().slice(0, 6)}`,
    name: `Bank ${institutionCounter}`,
  });
  const groupCode = async (tenant: TenantSide, code: string) => {
    await insertRow(sql, 'tenant_financial_institutions', { tenant_id: tenant.id, financial_institution_id: fi.id });
    const account = await insertRow(sql, 'financial_institution_accounts', {
      tenant_id: tenant.id, tenant_account_id: tenant.accountId, financial_institution_id: fi.id, company_code: '0001',
    });
    return (await insertRow(sql, 'store_codes', {
      tenant_id: tenant.id, financial_institution_id: fi.id, code, financial_institution_account_id: account.id,
    })).id as string;
  };
  const brokerCode = async (brokerId: string, code: string) =>
    (await insertRow(sql, 'store_codes', { tenant_id: world.a.id, financial_institution_id: fi.id, code, broker_id: brokerId }))
      .id as string;
  return {
    id: fi.id,
    groupCodeA: await groupCode(world.a, '0042'),
    groupCodeB: await groupCode(world.b, '0042'),
    b1CodeA: await brokerCode(world.b1, '7001'),
    b2CodeA: await brokerCode(world.b2, '07002'),
  };
}
