// Whole-database figures of the migrated schema (R-DB-01..04, R-DB-06, R-DB-09..12), measured with
// catalog queries on a clone of the migrated template. How each figure is counted (schema `public`):
// - tables: pg_tables rows;
// - foreign keys / CHECK / UNIQUE / EXCLUDE: pg_constraint rows with contype f / c / u / x (NOT NULL is
//   contype 'n' in PostgreSQL 18 and primary keys are 'p': neither is counted); a foreign key is
//   composite when array_length(conkey, 1) > 1;
// - unique indexes: unique, non-primary pg_index rows that back no constraint (conindid), partial when
//   indpred is set;
// - triggers: pg_trigger rows that are not internal; constraint triggers (tgconstraint <> 0) apart;
// - generated columns: information_schema.columns.is_generated = 'ALWAYS';
// - identity tables: tables with a bigint column where is_identity = 'YES' and identity_generation = 'ALWAYS'.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from '../support/services.ts';

const PUBLIC = `connamespace = 'public'::regnamespace`;

/** The 13 domain tables without an identity id, and their primary keys (R-DB-10, R-DB-11). */
const NON_IDENTITY_PRIMARY_KEYS: Record<string, string[]> = {
  person_profiles: ['party_id'],
  company_profiles: ['party_id'],
  financial_institution_credentials: ['credential_id'],
  invitation_session_contexts: ['invitation_id'],
  session_membership_brokers: ['session_membership_id'],
  bank_credential_deliveries: ['credential_version_id'],
  access_profile_permissions: ['access_profile_id', 'permission_id'],
  access_profile_template_permissions: ['template_id', 'permission_id'],
  platform_access_profile_permissions: ['platform_access_profile_id', 'permission_id'],
  platform_access_profile_template_permissions: ['template_id', 'permission_id'],
  permission_use_cases: ['permission_id', 'use_case'],
  user_credentials: ['user_id', 'credential_id'],
  access_profile_template_change_decisions: ['change_id', 'access_profile_id'],
};
const RUN_TABLES = ['task_runs', 'platform_task_runs', 'task_run_user_actors', 'platform_task_run_schedule_origins'];
const UID_TABLES = [
  'tenants', 'credentials', 'sessions', 'brokers', 'broker_affiliations', 'teams', 'memberships', 'invitations',
  'invitation_deliveries', 'platform_invitations', 'platform_invitation_deliveries', 'broker_prospects',
  'portfolio_transfers',
];

let db: TestDatabase;
const one = async (text: string) => (await db.sql.unsafe(text))[0]!;
const num = async (text: string) => Number(Object.values(await one(text))[0]);

beforeAll(async () => {
  db = await freshDatabase({ max: 2 });
});
afterAll(async () => {
  await db?.drop();
});

