// Rules of the spec proven on a migrated database (and, where the spec says so, proven NOT to be
// database rules): composite keys and name uniques, the invitation token and the exactly-one-of checks,
// delivery and webhook uniqueness, an empty session_contexts after seeding, broker uniques, rules left to
// the application (cycles, date order, coverage, transfer dates), database-generated times, support
// uniques, instants with Z, runs and trails untouched by cleanup, what hand-written SQL may hold, and
// no route writing sessions.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from '../support/services.ts';
import { refusal } from '../support/refusal.ts';
import { runSeeders } from '../../src/migrator/seed-runner.ts';
import { defaultSeeders } from '../../seeders/index.ts';
import { DevSeeder } from '../../seeders/dev-seeder.ts';
import { PermissionsSeeder } from '../../seeders/permissions-seeder.ts';
import { buildRegistry } from '../../src/permissions/registry.ts';
import { emitRegistry } from '../../src/permissions/registry-file.ts';
import { selectRunStatus } from '../../src/http/run-status.ts';
import { purgeExpired } from '../../src/work/runtime/maintain/purge.ts';
import { bootstrapEnv } from './seed-support.ts';
import {
  PROJECT_ROOT, assignment, bankUser, buildWorld, codeOf, digest, inserter, readForeignKeys, readUniques,
  sourceFiles, splitSqlStatements, uid, type Row, type World,
} from './schema-spec-support.ts';

let db: TestDatabase;
let w: World;
let ins: (table: string, values: Row) => Promise<Row>;

beforeAll(async () => {
  db = await freshDatabase({ max: 3 });
  ins = inserter(db.sql);
  w = await buildWorld(db.sql);
});
afterAll(async () => {
  await db?.drop();
});

/** Columns of a named constraint or unique index (to say WHICH rule refused a row). */
async function constraintColumns(name: string): Promise<string[]> {
  const [row] = await db.sql`SELECT array(SELECT a.attname FROM unnest(x.indkey) WITH ORDINALITY k(n, o)
      JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.n ORDER BY k.o)::text[] AS columns
    FROM pg_class i JOIN pg_index x ON x.indexrelid = i.oid
    WHERE i.relname = ${name} AND i.relnamespace = 'public'::regnamespace`;
  return (row?.columns as string[] | undefined) ?? [];
}
const checkDefinition = async (name: string): Promise<string> =>
  ((await db.sql`SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint WHERE conname = ${name} AND contype = 'c'`)[0]?.d as string) ?? '';
const count = async (table: string): Promise<number> =>
  Number((await db.sql`SELECT count(*)::int AS n FROM ${db.sql(table)}`)[0]!.n);

// ───────────────────────── keys and uniques ─────────────────────────

describe('composite keys of the template link tables', () => {
  const cases = [
    {
      id: 'R-AUTHZ-12',
      table: 'access_profile_template_permissions',
      template: () => ins('access_profile_templates', { tenant_id: w.t1, scope: 'tenant', name: `tpl-${uid()}`, description: 'd' }),
    },
    {
      id: 'R-AUTHZ-20',
      table: 'platform_access_profile_template_permissions',
      template: () => ins('platform_access_profile_templates', { blueprint_id: w.blueprint, scope: 'tenant', name: `ptpl-${uid()}`, description: 'd' }),
    },
  ];
  for (const c of cases) {
    it(`${c.id} ${c.table} is keyed by (template_id, permission_id): a pair once, each side many times`, async () => {
      const a = (await c.template()).id;
      const b = (await c.template()).id;
      const link = (template: string, permission: string) => ins(c.table, { template_id: template, permission_id: permission });
      await link(a, w.permTenant);
      await link(a, w.permBroker);
      await link(b, w.permTenant);
      const e = await refusal(() => link(a, w.permTenant));
      expect(e.code).toBe('23505');
      expect(e.constraint_name).toBe(`${c.table}_pkey`);
      expect(await constraintColumns(e.constraint_name!)).toEqual(['template_id', 'permission_id']);
      const rows = await db.sql`SELECT template_id::text AS t, permission_id::text AS p FROM ${db.sql(c.table)}
        WHERE template_id IN (${a}, ${b}) ORDER BY 1, 2`;
      expect(rows.length).toBe(3);
    });
  }
});

describe('name uniques', () => {
  it('R-AUTHZ-17 platform_tenant_blueprints.name is unique', async () => {
    const name = `blueprint-${uid()}`;
    await ins('platform_tenant_blueprints', { name, description: 'first' });
    const e = await refusal(() => ins('platform_tenant_blueprints', { name, description: 'second' }));
    expect(e.code).toBe('23505');
    expect(await constraintColumns(e.constraint_name!)).toEqual(['name']);
    await ins('platform_tenant_blueprints', { name: `${name}-other`, description: 'third' });
  });

  it('R-AUTHZ-21 platform_access_profiles.name is unique', async () => {
    const name = `operators-${uid()}`;
    await ins('platform_access_profiles', { name });
    const e = await refusal(() => ins('platform_access_profiles', { name }));
    expect(e.code).toBe('23505');
    expect(await constraintColumns(e.constraint_name!)).toEqual(['name']);
  });
});

// ───────────────────────── platform invitations ─────────────────────────

