// Shared by schema-spec-columns.test.ts and schema-spec-rules.test.ts: the spec's column lists encoded
// as data, small catalog readers, a world of rows the rule tests link to, an SQL statement splitter and
// a source-tree reader. Nothing here decides a requirement; the tests do.
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Sql } from '../../src/db/client.ts';

export const PROJECT_ROOT = path.resolve(import.meta.dirname, '..', '..');

// ───────────── column lists of the spec ─────────────

/** Type families named by the spec, keyed by information_schema.columns.udt_name. */
const UDT_FAMILY: Record<string, string> = {
  int8: 'bigint',
  int4: 'integer',
  int2: 'smallint',
  text: 'text',
  date: 'date',
  timestamptz: 'timestamptz',
  jsonb: 'jsonb',
  bytea: 'bytea',
  uuid: 'uuid',
  _int8: 'bigint[]',
  bool: 'boolean',
};
export const typeFamily = (udt: string): string => UDT_FAMILY[udt] ?? `other:${udt}`;

export interface SpecColumn {
  name: string;
  nullable: boolean;
  /** The type family the spec gives or its conventions imply; null when it says nothing. */
  type: string | null;
  generated: boolean;
}

/**
 * Reads a column list written like the spec: `name [type] [generated]` separated by `;`, a trailing `?`
 * meaning nullable (R-DB-05). When the spec names no type, its conventions decide where they can:
 * `id` and `*_id` reference numeric ids (bigint identity, R-DB-09), `*_at` are instants (timestamptz,
 * R-DB-06), `valid_from`/`valid_until` are validity dates (R-DB-18). Anything else stays unchecked.
 */
export function parseColumns(list: string): SpecColumn[] {
  return list
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((item) => {
      const m = /^([a-z][a-z0-9_]*)(?:\s+(int|integer|bigint\[\]|bigint|smallint|text|date|timestamptz|jsonb|bytea|uuid|boolean))?(\?)?(\s+generated)?$/.exec(item);
      if (!m) throw new Error(`unreadable spec column "${item}"`);
      const [, name, given, optional, generated] = m as unknown as [string, string, string | undefined, string | undefined, string | undefined];
      let type: string | null = given === 'int' ? 'integer' : (given ?? null);
      if (type === null) {
        if (name === 'id' || name.endsWith('_id')) type = 'bigint';
        else if (name.endsWith('_at')) type = 'timestamptz';
        else if (name === 'valid_from' || name === 'valid_until') type = 'date';
      }
      return { name, nullable: optional === '?', type, generated: generated !== undefined };
    });
}

export interface SpecTable {
  /** Requirement ids whose column list this is. */
  ids: string;
  columns: string;
  /** Primary key columns; `id` when omitted and the table has one. */
  primaryKey?: string[];
}