describe('migrated database figures', () => {
  it('R-DB-01 has 82 tables: 71 domain, 10 infrastructure and mikro_orm_migrations', async () => {
    expect(await num(`SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`)).toBe(82);
    expect(await num(`SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = 'mikro_orm_migrations'`)).toBe(1);
  });

  it('R-DB-02 has 175 foreign keys (69 composite), none deferrable, none with a cascade/set action', async () => {
    const r = await one(`SELECT count(*) AS total,
        count(*) FILTER (WHERE array_length(conkey, 1) > 1) AS composite,
        count(*) FILTER (WHERE condeferrable OR condeferred) AS deferrable,
        count(*) FILTER (WHERE confupdtype <> 'a' OR confdeltype <> 'a') AS with_action
      FROM pg_constraint WHERE contype = 'f' AND ${PUBLIC}`);
    expect(r).toEqual({ total: '175', composite: '69', deferrable: '0', with_action: '0' });
  });

  it('R-DB-03 has 92 CHECK, 87 UNIQUE, 4 EXCLUDE constraints', async () => {
    const r = await one(`SELECT count(*) FILTER (WHERE contype = 'c') AS checks,
        count(*) FILTER (WHERE contype = 'u') AS uniques, count(*) FILTER (WHERE contype = 'x') AS excludes
      FROM pg_constraint WHERE ${PUBLIC}`);
    expect(r).toEqual({ checks: '92', uniques: '87', excludes: '4' });
  });

  it('R-DB-03 has 17 unique indexes backing no constraint, 16 of them partial', async () => {
    const r = await one(`SELECT count(*) AS total, count(*) FILTER (WHERE i.indpred IS NOT NULL) AS partial
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      WHERE i.indisunique AND NOT i.indisprimary AND c.relnamespace = 'public'::regnamespace
        AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)`);
    expect(r).toEqual({ total: '17', partial: '16' });
    // The non-partial one is access_profiles (tenant_id, broker_id, name) NULLS NOT DISTINCT.
    const np = await one(`SELECT c.relname, i.indnullsnotdistinct FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      WHERE i.indisunique AND NOT i.indisprimary AND i.indpred IS NULL AND c.relnamespace = 'public'::regnamespace
        AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)`);
    expect(np).toEqual({ relname: 'access_profiles_name_key', indnullsnotdistinct: true });
  });

  it('R-DB-03 has 22 triggers plus 2 deferred constraint triggers', async () => {
    const r = await one(`SELECT count(*) FILTER (WHERE t.tgconstraint = 0) AS regular,
        count(*) FILTER (WHERE t.tgconstraint <> 0) AS constraint_triggers,
        count(*) FILTER (WHERE t.tgconstraint <> 0 AND t.tgdeferrable AND t.tginitdeferred) AS deferred
      FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
      WHERE NOT t.tgisinternal AND c.relnamespace = 'public'::regnamespace`);
    expect(r).toEqual({ regular: '22', constraint_triggers: '2', deferred: '2' });
  });

  it('R-DB-03 has 2 generated columns: access_profiles.scope and membership_access_profiles.profile_scope', async () => {
    const rows = await db.sql`SELECT table_name, column_name, generation_expression FROM information_schema.columns
      WHERE table_schema = 'public' AND is_generated = 'ALWAYS' ORDER BY 1`;
    expect(rows.map((r) => `${r.table_name}.${r.column_name}`)).toEqual([
      'access_profiles.scope',
      'membership_access_profiles.profile_scope',
    ]);
  });

  it('R-DB-04 enables btree_gist', async () => {
    expect(await num(`SELECT count(*) FROM pg_extension WHERE extname = 'btree_gist'`)).toBe(1);
  });

  it('R-DB-09 64 tables have a bigint GENERATED ALWAYS AS IDENTITY id', async () => {
    const rows = await db.sql`SELECT table_name FROM information_schema.columns
      WHERE table_schema = 'public' AND is_identity = 'YES' AND identity_generation = 'ALWAYS'
        AND data_type = 'bigint' AND column_name = 'id'`;
    expect(rows.length).toBe(64);
    const byDefault = await num(`SELECT count(*) FROM information_schema.columns
      WHERE table_schema = 'public' AND is_identity = 'YES' AND identity_generation <> 'ALWAYS'`);
    expect(byDefault).toBe(0);
  });

  it('R-DB-10 R-DB-11 the exceptions use the parent key or a composite key; run tables a uuid run_id', async () => {
    const rows = await db.sql`SELECT c.conrelid::regclass::text AS table_name,
        array_agg(a.attname ORDER BY k.ord)::text[] AS columns
      FROM pg_constraint c CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord)
      JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
      WHERE c.contype = 'p' AND c.connamespace = 'public'::regnamespace GROUP BY 1`;
    const pk = new Map(rows.map((r) => [r.table_name as string, r.columns as string[]]));
    for (const [table, columns] of Object.entries(NON_IDENTITY_PRIMARY_KEYS)) expect(pk.get(table), table).toEqual(columns);
    for (const table of RUN_TABLES) expect(pk.get(table), table).toEqual(['run_id']);
    const identityTables = await db.sql`SELECT DISTINCT table_name FROM information_schema.columns
      WHERE table_schema = 'public' AND is_identity = 'YES'`;
    const withoutIdentity = [...pk.keys()].filter((t) => !identityTables.some((r) => r.table_name === t)).sort();
    // mikro_orm_migrations keeps MikroORM's serial id.
    expect(withoutIdentity).toEqual([...Object.keys(NON_IDENTITY_PRIMARY_KEYS), ...RUN_TABLES, 'mikro_orm_migrations'].sort());
  });

  it('R-DB-06 every instant column is timestamptz; creation/audit times default to clock_timestamp()', async () => {
    const naive = await num(`SELECT count(*) FROM information_schema.columns
      WHERE table_schema = 'public' AND data_type = 'timestamp without time zone'`);
    expect(naive).toBe(0);
    const otherDefaults = await db.sql`SELECT table_name, column_name, column_default FROM information_schema.columns
      WHERE table_schema = 'public' AND data_type = 'timestamp with time zone'
        AND column_default IS NOT NULL AND column_default <> 'clock_timestamp()'`;
    expect(otherDefaults).toEqual([]);
    // Creation/recording columns are never left to the client: they all carry the database clock default.
    const creation = await db.sql`SELECT table_name, column_name FROM information_schema.columns
      WHERE table_schema = 'public' AND data_type = 'timestamp with time zone'
        AND column_name IN ('created_at', 'recorded_at', 'received_at', 'changed_at', 'consumed_at', 'granted_at', 'queued_at', 'introduced_at')
        AND table_name NOT IN ('refresh_tokens', 'user_login_verifications')
        AND (column_default IS DISTINCT FROM 'clock_timestamp()' OR is_nullable = 'YES')`;
    expect(creation).toEqual([]);
  });

  it('R-DB-12 public uid text columns exist exactly on the listed tables, unique (per tenant for portfolio_transfers)', async () => {
    const cols = await db.sql`SELECT table_name, data_type, is_nullable FROM information_schema.columns
      WHERE table_schema = 'public' AND column_name = 'uid' ORDER BY 1`;
    expect(cols.map((c) => c.table_name).sort()).toEqual([...UID_TABLES].sort());
    for (const c of cols) expect([c.data_type, c.is_nullable], c.table_name).toEqual(['text', 'NO']);
    const uniques = await db.sql`SELECT c.conrelid::regclass::text AS table_name,
        (SELECT array_agg(a.attname ORDER BY a.attname) FROM pg_attribute a
          WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey))::text[] AS columns
      FROM pg_constraint c WHERE c.contype = 'u' AND c.connamespace = 'public'::regnamespace
        AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey) AND a.attname = 'uid')`;
    const byTable = new Map(uniques.map((u) => [u.table_name as string, u.columns as string[]]));
    for (const t of UID_TABLES) {
      expect(byTable.get(t), t).toEqual(t === 'portfolio_transfers' ? ['tenant_id', 'uid'] : ['uid']);
    }
  });

  it('R-MIG-10 R-MIG-11 the baseline is the 17 named migrations, recorded in mikro_orm_migrations', async () => {
    const rows = await db.sql`SELECT name FROM mikro_orm_migrations ORDER BY id`;
    // The baseline is the first 17; corrections after it are new migrations (DESIGN.md).
    expect(rows.slice(0, 17).map((r) => r.name)).toEqual([
      '0001_parties', '0002_identity', '0003_tenants', '0004_institutions', '0005_credentials', '0006_brokers',
      '0007_authorization', '0008_memberships', '0009_teams', '0010_invitations', '0011_bank-users',
      '0012_authorization-scope-ceiling', '0013_authorization-permission-scope-guard',
      '0014_identity-platform-logins', '0015_idempotency', '0016_work', '0017_authorization-scope-ceiling-locks',
    ]);
  });
});