describe('platform invitations and their deliveries', () => {
  const invitation = (overrides: Row = {}) =>
    ins('platform_invitations', {
      uid: uid(), channel: 'email', destination: 'Op@X.io', destination_normalized: 'op@x.io', token_sha256: digest(),
      platform_access_profile_id: w.pap, expires_at: '2099-01-01T00:00:00Z', created_by_process: 'test', ...overrides,
    });
  const delivery = (invitationId: string, overrides: Row = {}) =>
    ins('platform_invitation_deliveries', {
      uid: uid(), platform_invitation_id: invitationId, channel: 'email', destination_normalized: 'op@x.io',
      provider: 'ses', requested_by_process: 'test', ...overrides,
    });

  it('R-AUTHZ-26 the token is stored only as its 32-byte SHA-256 in token_sha256, unique', async () => {
    for (const size of [0, 16, 31, 33, 64]) {
      const e = await refusal(() => invitation({ token_sha256: Buffer.alloc(size, 7) }));
      expect(e.code, `${size} bytes`).toBe('23514');
      expect(await checkDefinition(e.constraint_name!)).toContain('token_sha256');
    }
    const token = digest();
    await invitation({ token_sha256: token });
    const dup = await refusal(() => invitation({ token_sha256: token }));
    expect(dup.code).toBe('23505');
    expect(await constraintColumns(dup.constraint_name!)).toEqual(['token_sha256']);
    // No other column could hold the token itself.
    const tokenColumns = await db.sql`SELECT column_name FROM information_schema.columns
      WHERE table_schema = 'public' AND table_name = 'platform_invitations' AND column_name LIKE '%token%'`;
    expect(tokenColumns.map((c) => c.column_name)).toEqual(['token_sha256']);
  });

  it('R-AUTHZ-27 exactly one of created_by_user_id and created_by_process is set', async () => {
    const both = await refusal(() => invitation({ created_by_user_id: w.u1, created_by_process: 'test' }));
    const neither = await refusal(() => invitation({ created_by_user_id: null, created_by_process: null }));
    for (const e of [both, neither]) {
      expect(e.code).toBe('23514');
      const def = await checkDefinition(e.constraint_name!);
      expect(def).toContain('created_by_user_id');
      expect(def).toContain('created_by_process');
    }
    expect((await invitation({ created_by_user_id: w.u1, created_by_process: null })).created_by_user_id).toBe(w.u1);
    expect((await invitation({ created_by_process: 'bootstrap' })).created_by_user_id).toBeNull();
  });

  it('R-AUTHZ-29 exactly one requester; (provider, provider_message_id) unique; a resend is a new row', async () => {
    const inv = (await invitation()).id;
    const both = await refusal(() => delivery(inv, { requested_by_user_id: w.u1, requested_by_process: 'test' }));
    const neither = await refusal(() => delivery(inv, { requested_by_user_id: null, requested_by_process: null }));
    for (const e of [both, neither]) {
      expect(e.code).toBe('23514');
      const def = await checkDefinition(e.constraint_name!);
      expect(def).toContain('requested_by_user_id');
      expect(def).toContain('requested_by_process');
    }
    // A send, then a resend of the same invitation to the same destination: two rows, both queued
    // before the provider answered (no provider_message_id yet).
    const first = await delivery(inv, { requested_by_process: null, requested_by_user_id: w.u1 });
    const resend = await delivery(inv);
    expect(resend.id).not.toBe(first.id);
    expect(Number((await db.sql`SELECT count(*)::int AS n FROM platform_invitation_deliveries WHERE platform_invitation_id = ${inv}`)[0]!.n)).toBe(2);
    const messageId = `msg-${uid()}`;
    await db.sql`UPDATE platform_invitation_deliveries SET provider_message_id = ${messageId}, status = 'sent', sent_at = clock_timestamp() WHERE id = ${first.id}`;
    const e = await refusal(() => db.sql`UPDATE platform_invitation_deliveries SET provider_message_id = ${messageId} WHERE id = ${resend.id}`);
    expect(e.code).toBe('23505');
    expect(await constraintColumns(e.constraint_name!)).toEqual(['provider', 'provider_message_id']);
    // The same message id from another provider is another message.
    await delivery(inv, { provider: 'twilio', channel: 'sms', destination_normalized: '+5511999999999', provider_message_id: messageId });
  });

  it('R-AUTHZ-31 a repeated webhook (same delivery, same dedup_key) does not duplicate', async () => {
    const inv = (await invitation()).id;
    const d1 = (await delivery(inv)).id;
    const d2 = (await delivery(inv)).id;
    const event = (deliveryId: string, key: string) =>
      ins('platform_invitation_delivery_events', { delivery_id: deliveryId, status: 'delivered', occurred_at: '2024-01-01T00:00:00Z', dedup_key: key });
    await event(d1, 'evt-1');
    const e = await refusal(() => event(d1, 'evt-1'));
    expect(e.code).toBe('23505');
    expect(await constraintColumns(e.constraint_name!)).toEqual(['delivery_id', 'dedup_key']);
    await event(d1, 'evt-2');
    await event(d2, 'evt-1');
    expect(Number((await db.sql`SELECT count(*)::int AS n FROM platform_invitation_delivery_events WHERE delivery_id IN (${d1}, ${d2})`)[0]!.n)).toBe(3);
  });
});

// ───────────────────────── seeding: session contexts, use cases, permissions kept ─────────────────────────

describe('after deploy and seed', () => {
  let seeded: TestDatabase;
  let tmp: string;
  const seed = (seeders: Parameters<typeof runSeeders>[1], env: Record<string, string | undefined> = {}) =>
    runSeeders(seeded.sql, seeders, {
      env: { ...bootstrapEnv(), NODE_ENV: 'development', ...env },
      log: () => {},
      root: PROJECT_ROOT,
    });
  const n = async (table: string) => Number((await seeded.sql`SELECT count(*)::int AS n FROM ${seeded.sql(table)}`)[0]!.n);

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-spec-rules-'));
    seeded = await freshDatabase({ max: 2 });
  });
  afterAll(async () => {
    await seeded?.drop();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('R-AUTHZ-33 session_contexts (and sessions) are empty after the migrations and after the default seeders plus DevSeeder', async () => {
    expect(await n('session_contexts')).toBe(0);
    expect(await n('sessions')).toBe(0);
    await seed([...defaultSeeders, DevSeeder]);
    // The seeders did run (an operator with a grant, a sample tenant) and still no session nor context.
    expect(await n('platform_grants')).toBe(1);
    expect(await n('tenants')).toBeGreaterThanOrEqual(1);
    expect(await n('session_contexts')).toBe(0);
    expect(await n('sessions')).toBe(0);
  });

  it('R-AUTHZ-33 a session context is no impersonation: it names the real session, the grant and the tenant, never another user', async () => {
    const fks = (await readForeignKeys(seeded.sql)).filter((f) => f.table === 'session_contexts');
    expect(fks.map((f) => `${f.columns.join(',')}->${f.refTable}`).sort()).toEqual([
      'platform_grant_id->platform_grants', 'session_id->sessions', 'tenant_id->tenants',
    ]);
    const cols = await seeded.sql`SELECT column_name FROM information_schema.columns
      WHERE table_schema = 'public' AND table_name = 'session_contexts' AND column_name LIKE '%user%'`;
    expect(cols).toEqual([]);
  });

  it('R-AUTHZ-04 permission_use_cases is synchronized at deploy: it mirrors the registry', async () => {
    const registry = buildRegistry();
    const want = registry.permissions.flatMap((p) => p.use_cases.map((u) => `${p.code} ${u}`)).sort();
    expect(want.length).toBeGreaterThan(0);
    const got = await seeded.sql`SELECT p.code || ' ' || u.use_case AS pair FROM permission_use_cases u
      JOIN permissions p ON p.id = u.permission_id ORDER BY 1`;
    expect(got.map((r) => r.pair).sort()).toEqual(want);
  });

  it('R-AUTHZ-03 a permission that left the registry is kept (never deleted); no code deletes permissions', async () => {
    const registry = buildRegistry();
    const leaving = registry.permissions.find((p) => p.use_cases.length > 0)!;
    const file = emitRegistry(tmp, { ...registry, permissions: registry.permissions.filter((p) => p.code !== leaving.code) });
    const before = await n('permissions');
    await seed([PermissionsSeeder], { SVC_PERMISSIONS_REGISTRY: file });
    expect(await n('permissions')).toBe(before);
    const [kept] = await seeded.sql`SELECT id::text AS id FROM permissions WHERE code = ${leaving.code}`;
    expect(kept).toBeDefined();
    // It gates nothing any more: its use cases left with it.
    expect((await seeded.sql`SELECT 1 FROM permission_use_cases WHERE permission_id = ${kept!.id}`).length).toBe(0);
    const deleting = /\b(DELETE\s+FROM|TRUNCATE(\s+TABLE)?)\s+(ONLY\s+)?"?permissions"?(?![\w])/i;
    expect(deleting.test('DELETE FROM permissions WHERE id = 1')).toBe(true);
    expect(deleting.test('DELETE FROM permission_use_cases pu')).toBe(false);
    const offenders = sourceFiles('src', 'units', 'seeders').filter((f) => !f.startsWith('src/db/schema') && deleting.test(codeOf(f)));
    expect(offenders).toEqual([]);
  });
});