/** The 19 authorization tables (database-migrations-seeders.md, "Authorization tables"). */
export const AUTHORIZATION_TABLES: Record<string, SpecTable> = {
  permissions: {
    ids: 'R-AUTHZ-02',
    columns: 'id bigint; code text; scope text; description text; replaces_code text?; introduced_at; deprecated_at?',
  },
  permission_use_cases: {
    ids: 'R-AUTHZ-04',
    columns: 'permission_id bigint; use_case text',
    primaryKey: ['permission_id', 'use_case'],
  },
  permission_changes: {
    ids: 'R-AUTHZ-05',
    columns: 'id; permission_code text; change; before jsonb?; after jsonb?; commit_sha text; commit_author text; approved_by text?; deployed_by text; recorded_at',
  },
  access_profiles: {
    ids: 'R-AUTHZ-06',
    columns: 'id; tenant_id; broker_id?; scope text generated; name text; disabled_at?; created_at; updated_at; template_id?; template_version integer?; detached_at?; detached_by_user_id?',
  },
  access_profile_permissions: {
    ids: 'R-AUTHZ-09',
    columns: 'access_profile_id; permission_id',
    primaryKey: ['access_profile_id', 'permission_id'],
  },
  access_profile_templates: {
    ids: 'R-AUTHZ-10',
    columns: 'id; tenant_id; scope; name; description; auto_assign?; version integer; source_platform_template_id?; disabled_at?; created_at; updated_at',
  },
  access_profile_template_permissions: {
    ids: 'R-AUTHZ-12',
    columns: 'template_id; permission_id',
    primaryKey: ['template_id', 'permission_id'],
  },
  access_profile_template_changes: {
    ids: 'R-AUTHZ-13',
    columns: 'id; tenant_id; template_id; from_version int; to_version int; added_permission_ids bigint[]; removed_permission_ids bigint[]; reason text; changed_by_user_id; changed_at',
  },
  access_profile_template_change_decisions: {
    ids: 'R-AUTHZ-14',
    columns: 'change_id; access_profile_id; decision; affected_users int',
    primaryKey: ['change_id', 'access_profile_id'],
  },
  platform_tenant_blueprints: {
    ids: 'R-AUTHZ-17',
    columns: 'id; name; description; disabled_at?; created_at; updated_at',
  },
  platform_access_profile_templates: {
    ids: 'R-AUTHZ-18',
    columns: 'id; blueprint_id; scope; name; description; auto_assign?; disabled_at?; created_at; updated_at',
  },
  platform_access_profile_template_permissions: {
    ids: 'R-AUTHZ-20',
    columns: 'template_id; permission_id',
    primaryKey: ['template_id', 'permission_id'],
  },
  platform_access_profiles: {
    ids: 'R-AUTHZ-21',
    columns: 'id; name; disabled_at?; created_at; updated_at',
  },
  platform_access_profile_permissions: {
    ids: 'R-AUTHZ-22',
    columns: 'platform_access_profile_id; permission_id',
    primaryKey: ['platform_access_profile_id', 'permission_id'],
  },
  platform_grants: {
    ids: 'R-AUTHZ-23',
    columns: 'id; user_id; platform_access_profile_id; granted_by_user_id; granted_at; reason text; revoked_by_user_id?; revoked_at?; origin_platform_invitation_id',
  },
  platform_invitations: {
    ids: 'R-AUTHZ-25',
    columns: 'id; uid; channel; destination text; destination_normalized text; token_sha256 bytea; platform_access_profile_id; status; expires_at; created_by_user_id?; created_by_process text?; accepted_at?; accepted_by_user_id?; revoked_at?; revoked_by_user_id?; created_at',
  },
  platform_invitation_deliveries: {
    ids: 'R-AUTHZ-28',
    columns: 'id; uid; platform_invitation_id; channel; destination_normalized; provider text; provider_message_id text?; status; queued_at; sent_at?; delivered_at?; opened_at?; failed_at?; failure_reason?; requested_by_user_id?; requested_by_process?',
  },
  platform_invitation_delivery_events: {
    ids: 'R-AUTHZ-30',
    columns: 'id; delivery_id; status text; occurred_at; received_at; dedup_key text; payload jsonb',
  },
  session_contexts: {
    ids: 'R-AUTHZ-32',
    columns: 'id; session_id; platform_grant_id; tenant_id; reason text; entered_at; left_at?',
  },
};

/** The 4 bank-user tables ("Bank-user tables"). */
export const BANK_USER_TABLES: Record<string, SpecTable> = {
  user_banks: {
    ids: 'R-BANK-03',
    columns: 'id; user_id; financial_institution_id; credential_id; kind text; status text; confirmed_at; closed_at?; created_at; updated_at',
  },
  bank_user_assignments: {
    ids: 'R-BANK-06',
    columns: 'id; user_bank_id; user_id; party_id; financial_institution_id; tenant_id; broker_id; valid_from date; valid_until date?; created_by_user_id?; ended_by_user_id?; change_reason text?; created_at; ended_recorded_at?; store_code_id; origin_membership_broker_id',
  },
  bank_user_transfers: {
    ids: 'R-BANK-10',
    columns: 'id; tenant_id; user_bank_id; from_assignment_id; from_broker_id; to_assignment_id; to_broker_id; effective_on date; actor_user_id; actor_membership_id?; actor_broker_id?; reason text; recorded_at',
  },
  bank_credential_deliveries: {
    ids: 'R-BANK-13',
    columns: 'credential_version_id; credential_id; user_bank_id; assignment_id; consumed_at; viewed_by_user_id; tenant_id',
    primaryKey: ['credential_version_id'],
  },
};