// ───────────────────────── brokers ─────────────────────────

describe('broker tables', () => {
  it('R-BRK-04 tenant_brokers is unique on (tenant_id, broker_id) and on (tenant_id, broker_code)', async () => {
    const pair = await refusal(() => ins('tenant_brokers', { tenant_id: w.t1, broker_id: w.b1 }));
    expect(pair.code).toBe('23505');
    expect(await constraintColumns(pair.constraint_name!)).toEqual(['tenant_id', 'broker_id']);
    const code = `C${uid().slice(0, 8)}`;
    await db.sql`UPDATE tenant_brokers SET broker_code = ${code} WHERE tenant_id = ${w.t1} AND broker_id = ${w.b1}`;
    const dup = await refusal(() => db.sql`UPDATE tenant_brokers SET broker_code = ${code} WHERE tenant_id = ${w.t1} AND broker_id = ${w.b2}`);
    expect(dup.code).toBe('23505');
    expect(await constraintColumns(dup.constraint_name!)).toEqual(['tenant_id', 'broker_code']);
    // The same code in another tenant is another code; brokers without a code do not collide.
    await ins('tenant_brokers', { tenant_id: w.t2, broker_id: w.b1, broker_code: code });
    const withoutCode = await db.sql`SELECT count(*)::int AS n FROM tenant_brokers WHERE tenant_id = ${w.t1} AND broker_code IS NULL`;
    expect(withoutCode[0]!.n).toBeGreaterThanOrEqual(2);
  });

  it('R-BRK-06 cycles and date order of broker_affiliations are left to the application (the database accepts them)', async () => {
    const affiliation = (broker: string, parent: string, started: string, ended: string | null) =>
      ins('broker_affiliations', { uid: uid(), tenant_id: w.t1, broker_id: broker, parent_id: parent, started_on: started, ended_on: ended });
    // b1 under b2 and b2 under b1, both open: a cycle.
    await affiliation(w.b1, w.b2, '2024-01-01', null);
    await affiliation(w.b2, w.b1, '2024-01-01', null);
    // A closed affiliation that ends before it starts.
    const reversed = await affiliation(w.b3, w.b1, '2024-06-01', '2024-02-01');
    expect(new Date(reversed.ended_on).getTime()).toBeLessThan(new Date(reversed.started_on).getTime());
    // A broker as its own parent: the shortest cycle.
    await affiliation(w.b3, w.b3, '2024-01-01', null);
    const checks = await db.sql`SELECT conname FROM pg_constraint WHERE conrelid = 'broker_affiliations'::regclass AND contype IN ('c', 'x')`;
    expect(checks).toEqual([]);
  });
});

// ───────────────────────── bank users ─────────────────────────

describe('bank users', () => {
  it('R-BANK-03 user_banks.kind and status have no value check in the database', async () => {
    const defs = await db.sql`SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint WHERE conrelid = 'user_banks'::regclass AND contype = 'c'`;
    expect(defs.filter((r) => /\b(kind|status)\b/.test(r.d as string))).toEqual([]);
    const { userBank } = await bankUser(db.sql, w);
    await db.sql`UPDATE user_banks SET kind = 'anything at all', status = 'not a known status' WHERE id = ${userBank}`;
    const [row] = await db.sql`SELECT kind, status FROM user_banks WHERE id = ${userBank}`;
    expect([row!.kind, row!.status]).toEqual(['anything at all', 'not a known status']);
  });

  it('R-BANK-02 a bank user is global (no tenant or broker on user_banks); assignments carry tenant and broker; no route reads user_banks', async () => {
    const cols = async (t: string) =>
      (await db.sql`SELECT column_name, is_nullable FROM information_schema.columns WHERE table_schema = 'public' AND table_name = ${t}`)
        .map((c) => `${c.column_name}:${c.is_nullable}`);
    const bank = await cols('user_banks');
    expect(bank.filter((c) => c.startsWith('tenant_id:') || c.startsWith('broker_id:'))).toEqual([]);
    expect(await cols('bank_user_assignments')).toEqual(expect.arrayContaining(['tenant_id:NO', 'broker_id:NO']));
    const routes = sourceFiles('src/http');
    expect(routes.length).toBeGreaterThan(0);
    expect(routes.filter((f) => /\buser_banks\b|\buserBanks\b/.test(codeOf(f)))).toEqual([]);
  });
});

// ───────────────────────── rules left to the application ─────────────────────────

describe('validity rules the database leaves to the application', () => {
  const SPEC_UNCHECKED = ['broker_affiliations', 'company_ownerships', 'membership_access_profiles', 'membership_brokers', 'tenant_broker_accounts'];

  it('R-DB-22 the validity tables without CHECK or EXCLUDE are exactly the ones the spec names', async () => {
    const rows = await db.sql`
      WITH validity AS (
        SELECT table_name, max(column_name) FILTER (WHERE column_name IN ('valid_until', 'ended_on')) AS end_column
          FROM information_schema.columns
         WHERE table_schema = 'public' AND column_name IN ('valid_from', 'valid_until', 'started_on', 'ended_on')
         GROUP BY table_name)
      SELECT v.table_name FROM validity v
       WHERE NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conrelid = v.table_name::regclass
                          AND (c.contype = 'x' OR (c.contype = 'c' AND pg_get_constraintdef(c.oid) LIKE '%' || v.end_column || '%')))
       ORDER BY 1`;
    expect(rows.map((r) => r.table_name)).toEqual(SPEC_UNCHECKED);
  });

  const rows: Record<string, (from: string, until: string) => Promise<Row>> = {
    broker_affiliations: (from, until) =>
      ins('broker_affiliations', { uid: uid(), tenant_id: w.t1, broker_id: w.b3, parent_id: w.b2, started_on: from, ended_on: until }),
    company_ownerships: (from, until) =>
      ins('company_ownerships', { company_party_id: w.company, owner_party_id: w.p1, started_on: from, ended_on: until }),
    membership_access_profiles: (from, until) =>
      ins('membership_access_profiles', { tenant_id: w.t1, membership_id: w.m2, access_profile_id: w.apTenant, valid_from: from, valid_until: until }),
    membership_brokers: (from, until) =>
      ins('membership_brokers', { tenant_id: w.t1, membership_id: w.m2, user_id: w.u2, broker_id: w.b3, role: 'member', valid_from: from, valid_until: until }),
    tenant_broker_accounts: (from, until) =>
      ins('tenant_broker_accounts', { tenant_id: w.t1, broker_id: w.b2, tenant_account_id: w.ta1, valid_from: from, valid_until: until }),
  };
  it('R-DB-22 covers each of those tables', () => {
    expect(Object.keys(rows).sort()).toEqual(SPEC_UNCHECKED);
  });
  for (const [table, row] of Object.entries(rows)) {
    it(`R-DB-22 ${table}: closed periods out of order, empty or overlapping are accepted (left to the application)`, async () => {
      await row('2021-06-01', '2021-02-01'); // ends before it starts
      await row('2021-07-01', '2021-07-01'); // empty
      await row('2022-01-01', '2022-06-01');
      await row('2022-03-01', '2022-09-01'); // overlaps the previous one
    });
  }

  it('R-DB-23 portfolios and hierarchy edges outside the validity of the membership_teams they depend on are accepted (left to the application)', async () => {
    // m1 is in team1 only during January 2024.
    await ins('membership_teams', { tenant_id: w.t1, team_id: w.team1, membership_id: w.m1, valid_from: '2024-01-01', valid_until: '2024-02-01' });
    // A portfolio of m1 from 2025, and one of m2, who is in no team at all.
    await ins('membership_portfolios', { tenant_id: w.t1, broker_id: w.b1, membership_id: w.m1, valid_from: '2025-01-01' });
    await ins('membership_portfolios', { tenant_id: w.t1, broker_id: w.b2, membership_id: w.m2, valid_from: '2024-01-01' });
    // An edge between two teams from 2030, when no membership_teams row covers either team.
    await ins('team_hierarchies', { tenant_id: w.t1, subordinate_team_id: w.team2, superior_team_id: w.team1, valid_from: '2030-01-01' });
  });

  it('R-DB-24 a transfer whose dates do not close the origin and open the destination on effective_on is accepted (application rule)', async () => {
    const { userBank } = await bankUser(db.sql, w);
    const from = (await assignment(db.sql, w, userBank, w.b1, w.mb1, '2024-01-01', '2024-03-01')).id;
    const to = (await assignment(db.sql, w, userBank, w.b2, w.mb2, '2024-06-01', null)).id;
    await ins('bank_user_transfers', {
      tenant_id: w.t1, user_bank_id: userBank, from_assignment_id: from, from_broker_id: w.b1, to_assignment_id: to,
      to_broker_id: w.b2, effective_on: '2024-04-15', actor_user_id: w.u1, reason: 'dates left to the application',
    });
    const pFrom = (await ins('membership_portfolios', {
      tenant_id: w.t1, broker_id: w.b3, membership_id: w.m1, valid_from: '2024-01-01', valid_until: '2024-03-01',
    })).id;
    const pTo = (await ins('membership_portfolios', { tenant_id: w.t1, broker_id: w.b3, membership_id: w.m2, valid_from: '2024-06-01' })).id;
    await ins('portfolio_transfers', {
      uid: uid(), tenant_id: w.t1, broker_id: w.b3, from_portfolio_id: pFrom, to_portfolio_id: pTo, effective_on: '2024-04-15',
      actor_user_id: w.u1, reason: 'dates left to the application',
    });
  });
});