/** The 6 broker tables ("Broker tables"). */
export const BROKER_TABLES: Record<string, SpecTable> = {
  brokers: { ids: 'R-BRK-03', columns: 'id; uid; party_id; created_at; updated_at' },
  tenant_brokers: {
    ids: 'R-BRK-04',
    columns: 'id; tenant_id; broker_id; broker_code text?; disabled_at?; disabled_reason?; created_at; updated_at',
  },
  broker_affiliations: {
    ids: 'R-BRK-05',
    columns: 'id; uid; tenant_id; broker_id; parent_id; started_on date; ended_on date?; ended_by?; ended_reason?; approved_by?; created_at',
  },
  tenant_broker_accounts: {
    ids: 'R-BRK-07',
    columns: 'id; tenant_id; broker_id; tenant_account_id; signed_on date?; valid_from; valid_until?; created_at; updated_at',
  },
  store_codes: {
    ids: 'R-BRK-08',
    columns: 'id; tenant_id; financial_institution_id; code text; financial_institution_account_id?; broker_id?; disabled_at?; created_at; updated_at',
  },
  broker_store_codes: {
    ids: 'R-BRK-10',
    columns: 'id; tenant_id; broker_id; financial_institution_id; store_code_id; regime; valid_from; valid_until?; assigned_by_user_id; created_at',
  },
};

const RUN_COLUMNS = (tenant: boolean) =>
  `run_id uuid; ${tenant ? 'tenant_id bigint; ' : ''}name text; queue text; trigger text; actor_kind text; actor_label text; ` +
  'correlation_id uuid; causation_id uuid; status text; attempts integer; progress smallint; outcome jsonb; ' +
  'queued_at timestamptz; started_at timestamptz?; finished_at timestamptz?; updated_at timestamptz';
const TRAIL_COLUMNS = (tenant: boolean) =>
  `id bigint; run_id uuid; ${tenant ? 'tenant_id bigint; ' : ''}event text; attempt integer; receive_count integer; queue text; ` +
  'worker_instance text; error_code text; error_type text; detail jsonb; occurred_at timestamptz';
const LEDGER_COLUMNS = (tenant: boolean) =>
  `id bigint; ${tenant ? 'tenant_id bigint; ' : ''}idempotency_key bytea; request_fingerprint bytea; status text; ` +
  'attempt integer; outcome jsonb; expires_at timestamptz; created_at timestamptz; updated_at timestamptz';
const OUTBOX_COLUMNS = (tenant: boolean) =>
  `id bigint; ${tenant ? 'tenant_id bigint; ' : ''}run_id uuid; queue text; envelope jsonb; available_at timestamptz; ` +
  'sent_at timestamptz?; attempts integer; created_at timestamptz';

/** The run, trail, idempotency and outbox tables (runtime-http-auth-work.md, "Resources and their fields"). */
export const WORK_TABLES: Record<string, SpecTable> = {
  task_runs: { ids: 'R-RUN-02 R-RUN-03 R-RUN-04 R-RUN-05 R-RUN-06 R-RUN-08 R-RUN-09 R-RUN-10', columns: RUN_COLUMNS(true), primaryKey: ['run_id'] },
  task_run_user_actors: {
    ids: 'R-RUN-14',
    columns: 'run_id uuid; tenant_id bigint; user_id bigint; membership_id bigint',
    primaryKey: ['run_id'],
  },
  task_run_events: { ids: 'R-TRL-01 R-TRL-02 R-TRL-04 R-TRL-05', columns: TRAIL_COLUMNS(true) },
  platform_task_runs: { ids: 'R-RUN-16', columns: RUN_COLUMNS(false), primaryKey: ['run_id'] },
  platform_task_run_schedule_origins: {
    ids: 'R-RUN-19',
    columns: 'run_id uuid; schedule_name text; execution_id text; scheduled_for timestamptz',
    primaryKey: ['run_id'],
  },
  platform_task_run_events: { ids: 'R-TRL-07', columns: TRAIL_COLUMNS(false) },
  idempotency_keys: { ids: 'R-IDM-01 R-IDM-02 R-IDM-03 R-IDM-04 R-IDM-05 R-IDM-06', columns: LEDGER_COLUMNS(true) },
  platform_idempotency_keys: { ids: 'R-IDM-01 R-IDM-02', columns: LEDGER_COLUMNS(false) },
  outbox_messages: { ids: 'R-OBX-01 R-OBX-02 R-OBX-03 R-OBX-04', columns: OUTBOX_COLUMNS(true) },
  platform_outbox_messages: { ids: 'R-OBX-01', columns: OUTBOX_COLUMNS(false) },
};

export interface DbColumn {
  name: string;
  nullable: boolean;
  type: string;
  identityAlways: boolean;
  generated: boolean;
}

/** Columns of every public table, from information_schema.columns. */
export async function readColumns(sql: Sql): Promise<Map<string, DbColumn[]>> {
  const rows = await sql`SELECT table_name, column_name, is_nullable, udt_name, is_identity, identity_generation, is_generated
    FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position`;
  const out = new Map<string, DbColumn[]>();
  for (const r of rows) {
    const list = out.get(r.table_name) ?? [];
    list.push({
      name: r.column_name,
      nullable: r.is_nullable === 'YES',
      type: typeFamily(r.udt_name),
      identityAlways: r.is_identity === 'YES' && r.identity_generation === 'ALWAYS',
      generated: r.is_generated === 'ALWAYS',
    });
    out.set(r.table_name, list);
  }
  return out;
}

/** Primary key columns of every public table, in key order. */
export async function readPrimaryKeys(sql: Sql): Promise<Map<string, string[]>> {
  const rows = await sql`SELECT c.conrelid::regclass::text AS table_name,
      array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, i)
            JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i)::text[] AS columns
    FROM pg_constraint c WHERE c.contype = 'p' AND c.connamespace = 'public'::regnamespace`;
  return new Map(rows.map((r) => [r.table_name as string, r.columns as string[]]));
}

export interface DbUnique {
  table: string;
  name: string;
  columns: string[];
  /** WHERE of a partial unique index, as PostgreSQL prints it; null otherwise. */
  predicate: string | null;
  nullsNotDistinct: boolean;
  /** True when a UNIQUE constraint (not a bare index) stands behind it. */
  constraint: boolean;
}

/** Every unique index of the public schema (constraint-backed or not), primary keys excluded. */
export async function readUniques(sql: Sql): Promise<DbUnique[]> {
  const rows = await sql`SELECT t.relname AS table_name, i.relname AS index_name,
      array(SELECT a.attname FROM unnest(x.indkey) WITH ORDINALITY k(n, o)
            JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.n ORDER BY k.o)::text[] AS columns,
      pg_get_expr(x.indpred, x.indrelid) AS predicate, x.indnullsnotdistinct AS nnd,
      EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid AND c.contype = 'u') AS is_constraint
    FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
    WHERE x.indisunique AND NOT x.indisprimary AND t.relnamespace = 'public'::regnamespace`;
  return rows.map((r) => ({
    table: r.table_name,
    name: r.index_name,
    columns: r.columns,
    predicate: r.predicate,
    nullsNotDistinct: r.nnd,
    constraint: r.is_constraint,
  }));
}

export interface DbForeignKey {
  table: string;
  name: string;
  columns: string[];
  refTable: string;
  refColumns: string[];
}

/** Every foreign key of the public schema with its columns in key order. */
export async function readForeignKeys(sql: Sql): Promise<DbForeignKey[]> {
  const rows = await sql`SELECT c.conname, c.conrelid::regclass::text AS table_name, c.confrelid::regclass::text AS ref_table,
      array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, i)
            JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i)::text[] AS columns,
      array(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, i)
            JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.i)::text[] AS ref_columns
    FROM pg_constraint c WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace`;
  return rows.map((r) => ({ table: r.table_name, name: r.conname, columns: r.columns, refTable: r.ref_table, refColumns: r.ref_columns }));
}

// ───────────── errors and rows ─────────────

export type Row = Record<string, any>;

/** INSERT one row and return it (bigint ids come back as strings). */
export function inserter(sql: Sql) {
  return async (table: string, values: Row): Promise<Row> => (await sql`INSERT INTO ${sql(table)} ${sql(values)} RETURNING *`)[0]!;
}

export const uid = () => randomUUID();
export const digest = () => randomBytes(32);

/** Rows the rule tests link to: two tenants with brokers, memberships, teams, a store code and platform rows. */
export interface World {
  p1: string; p2: string; pBroker1: string; pBroker2: string; pBroker3: string; company: string;
  u1: string; u2: string;
  blueprint: string; t1: string; t2: string; ta1: string;
  fi: string; fia1: string;
  b1: string; b2: string; b3: string;
  m1: string; m2: string;
  mb1: string; mb2: string;
  team1: string; team2: string;
  sc1: string;
  session: string;
  pap: string; pinv: string; grant: string;
  apTenant: string;
  permTenant: string; permBroker: string; permTenant2: string;
}