// ───────────────────────── database-generated times ─────────────────────────

/** Creation, consumption and audit columns: set by the database clock at insert, never by a client. */
const CREATION_COLUMNS = [
  'created_at', 'updated_at', 'recorded_at', 'received_at', 'changed_at', 'consumed_at', 'granted_at', 'queued_at',
  'introduced_at', 'entered_at', 'selected_at', 'executed_at',
];

/** Index of the backtick that closes the template literal whose text runs from `i` (nested templates and `${…}` skipped). */
function templateEnd(code: string, i: number): number {
  while (i < code.length) {
    const c = code[i]!;
    if (c === '\\') i += 2;
    else if (c === '`') return i;
    else if (c === '$' && code[i + 1] === '{') i = interpolationEnd(code, i + 2) + 1;
    else i += 1;
  }
  return code.length;
}

/** Index of the `}` that closes the interpolation whose expression starts at `i`. */
function interpolationEnd(code: string, i: number): number {
  let depth = 0;
  while (i < code.length) {
    const c = code[i]!;
    if (c === '`') i = templateEnd(code, i + 1) + 1;
    else if (c === "'" || c === '"') {
      const close = code.indexOf(c, i + 1);
      i = close < 0 ? code.length : close + 1;
    } else {
      if (c === '{') depth += 1;
      if (c === '}' && depth-- === 0) return i;
      i += 1;
    }
  }
  return code.length;
}

/** The template text with each `${…}` replaced by `$`. */
function blankInterpolations(text: string): string {
  let out = '';
  let i = 0;
  while (i < text.length) {
    if (text[i] === '$' && text[i + 1] === '{') {
      out += '$';
      i = interpolationEnd(text, i + 2) + 1;
    } else {
      out += text[i];
      i += 1;
    }
  }
  return out;
}

describe('R-DB-07 creation, consumption and audit times come from the database', () => {
  it('R-DB-07 every NOT NULL creation/audit column defaults to clock_timestamp()', async () => {
    const rows = await db.sql`SELECT table_name, column_name, is_nullable, column_default FROM information_schema.columns
      WHERE table_schema = 'public' AND column_name IN ${db.sql(CREATION_COLUMNS)}`;
    expect(rows.length).toBeGreaterThan(60);
    const bad = rows.filter((r) => r.is_nullable === 'NO' && r.column_default !== 'clock_timestamp()')
      .map((r) => `${r.table_name}.${r.column_name}`);
    expect(bad).toEqual([]);
    // Nullable ones are consumption times set later (a refresh token or a verification being used).
    const later = rows.filter((r) => r.is_nullable === 'YES').map((r) => `${r.table_name}.${r.column_name}`).sort();
    expect(later).toEqual(['refresh_tokens.consumed_at', 'user_login_verifications.consumed_at']);
  });

  it('R-DB-07 R-DB-06 an insert without them gets the database clock at that statement, not the transaction start', async () => {
    const { userBank, credential } = await bankUser(db.sql, w);
    const link = (await assignment(db.sql, w, userBank, w.b1, w.mb1, '2023-01-01', null)).id;
    const times = await db.sql.begin(async (tx) => {
      const [{ start }] = (await tx`SELECT now() AS start`) as unknown as [{ start: Date }];
      await tx`SELECT pg_sleep(0.02)`;
      const [{ t0 }] = (await tx`SELECT clock_timestamp() AS t0`) as unknown as [{ t0: Date }];
      const one = async (text: TemplateStringsArray, ...args: unknown[]) => (await tx(text, ...(args as never[])))[0]!;
      const got: Array<[string, Date]> = [];
      const p = await one`INSERT INTO permissions (code, scope, description) VALUES (${`spec.clock_${uid().slice(0, 8)}.read`}, 'tenant', 'd') RETURNING introduced_at`;
      got.push(['permissions.introduced_at', p.introduced_at]);
      const b = await one`INSERT INTO platform_tenant_blueprints (name, description) VALUES (${`clock-${uid()}`}, 'd') RETURNING created_at, updated_at`;
      got.push(['platform_tenant_blueprints.created_at', b.created_at], ['platform_tenant_blueprints.updated_at', b.updated_at]);
      const g = await one`INSERT INTO platform_grants (user_id, platform_access_profile_id, granted_by_user_id, reason, origin_platform_invitation_id)
        VALUES (${w.u2}, ${w.pap}, ${w.u1}, 'r', ${w.pinv}) RETURNING granted_at`;
      got.push(['platform_grants.granted_at', g.granted_at]);
      const s = await one`INSERT INTO session_contexts (session_id, platform_grant_id, tenant_id, reason)
        VALUES (${w.session}, ${w.grant}, ${w.t1}, 'support') RETURNING entered_at`;
      got.push(['session_contexts.entered_at', s.entered_at]);
      const d = await one`INSERT INTO platform_invitation_deliveries (uid, platform_invitation_id, channel, destination_normalized, provider, requested_by_process)
        VALUES (${uid()}, ${w.pinv}, 'email', 'a@x.io', 'ses', 'test') RETURNING id, queued_at`;
      got.push(['platform_invitation_deliveries.queued_at', d.queued_at]);
      const e = await one`INSERT INTO platform_invitation_delivery_events (delivery_id, status, occurred_at, dedup_key)
        VALUES (${d.id}, 'sent', '2020-01-01T00:00:00Z', 'k') RETURNING received_at`;
      got.push(['platform_invitation_delivery_events.received_at', e.received_at]);
      const v = await one`INSERT INTO credential_versions (credential_id, version, algorithm, secret)
        VALUES (${credential}, 1, 'aes-256-gcm', ${digest()}) RETURNING id`;
      const c = await one`INSERT INTO bank_credential_deliveries (credential_version_id, credential_id, user_bank_id, assignment_id, viewed_by_user_id, tenant_id)
        VALUES (${v.id}, ${credential}, ${userBank}, ${link}, ${w.u1}, ${w.t1}) RETURNING consumed_at`;
      got.push(['bank_credential_deliveries.consumed_at', c.consumed_at]);
      const runId = uid();
      const r = await one`INSERT INTO task_runs (run_id, tenant_id, name, queue, trigger, actor_kind, actor_label, correlation_id, causation_id)
        VALUES (${runId}, ${w.t1}, 'spec.clock', 'default', 'dispatch', 'system', 'test', ${runId}, ${runId}) RETURNING queued_at, updated_at`;
      got.push(['task_runs.queued_at', r.queued_at], ['task_runs.updated_at', r.updated_at]);
      const o = await one`INSERT INTO outbox_messages (tenant_id, run_id, queue, envelope) VALUES (${w.t1}, ${runId}, 'default', '{}'::jsonb) RETURNING created_at`;
      got.push(['outbox_messages.created_at', o.created_at]);
      const [{ t1 }] = (await tx`SELECT clock_timestamp() AS t1`) as unknown as [{ t1: Date }];
      return { start, t0, t1, got };
    });
    expect(times.t0.getTime()).toBeGreaterThan(times.start.getTime());
    for (const [column, at] of times.got) {
      expect(at, column).toBeInstanceOf(Date);
      expect(at.getTime(), column).toBeGreaterThanOrEqual(times.t0.getTime());
      expect(at.getTime(), column).toBeLessThanOrEqual(times.t1.getTime());
    }
  });

  it('R-DB-07 no source code supplies a creation/audit time: not in INSERT column lists, row objects or SET other than clock_timestamp()', () => {
    const names = CREATION_COLUMNS.join('|');
    // The table may be a name or an interpolated one (`INSERT INTO ${tx(table)} (…)`).
    const insertList = /INSERT\s+INTO\s+(?:\$\{[^}]*\}|[^\s(]+)(?:\s+AS\s+\w+)?\s*\(([^)]*)\)/gi;
    // A column list may name creation columns only when the statement reads the database clock for
    // them, `clock_timestamp() AS at`, and hands each of them `at` in its select list (queued_at =
    // updated_at: one reading, not two defaults); never a value from the client. Interpolations are
    // blanked first, so a client value named `at` (`${at}`, `${job.at}`) counts for nothing, and only an
    // `at` in a value's place (followed by a comma or FROM) counts, not one in a WHERE.
    const clockRead = /\bclock_timestamp\(\)\s+AS\s+at\b/i;
    const clockValues = (statement: string) =>
      clockRead.test(statement) ? [...statement.matchAll(/(?<!AS\s+)\b(?:\w+\.)?at\b\s*(?:,|FROM\b)/g)].length : 0;
    // A row object handing the column a value (a type annotation such as `created_at: string` is no value).
    const objectKey = new RegExp(`(?:^|[\\s{,])(?:${names})\\s*:(?!:)(?!\\s*(?:string|number|Date|unknown|null)\\b)`, 'm');
    const setClause = new RegExp(`(?:\\bSET\\s+|,\\s*)(?:${names})\\s*=(?!\\s*clock_timestamp\\(\\))`, 'i');
    const offences = (code: string): string[] => {
      const out: string[] = [];
      for (const m of code.matchAll(insertList)) {
        // The statement: the rest of its template literal, interpolations blanked.
        const start = m.index + m[0].length;
        const statement = blankInterpolations(code.slice(start, templateEnd(code, start)));
        const named = m[1]!.split(',').map((c) => c.trim().replace(/"/g, '')).filter((c) => CREATION_COLUMNS.includes(c));
        if (named.length > clockValues(statement)) out.push(...named.map((c) => `INSERT ${c}`));
      }
      if (objectKey.test(code)) out.push('row object key');
      if (setClause.test(code)) out.push('SET without clock_timestamp()');
      return out;
    };
    // The scan catches what it must.
    expect(offences('await tx`INSERT INTO tenants (uid, created_at) VALUES (1, 2)`')).toEqual(['INSERT created_at']);
    expect(offences('await tx`INSERT INTO ${tx(table)} (run_id, queued_at) VALUES (${id}, ${when})`;')).toEqual(['INSERT queued_at']);
    expect(offences('await tx`INSERT INTO runs (run_id, queued_at) SELECT ${id}, ${when} FROM (SELECT clock_timestamp() AS at) c`;')).toEqual(['INSERT queued_at']);
    expect(offences('await tx`INSERT INTO runs (run_id, queued_at, updated_at) SELECT r, c.at, ${when} FROM (SELECT clock_timestamp() AS at) c`;')).toEqual(['INSERT queued_at', 'INSERT updated_at']);
    expect(offences('await tx`INSERT INTO runs (run_id, queued_at) SELECT ${id}, ${at} FROM (SELECT clock_timestamp() AS at) c`;')).toEqual(['INSERT queued_at']);
    expect(offences('await tx`INSERT INTO runs (run_id, queued_at) SELECT ${id}, ${job.at} FROM (SELECT clock_timestamp() AS at) c`;')).toEqual(['INSERT queued_at']);
    expect(offences('await tx`INSERT INTO runs (run_id, queued_at) SELECT ${id}, ${when} FROM (SELECT clock_timestamp() AS at) c WHERE c.at IS NOT NULL`;')).toEqual(['INSERT queued_at']);
    // The statement ends where its template does, however the template is closed.
    expect(offences('f(tx`INSERT INTO runs (run_id, queued_at) VALUES (${id}, ${when})`, x); g(tx`SELECT a.at, b.at FROM (SELECT clock_timestamp() AS at) a`);')).toEqual(['INSERT queued_at']);
    expect(offences('await tx`INSERT INTO runs (run_id, queued_at, updated_at) SELECT r, c.at, c.at FROM (SELECT clock_timestamp() AS at) c`;')).toEqual([]);
    expect(offences('await tx`INSERT INTO ${tx(t)} (run_id, ${x ? tx`` : tx`tenant_id,`} queued_at, updated_at) SELECT ${id}, ${x ? tx`` : tx`${y}::bigint,`} c.at, c.at FROM (SELECT clock_timestamp() AS at) AS c`;')).toEqual([]);
    expect(offences('const row = { run_id: id, queued_at: when };')).toEqual(['row object key']);
    expect(offences('interface Row { created_at: string; updated_at: Date | null }')).toEqual([]);
    expect(offences('UPDATE x SET status = 1, updated_at = ${now}')).toEqual(['SET without clock_timestamp()']);
    expect(offences('UPDATE x SET status = 1, updated_at = clock_timestamp() WHERE r.queued_at IS NOT NULL')).toEqual([]);
    const files = sourceFiles('src', 'units', 'seeders').filter((f) => !f.startsWith('src/db/schema'));
    expect(files.length).toBeGreaterThan(20);
    const found = files.flatMap((f) => offences(codeOf(f)).map((o) => `${f}: ${o}`));
    expect(found).toEqual([]);
  });
});

// ───────────────────────── support uniques and exposed ids ─────────────────────────

describe('support uniques and internal ids', () => {
  it('R-DB-14 every unique over id plus other columns is the target of a composite foreign key', async () => {
    const [uniques, fks] = await Promise.all([readUniques(db.sql), readForeignKeys(db.sql)]);
    const support = uniques.filter((u) => u.columns.includes('id') && u.columns.length > 1);
    expect(support.length).toBeGreaterThanOrEqual(30);
    const unreferenced = support.filter((u) => !fks.some((f) => f.refTable === u.table &&
      JSON.stringify(f.refColumns) === JSON.stringify(u.columns))).map((u) => `${u.table}.${u.name} (${u.columns.join(', ')})`);
    expect(unreferenced).toEqual([]);
    // Support uniques are plain keys, never business rules: no partial predicate, no NULLS NOT DISTINCT.
    expect(support.filter((u) => u.predicate !== null || u.nullsNotDistinct || !u.constraint).map((u) => u.name)).toEqual([]);
  });

  it('R-DB-13 R-DB-19 a run status carries no numeric id and serializes instants in ISO 8601 with Z', async () => {
    const runId = uid();
    await db.sql`INSERT INTO task_runs (run_id, tenant_id, name, queue, trigger, actor_kind, actor_label, correlation_id, causation_id)
      VALUES (${runId}, ${w.t1}, 'spec.status', 'default', 'dispatch', 'system', 'test', ${runId}, ${runId})`;
    await db.sql`UPDATE task_runs SET status = 'running', started_at = clock_timestamp(), attempts = 1 WHERE run_id = ${runId}`;
    await db.sql`UPDATE task_runs SET status = 'succeeded', finished_at = clock_timestamp(), progress = 100 WHERE run_id = ${runId}`;
    // A session whose time zone is not UTC: the Z must not depend on the connection.
    const local = postgres(db.url, { max: 1, connection: { TimeZone: 'America/Sao_Paulo' }, onnotice: () => {} });
    try {
      expect((await local`SHOW TimeZone`)[0]!.TimeZone).toBe('America/Sao_Paulo');
      expect(String((await local`SELECT queued_at::text AS t FROM task_runs WHERE run_id = ${runId}`)[0]!.t)).toMatch(/-03$/);
      const status = await selectRunStatus(local, { tenantId: w.t1, userId: w.u1, membershipId: w.m1, permissions: new Set() }, runId);
      expect(status).not.toBeNull();
      const [db0] = await db.sql`SELECT queued_at, started_at, finished_at, updated_at FROM task_runs WHERE run_id = ${runId}`;
      const pairs: Array<[string, string | null, Date]> = [
        ['queuedAt', status!.queuedAt, db0!.queued_at], ['startedAt', status!.startedAt, db0!.started_at],
        ['finishedAt', status!.finishedAt, db0!.finished_at], ['updatedAt', status!.updatedAt, db0!.updated_at],
      ];
      for (const [key, text, instant] of pairs) {
        expect(text, key).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
        expect(Math.abs(Date.parse(text!) - instant.getTime()), key).toBeLessThanOrEqual(1);
      }
      // R-DB-13: the only identifier is the run's uuid; no internal numeric id (tenant, user, row id) leaks.
      const keys = Object.keys(status!);
      expect(keys.filter((k) => /^id$|Id$|_id$/.test(k))).toEqual(['runId']);
      expect(status!.runId).toBe(runId);
      expect(Object.values(status!)).not.toContain(w.t1);
    } finally {
      await local.end({ timeout: 5 });
    }
  });
});

// ───────────────────────── runs and trails are permanent ─────────────────────────

const RUN_AND_TRAIL_TABLES = [
  'task_runs', 'task_run_user_actors', 'task_run_events', 'platform_task_runs', 'platform_task_run_schedule_origins',
  'platform_task_run_events',
];

describe('R-RUN-21 runs and trails are permanent audit no cleanup touches', () => {
  it('R-RUN-21 no source file deletes or truncates a run or trail table, directly or through a dynamic table name', () => {
    const tables = RUN_AND_TRAIL_TABLES.join('|');
    const direct = new RegExp(`\\b(?:DELETE\\s+FROM|TRUNCATE(?:\\s+TABLE)?)\\s+(?:ONLY\\s+)?"?(?:${tables})"?(?![\\w])`, 'i');
    const dynamic = /\b(?:DELETE\s+FROM|TRUNCATE(?:\s+TABLE)?)\s+\$\{/i;
    const mentions = new RegExp(`['"\`](?:${tables})['"\`]|\\b(?:${tables})\\b`);
    expect(direct.test('await tx`DELETE FROM task_run_events WHERE id = 1`')).toBe(true);
    expect(direct.test('TRUNCATE TABLE platform_task_runs')).toBe(true);
    expect(direct.test('DELETE FROM task_runs_archive')).toBe(false);
    const files = sourceFiles('src', 'units', 'seeders').filter((f) => !f.startsWith('src/db/schema'));
    const offenders: string[] = [];
    for (const f of files) {
      const code = codeOf(f);
      if (direct.test(code)) offenders.push(`${f}: deletes a run/trail table`);
      // A DELETE on a table chosen at run time must not be able to pick a run or trail table.
      if (dynamic.test(code) && mentions.test(code)) offenders.push(`${f}: dynamic DELETE/TRUNCATE in a file naming a run/trail table`);
    }
    expect(offenders).toEqual([]);
    // The one cleanup routine exists and deletes dynamically: the rule above does apply to it.
    expect(dynamic.test(codeOf('src/work/runtime/maintain/purge.ts'))).toBe(true);
  });

  it('R-RUN-21 maintenance purge removes expired keys and old sent outbox rows but leaves every run and trail row', async () => {
    const runId = uid();
    await db.sql`INSERT INTO task_runs (run_id, tenant_id, name, queue, trigger, actor_kind, actor_label, correlation_id, causation_id)
      VALUES (${runId}, ${w.t1}, 'spec.purge', 'maintenance', 'dispatch', 'system', 'test', ${runId}, ${runId})`;
    await db.sql`INSERT INTO task_run_events (run_id, tenant_id, event, attempt, queue, worker_instance)
      VALUES (${runId}, ${w.t1}, 'queued', 0, 'maintenance', 'test')`;
    const platformRun = uid();
    await db.sql`INSERT INTO platform_task_runs (run_id, name, queue, trigger, actor_kind, actor_label, correlation_id, causation_id)
      VALUES (${platformRun}, 'spec.purge', 'maintenance', 'dispatch', 'system', 'test', ${platformRun}, ${platformRun})`;
    await db.sql`INSERT INTO platform_task_run_events (run_id, event, attempt, queue, worker_instance)
      VALUES (${platformRun}, 'queued', 0, 'maintenance', 'test')`;
    await db.sql`INSERT INTO idempotency_keys (tenant_id, idempotency_key, request_fingerprint, expires_at)
      VALUES (${w.t1}, ${digest()}, ${digest()}, clock_timestamp() - interval '1 hour')`;
    await db.sql`INSERT INTO outbox_messages (tenant_id, run_id, queue, envelope, sent_at)
      VALUES (${w.t1}, ${uid()}, 'default', '{}'::jsonb, clock_timestamp() - interval '8 days')`;
    const before = await Promise.all(RUN_AND_TRAIL_TABLES.map(count));
    expect(before.filter((n) => n > 0).length).toBeGreaterThanOrEqual(4);
    const purged = await db.sql.begin((tx) => purgeExpired(tx, { batchSize: 2 }));
    expect(purged.idempotency_keys).toBeGreaterThanOrEqual(1);
    expect(purged.outbox_messages).toBeGreaterThanOrEqual(1);
    expect(Object.keys(purged).filter((t) => RUN_AND_TRAIL_TABLES.includes(t))).toEqual([]);
    expect(await Promise.all(RUN_AND_TRAIL_TABLES.map(count))).toEqual(before);
  });
});

// ───────────────────────── hand-written SQL ─────────────────────────

// 0018, 0021: partial indexes of the per-tenant in-flight cap on the work tables; 0022: the rescuer's
// index of active runs; 0023, 0024, 0025: the trails' indexes of unique-dispatch and serial keys and of
// rate windows; 0027, 0028: their CHECK constraints over lists of values, rewritten and validated.
const INFRASTRUCTURE_FILES = [
  'sql/idempotency/0015_idempotency.sql', 'sql/work/0016_work.sql', 'sql/work/0018_tenant-fairness.sql', 'sql/work/0021_fair-due-order.sql',
  'sql/work/0022_rescue.sql', 'sql/work/0023_unique-dispatch.sql', 'sql/work/0024_serial-runs.sql', 'sql/work/0025_rate-windows.sql',
  'sql/work/0027_check-literals.sql', 'sql/work/0028_check-literals-validated.sql',
];
const INFRASTRUCTURE_TABLES = [
  'idempotency_keys', 'platform_idempotency_keys', 'outbox_messages', 'platform_outbox_messages', ...RUN_AND_TRAIL_TABLES,
];
/** The migrations the spec's versioning table calls hand written. */
const HAND_WRITTEN_MIGRATIONS = [
  '0012_authorization-scope-ceiling', '0013_authorization-permission-scope-guard', '0015_idempotency', '0016_work',
  '0017_authorization-scope-ceiling-locks', '0018_work-tenant-fairness', '0019_work-run-guard-when', '0020_work-actor-checks-when',
  '0021_work-fair-due-order', '0022_work-rescue', '0023_work-unique-dispatch', '0024_work-serial-runs',
  '0025_work-rate-windows', '0026_work-run-guard-columns', '0027_work-check-literals', '0028_work-check-literals-validated',
];

interface Layout {
  /** Loaded SQL file -> journal position of the migration loading it. */
  loadedBy: Map<string, number>;
  /** Table -> journal position of the migration (or loaded file) creating it. */
  createdIn: Map<string, number>;
}

function readLayout(): Layout {
  const journal = JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'drizzle/meta/_journal.json'), 'utf8')) as { entries: Array<{ tag: string }> };
  const loadedBy = new Map<string, number>();
  const createdIn = new Map<string, number>();
  journal.entries.forEach((entry, position) => {
    const text = fs.readFileSync(path.join(PROJECT_ROOT, 'drizzle', `${entry.tag}.sql`), 'utf8');
    for (const m of text.matchAll(/^--\s*@load\s+(\S+)\s*$/gm)) loadedBy.set(m[1]!, position);
    for (const m of text.matchAll(/CREATE TABLE (?:IF NOT EXISTS )?"?(\w+)"?/g)) createdIn.set(m[1]!, position);
  });
  for (const [file, position] of loadedBy) {
    const text = fs.readFileSync(path.join(PROJECT_ROOT, file), 'utf8');
    for (const m of text.matchAll(/CREATE TABLE (?:IF NOT EXISTS )?"?(\w+)"?/g)) createdIn.set(m[1]!, position);
  }
  return { loadedBy, createdIn };
}