/** A person party with its profile. */
export async function person(ins: ReturnType<typeof inserter>, name: string): Promise<string> {
  const p = await ins('parties', { kind: 'person', display_name: name });
  await ins('person_profiles', { party_id: p.id, full_name: name });
  return p.id;
}

export async function buildWorld(sql: Sql): Promise<World> {
  const ins = inserter(sql);
  const w = {} as World;
  w.p1 = await person(ins, 'Ana');
  w.p2 = await person(ins, 'Bia');
  w.pBroker1 = await person(ins, 'Broker One');
  w.pBroker2 = await person(ins, 'Broker Two');
  w.pBroker3 = await person(ins, 'Broker Three');
  const company = await ins('parties', { kind: 'company', display_name: 'Acme' });
  await ins('company_profiles', { party_id: company.id, legal_name: 'Acme SA', tax_id: '11222333000181' });
  w.company = company.id;
  w.u1 = (await ins('users', { party_id: w.p1 })).id;
  w.u2 = (await ins('users', { party_id: w.p2 })).id;
  w.blueprint = (await ins('platform_tenant_blueprints', { name: `bp-${uid()}`, description: 'd' })).id;
  w.t1 = (await ins('tenants', { uid: uid(), name: 'T1', blueprint_id: w.blueprint })).id;
  w.t2 = (await ins('tenants', { uid: uid(), name: 'T2', blueprint_id: w.blueprint })).id;
  w.ta1 = (await ins('tenant_accounts', { tenant_id: w.t1, company_party_id: w.company })).id;
  w.fi = (await ins('financial_institutions', { code: '001', name: 'Bank' })).id;
  await ins('tenant_financial_institutions', { tenant_id: w.t1, financial_institution_id: w.fi });
  w.fia1 = (await ins('financial_institution_accounts', {
    tenant_id: w.t1, tenant_account_id: w.ta1, financial_institution_id: w.fi, company_code: '0001',
  })).id;
  w.b1 = (await ins('brokers', { uid: uid(), party_id: w.pBroker1 })).id;
  w.b2 = (await ins('brokers', { uid: uid(), party_id: w.pBroker2 })).id;
  w.b3 = (await ins('brokers', { uid: uid(), party_id: w.pBroker3 })).id;
  for (const b of [w.b1, w.b2, w.b3]) await ins('tenant_brokers', { tenant_id: w.t1, broker_id: b });
  w.m1 = (await ins('memberships', { uid: uid(), tenant_id: w.t1, user_id: w.u1 })).id;
  w.m2 = (await ins('memberships', { uid: uid(), tenant_id: w.t1, user_id: w.u2 })).id;
  w.mb1 = (await ins('membership_brokers', {
    tenant_id: w.t1, membership_id: w.m1, user_id: w.u1, broker_id: w.b1, role: 'master', valid_from: '2024-01-01',
  })).id;
  w.mb2 = (await ins('membership_brokers', {
    tenant_id: w.t1, membership_id: w.m1, user_id: w.u1, broker_id: w.b2, role: 'member', valid_from: '2024-01-01',
  })).id;
  w.team1 = (await ins('teams', { uid: uid(), tenant_id: w.t1, name: 'Sales' })).id;
  w.team2 = (await ins('teams', { uid: uid(), tenant_id: w.t1, name: 'North' })).id;
  w.sc1 = (await ins('store_codes', {
    tenant_id: w.t1, financial_institution_id: w.fi, code: '0042', financial_institution_account_id: w.fia1,
  })).id;
  w.session = (await ins('sessions', { uid: uid(), user_id: w.u1, token_sha256: digest(), expires_at: '2099-01-01T00:00:00Z' })).id;
  w.pap = (await ins('platform_access_profiles', { name: `platform admin ${uid()}` })).id;
  w.pinv = (await ins('platform_invitations', {
    uid: uid(), channel: 'email', destination: 'a@x.io', destination_normalized: 'a@x.io', token_sha256: digest(),
    platform_access_profile_id: w.pap, status: 'accepted', expires_at: '2099-01-01T00:00:00Z', created_by_process: 'bootstrap',
  })).id;
  w.grant = (await ins('platform_grants', {
    user_id: w.u1, platform_access_profile_id: w.pap, granted_by_user_id: w.u1, reason: 'r', origin_platform_invitation_id: w.pinv,
  })).id;
  w.apTenant = (await ins('access_profiles', { tenant_id: w.t1, name: 'admins' })).id;
  const perm = async (code: string, scope: string) => (await ins('permissions', { code, scope, description: code })).id as string;
  w.permTenant = await perm('spec.tenant_thing.read', 'tenant');
  w.permTenant2 = await perm('spec.tenant_thing.write', 'tenant');
  w.permBroker = await perm('spec.broker_thing.read', 'broker');
  return w;
}