/** Why a hand-written statement is allowed, or null when it is not (R-MIG-02). */
function allowedKind(statement: string, file: string, layout: Layout, keyColumns: Map<string, string[][]>): string | null {
  const s = statement;
  if (/^CREATE (OR REPLACE )?FUNCTION /i.test(s)) return 'function';
  if (/^COMMENT ON FUNCTION /i.test(s)) return 'function';
  if (/^CREATE (OR REPLACE )?(CONSTRAINT )?TRIGGER /i.test(s)) return 'trigger';
  // A constraint trigger takes no OR REPLACE: a later migration drops and re-creates it in one transaction.
  if (/^DROP TRIGGER \w+ ON \w+$/i.test(s)) return 'trigger';
  if (/^CREATE EXTENSION (IF NOT EXISTS )?btree_gist$/i.test(s)) return 'btree_gist for EXCLUDE';
  if (/^ALTER TABLE \w+ ADD CONSTRAINT \w+ EXCLUDE USING gist /i.test(s)) return 'EXCLUDE with GiST';
  if (/^CREATE UNIQUE INDEX \w+ ON \w+ \([^)]*\) NULLS NOT DISTINCT$/i.test(s)) return 'unique index with NULLS NOT DISTINCT';
  const fk = /^ALTER TABLE (\w+) ADD CONSTRAINT (\w+) FOREIGN KEY \(([^)]*)\) REFERENCES (\w+) ?\(([^)]*)\)$/i.exec(s);
  if (fk) {
    const [, table, name, cols, refTable] = fk as unknown as [string, string, string, string, string];
    const columns = cols.split(',').map((c) => c.trim());
    const here = layout.loadedBy.get(file);
    const from = layout.createdIn.get(table);
    const to = layout.createdIn.get(refTable);
    // A reference from an earlier domain to this later one, created by the later domain.
    if (here !== undefined && from !== undefined && to !== undefined && from < to && to === here) return 'foreign key to a later domain';
    // A composite reference reusing columns of another key of the table.
    const others = (keyColumns.get(`${table}`) ?? []).filter((k) => k.join(',') !== columns.join(','));
    if (columns.length > 1 && others.some((k) => k.some((c) => columns.includes(c)))) return `composite foreign key ${name} reusing key columns`;
    return null;
  }
  if (INFRASTRUCTURE_FILES.includes(file)) {
    const table = /^CREATE TABLE (\w+) /i.exec(s)?.[1] ?? /^CREATE (?:UNIQUE )?INDEX \w+ ON (\w+) /i.exec(s)?.[1];
    if (table && INFRASTRUCTURE_TABLES.includes(table)) return 'infrastructure table without entities (hand-written migration)';
    // A later migration replacing an index of an infrastructure table (0021 replaces 0018's).
    if (/^DROP INDEX \w+$/i.test(s)) return 'index of an infrastructure table, replaced';
    // A later migration replacing CHECK constraints of an infrastructure table (0027), or validating them (0028).
    const alter = /^ALTER TABLE (\w+)\s+([\s\S]+)$/i.exec(s);
    if (alter && INFRASTRUCTURE_TABLES.includes(alter[1]!)) {
      const actions = alter[2]!.split(/,\s*(?=(?:DROP|ADD) CONSTRAINT )/i).map((a) => a.trim());
      const check = /^(DROP CONSTRAINT \w+|ADD CONSTRAINT \w+ CHECK \([\s\S]*\)( NOT VALID)?|VALIDATE CONSTRAINT \w+)$/i;
      if (actions.every((a) => check.test(a))) return 'CHECK of an infrastructure table, replaced';
    }
  }
  return null;
}

describe('R-MIG-02 hand-written SQL holds only what the ORM cannot express', () => {
  let keyColumns: Map<string, string[][]>;
  beforeAll(async () => {
    const [uniques, fks] = await Promise.all([readUniques(db.sql), readForeignKeys(db.sql)]);
    keyColumns = new Map();
    const add = (t: string, cols: string[]) => keyColumns.set(t, [...(keyColumns.get(t) ?? []), cols]);
    for (const u of uniques) add(u.table, u.columns);
    for (const f of fks) add(f.table, f.columns);
    const pks = await db.sql`SELECT conrelid::regclass::text AS t, array(SELECT a.attname FROM pg_attribute a
      WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey))::text[] AS cols
      FROM pg_constraint c WHERE contype = 'p' AND connamespace = 'public'::regnamespace`;
    for (const p of pks) add(p.t as string, p.cols as string[]);
  });

  it('R-MIG-02 the statement splitter keeps function bodies and skips comments', () => {
    expect(splitSqlStatements(`-- a; comment\nCREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$;\n/* x; */ SELECT 'a;b';`)).toEqual([
      'CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$', "SELECT 'a;b'",
    ]);
  });

  it('R-MIG-02 the classifier refuses what drizzle can express', () => {
    const layout = readLayout();
    const refuse = (s: string, file: string) => allowedKind(s, file, layout, keyColumns);
    expect(refuse('CREATE TABLE extra (id bigint)', 'sql/brokers/constraints.sql')).toBeNull();
    expect(refuse('ALTER TABLE brokers ADD CONSTRAINT x FOREIGN KEY (party_id) REFERENCES parties (id)', 'sql/brokers/constraints.sql')).toBeNull();
    expect(refuse('CREATE INDEX brokers_party ON brokers (party_id)', 'sql/brokers/constraints.sql')).toBeNull();
    expect(refuse('ALTER TABLE brokers ADD CONSTRAINT c CHECK (uid <> \'\')', 'sql/brokers/constraints.sql')).toBeNull();
    expect(refuse('ALTER TABLE user_logins ADD CONSTRAINT user_logins_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id)', 'sql/tenants/constraints.sql'))
      .toBe('foreign key to a later domain');
    // A CHECK rewritten: allowed for an infrastructure table in an infrastructure file only.
    const rewrite = (table: string) => `ALTER TABLE ${table} DROP CONSTRAINT c, ADD CONSTRAINT c CHECK ((queue = ANY ('{bulk}'::text[]))) NOT VALID`;
    expect(refuse(rewrite('task_runs'), 'sql/work/0027_check-literals.sql')).toBe('CHECK of an infrastructure table, replaced');
    expect(refuse(rewrite('brokers'), 'sql/work/0027_check-literals.sql')).toBeNull();
    expect(refuse(rewrite('task_runs'), 'sql/brokers/constraints.sql')).toBeNull();
    expect(refuse('ALTER TABLE task_runs ADD COLUMN x int', 'sql/work/0027_check-literals.sql')).toBeNull();
  });

  it('R-MIG-02 every statement of every loaded SQL file is an EXCLUDE, a reference to a later domain or reusing key columns, a function, a trigger, an index drizzle cannot express, or an infrastructure table', () => {
    const layout = readLayout();
    const pinned = Object.keys(JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'sql/frozen-sql.json'), 'utf8')) as object).sort();
    // The baseline's 16, then the files of later migrations.
    expect(pinned.length).toBeGreaterThanOrEqual(16);
    expect([...layout.loadedBy.keys()].sort()).toEqual(pinned);
    const onDisk: string[] = [];
    const walk = (dir: string) => {
      for (const e of fs.readdirSync(path.join(PROJECT_ROOT, dir), { withFileTypes: true })) {
        if (e.isDirectory()) walk(path.join(dir, e.name));
        else if (e.name.endsWith('.sql')) onDisk.push(path.join(dir, e.name));
      }
    };
    walk('sql');
    expect(onDisk.sort()).toEqual(pinned);
    const kinds = new Map<string, number>();
    const refused: string[] = [];
    for (const file of pinned) {
      for (const statement of splitSqlStatements(fs.readFileSync(path.join(PROJECT_ROOT, file), 'utf8'))) {
        const kind = allowedKind(statement, file, layout, keyColumns);
        if (kind === null) refused.push(`${file}: ${statement.slice(0, 120)}`);
        else kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
      }
    }
    expect(refused).toEqual([]);
    expect(kinds.get('EXCLUDE with GiST')).toBe(4);
    expect(kinds.get('foreign key to a later domain')).toBeGreaterThanOrEqual(1);
    expect(kinds.get('trigger')).toBeGreaterThanOrEqual(1);
    expect(kinds.get('function')).toBeGreaterThanOrEqual(1);
  });

  it('R-MIG-02 the hand-written migrations hold nothing but comments and @load directives', () => {
    for (const tag of HAND_WRITTEN_MIGRATIONS) {
      const lines = fs.readFileSync(path.join(PROJECT_ROOT, 'drizzle', `${tag}.sql`), 'utf8').split('\n').map((l) => l.trim()).filter(Boolean);
      expect(lines.filter((l) => !l.startsWith('--')), tag).toEqual([]);
      expect(lines.filter((l) => /^--\s*@load\s/.test(l)).length, tag).toBe(1);
    }
  });
});