/**
 * A fresh bank user of u1 at the institution; each needs its own financial-institution credential and
 * only one may be open per user and institution, so the previous open one is closed first.
 */
export async function bankUser(sql: Sql, w: World): Promise<{ userBank: string; credential: string }> {
  const ins = inserter(sql);
  await sql`UPDATE user_banks SET closed_at = clock_timestamp()
    WHERE user_id = ${w.u1} AND financial_institution_id = ${w.fi} AND closed_at IS NULL`;
  const credential = (await ins('credentials', { uid: uid(), kind: 'financial_institution' })).id;
  await ins('financial_institution_credentials', { credential_id: credential, financial_institution_id: w.fi, login: `login-${uid()}` });
  const userBank = (await ins('user_banks', {
    user_id: w.u1, financial_institution_id: w.fi, credential_id: credential, kind: 'operator', status: 'active',
    confirmed_at: '2024-01-01T00:00:00Z',
  })).id;
  return { userBank, credential };
}

export function assignment(sql: Sql, w: World, userBank: string, broker: string, link: string, from: string, until: string | null) {
  return inserter(sql)('bank_user_assignments', {
    user_bank_id: userBank, user_id: w.u1, party_id: w.p1, financial_institution_id: w.fi, tenant_id: w.t1,
    broker_id: broker, valid_from: from, valid_until: until, store_code_id: w.sc1, origin_membership_broker_id: link,
  });
}

// ───────────── SQL statements ─────────────

/**
 * Splits an SQL script into statements, skipping `--` and block comments and keeping single-quoted,
 * double-quoted and dollar-quoted text (function bodies) intact. Returns each statement without its `;`.
 */
export function splitSqlStatements(text: string): string[] {
  const out: string[] = [];
  let current = '';
  let i = 0;
  while (i < text.length) {
    const ch = text[i]!;
    const rest = text.slice(i);
    if (rest.startsWith('--')) {
      const end = text.indexOf('\n', i);
      i = end === -1 ? text.length : end + 1;
      current += ' ';
      continue;
    }
    if (rest.startsWith('/*')) {
      const end = text.indexOf('*/', i + 2);
      if (end === -1) throw new Error('unterminated block comment');
      i = end + 2;
      current += ' ';
      continue;
    }
    const dollar = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(rest);
    if (dollar) {
      const tag = dollar[0];
      const end = text.indexOf(tag, i + tag.length);
      if (end === -1) throw new Error(`unterminated dollar quote ${tag}`);
      current += text.slice(i, end + tag.length);
      i = end + tag.length;
      continue;
    }
    if (ch === "'" || ch === '"') {
      let j = i + 1;
      for (;;) {
        if (j >= text.length) throw new Error(`unterminated ${ch} quote`);
        if (text[j] === ch) {
          if (text[j + 1] === ch) j += 2;
          else break;
        } else j += 1;
      }
      current += text.slice(i, j + 1);
      i = j + 1;
      continue;
    }
    if (ch === ';') {
      if (current.trim()) out.push(current.trim().replace(/\s+/g, ' '));
      current = '';
      i += 1;
      continue;
    }
    current += ch;
    i += 1;
  }
  if (current.trim()) out.push(current.trim().replace(/\s+/g, ' '));
  return out;
}

// ───────────── source tree ─────────────

/** `.ts` files under the given project folders (relative paths), recursively. */
export function sourceFiles(...folders: string[]): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(PROJECT_ROOT, dir), { withFileTypes: true })) {
      const rel = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith('.ts')) out.push(rel);
    }
  };
  for (const f of folders) if (fs.existsSync(path.join(PROJECT_ROOT, f))) walk(f);
  return out.sort();
}

/** A source file without its `//` line comments and block comments (so prose never matches a code rule). */
export function codeOf(file: string): string {
  return fs
    .readFileSync(path.join(PROJECT_ROOT, file), 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, ' ')
    .replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');
}