// ───────────────────────── sessions ─────────────────────────

describe('R-AUTH-02 no route writes sessions', () => {
  it('R-AUTH-02 nothing under src/http (nor elsewhere in src or units) writes a session table', () => {
    const tables = 'sessions|refresh_tokens|session_memberships|session_membership_brokers|session_contexts';
    const sqlWrite = new RegExp(`\\b(?:INSERT\\s+INTO|UPDATE|DELETE\\s+FROM)\\s+"?(?:${tables})"?(?![\\w])`, 'i');
    const ormWrite = /\.(?:insert|update|delete)\(\s*(?:sessions|refreshTokens|sessionMemberships|sessionMembershipBrokers|sessionContexts)\b/;
    const writes = (code: string) => sqlWrite.test(code) || ormWrite.test(code);
    expect(writes('await tx`INSERT INTO sessions (uid) VALUES (1)`')).toBe(true);
    expect(writes('db.insert(sessions).values(row)')).toBe(true);
    expect(writes('UPDATE session_contexts SET left_at = clock_timestamp()')).toBe(true);
    expect(writes('SELECT * FROM sessions')).toBe(false);
    const http = sourceFiles('src/http');
    expect(http.some((f) => f.startsWith('src/http/routes/'))).toBe(true);
    const all = sourceFiles('src', 'units').filter((f) => !f.startsWith('src/db/schema'));
    expect(all.filter((f) => writes(codeOf(f)))).toEqual([]);
  });
});
