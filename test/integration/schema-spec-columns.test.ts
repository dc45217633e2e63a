// The spec's column lists, encoded as data (schema-spec-support.ts), compared with the migrated
// database: every listed column exists with the spec's nullability (trailing `?`, R-DB-05) and type
// family; primary keys, the uniques and the references the spec names exist. Columns the spec does not
// list are allowed (the schema may add some); a missing column, a wrong nullability or a wrong type fails.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from '../support/services.ts';
import {
  AUTHORIZATION_TABLES, BANK_USER_TABLES, BROKER_TABLES, WORK_TABLES, parseColumns, readColumns, readForeignKeys,
  readPrimaryKeys, readUniques, type DbColumn, type DbForeignKey, type DbUnique, type SpecTable,
} from './schema-spec-support.ts';

let db: TestDatabase;
let columns: Map<string, DbColumn[]>;
let primaryKeys: Map<string, string[]>;
let uniques: DbUnique[];
let foreignKeys: DbForeignKey[];

beforeAll(async () => {
  db = await freshDatabase({ max: 2 });
  [columns, primaryKeys, uniques, foreignKeys] = await Promise.all([
    readColumns(db.sql), readPrimaryKeys(db.sql), readUniques(db.sql), readForeignKeys(db.sql),
  ]);
});
afterAll(async () => {
  await db?.drop();
});

/** What differs between the spec's column list and the table; empty when the table satisfies the spec. */
function columnMismatches(table: string, spec: SpecTable): string[] {
  const actual = new Map((columns.get(table) ?? []).map((c) => [c.name, c]));
  if (actual.size === 0) return [`table ${table} is missing`];
  const problems: string[] = [];
  for (const want of parseColumns(spec.columns)) {
    const got = actual.get(want.name);
    if (!got) {
      problems.push(`${table}.${want.name} is missing`);
      continue;
    }
    if (got.nullable !== want.nullable) {
      problems.push(`${table}.${want.name} is ${got.nullable ? 'nullable' : 'NOT NULL'}, spec says ${want.nullable ? 'nullable (?)' : 'NOT NULL'}`);
    }
    if (want.type !== null && got.type !== want.type) problems.push(`${table}.${want.name} is ${got.type}, spec says ${want.type}`);
    if (want.generated && !got.generated) problems.push(`${table}.${want.name} is not a generated column`);
  }
  const specNames = new Set(parseColumns(spec.columns).map((c) => c.name));
  const wantKey = spec.primaryKey ?? (specNames.has('id') ? ['id'] : null);
  if (wantKey) {
    const gotKey = primaryKeys.get(table);
    if (JSON.stringify([...(gotKey ?? [])].sort()) !== JSON.stringify([...wantKey].sort())) {
      problems.push(`${table} primary key is (${gotKey?.join(', ') ?? 'none'}), spec says (${wantKey.join(', ')})`);
    }
    if (wantKey.length === 1 && wantKey[0] === 'id' && !actual.get('id')?.identityAlways) {
      problems.push(`${table}.id is not GENERATED ALWAYS AS IDENTITY`);
    }
  }
  return problems;
}

describe('self-check of the column comparison', () => {
  it('R-DB-05 a wrong expectation turns red: missing column, wrong nullability, wrong type, wrong key', () => {
    expect(columnMismatches('brokers', { ids: '', columns: 'id; uid; party_id; created_at; updated_at' })).toEqual([]);
    expect(columnMismatches('brokers', { ids: '', columns: 'id; uid; nickname text' })).toEqual(['brokers.nickname is missing']);
    expect(columnMismatches('brokers', { ids: '', columns: 'id; uid?' })).toEqual(['brokers.uid is NOT NULL, spec says nullable (?)']);
    expect(columnMismatches('tenant_brokers', { ids: '', columns: 'broker_code' })).toEqual([
      'tenant_brokers.broker_code is nullable, spec says NOT NULL',
    ]);
    expect(columnMismatches('brokers', { ids: '', columns: 'uid bytea' })).toEqual(['brokers.uid is text, spec says bytea']);
    expect(columnMismatches('brokers', { ids: '', columns: 'party_id', primaryKey: ['party_id'] })).toEqual([
      'brokers primary key is (id), spec says (party_id)',
    ]);
    expect(columnMismatches('no_such_table', { ids: '', columns: 'id' })).toEqual(['table no_such_table is missing']);
  });
});

describe('tables of the three spec domains and the identity tables exist', () => {
  it('R-AUTHZ-01 the 19 authorization tables exist', () => {
    expect(Object.keys(AUTHORIZATION_TABLES)).toHaveLength(19);
    expect(Object.keys(AUTHORIZATION_TABLES).filter((t) => !columns.has(t))).toEqual([]);
  });

  it('R-BANK-01 the 4 bank-user tables exist', () => {
    expect(Object.keys(BANK_USER_TABLES)).toEqual(['user_banks', 'bank_user_assignments', 'bank_user_transfers', 'bank_credential_deliveries']);
    expect(Object.keys(BANK_USER_TABLES).filter((t) => !columns.has(t))).toEqual([]);
  });

  it('R-BRK-01 the 6 broker tables exist', () => {
    expect(Object.keys(BROKER_TABLES)).toEqual([
      'brokers', 'tenant_brokers', 'broker_affiliations', 'tenant_broker_accounts', 'store_codes', 'broker_store_codes',
    ]);
    expect(Object.keys(BROKER_TABLES).filter((t) => !columns.has(t))).toEqual([]);
  });

  it('R-AUTH-02 the identity tables exist: users, user_logins (per tenant), platform_logins (no tenant), user_credentials, sessions, refresh_tokens, session_memberships, session_membership_brokers, session_contexts', () => {
    const identity = [
      'users', 'user_logins', 'platform_logins', 'user_credentials', 'sessions', 'refresh_tokens', 'session_memberships',
      'session_membership_brokers', 'session_contexts',
    ];
    expect(identity.filter((t) => !columns.has(t))).toEqual([]);
    const names = (t: string) => columns.get(t)!.map((c) => c.name);
    expect(names('user_logins')).toContain('tenant_id');
    expect(columns.get('user_logins')!.find((c) => c.name === 'tenant_id')!.nullable).toBe(false);
    expect(names('platform_logins')).not.toContain('tenant_id');
  });
});

describe('R-DB-05 column lists: name, nullability (trailing ?) and type family', () => {
  const groups: Array<[string, Record<string, SpecTable>]> = [
    ['authorization', AUTHORIZATION_TABLES],
    ['bank-user', BANK_USER_TABLES],
    ['broker', BROKER_TABLES],
    ['run, trail, idempotency and outbox', WORK_TABLES],
  ];
  for (const [group, tables] of groups) {
    describe(`${group} tables`, () => {
      for (const [table, spec] of Object.entries(tables)) {
        it(`${spec.ids} R-DB-05 ${table} has the spec's columns, nullability, types and primary key`, () => {
          expect(columnMismatches(table, spec)).toEqual([]);
        });
      }
    });
  }

  it('R-RUN-16 R-TRL-07 R-IDM-02 R-OBX-01 the platform tables are their tenant twins without tenant_id', () => {
    for (const [tenantTable, platformTable] of [
      ['task_runs', 'platform_task_runs'], ['task_run_events', 'platform_task_run_events'],
      ['idempotency_keys', 'platform_idempotency_keys'], ['outbox_messages', 'platform_outbox_messages'],
    ] as const) {
      const strip = (t: string) => columns.get(t)!.map((c) => `${c.name}:${c.type}:${c.nullable}`);
      expect(strip(platformTable), platformTable).toEqual(strip(tenantTable).filter((c) => !c.startsWith('tenant_id:')));
    }
  });
});

describe('value sets the spec lists for text columns', () => {
  const QUEUES = 'critical default bulk maintenance';
  const RUN_STATUSES = 'queued running retrying succeeded failed skipped';
  const TRAIL_EVENTS = 'queued sent received started progress retry_scheduled succeeded failed skipped dead_lettered released_on_shutdown redriven';
  const LEDGER_STATUSES = 'processing completed failed_retryable failed_permanent';
  // [requirement ids, table, column, values]
  const cases: Array<[string, string, string, string]> = [
    ['R-AUTHZ-02', 'permissions', 'scope', 'platform tenant broker'],
    ['R-AUTHZ-05', 'permission_changes', 'change', 'added modified deprecated renamed'],
    ['R-AUTHZ-10', 'access_profile_templates', 'scope', 'tenant broker'],
    ['R-AUTHZ-10', 'access_profile_templates', 'auto_assign', 'tenant_admin broker_master broker_member'],
    ['R-AUTHZ-14', 'access_profile_template_change_decisions', 'decision', 'followed detached'],
    ['R-AUTHZ-18', 'platform_access_profile_templates', 'scope', 'tenant broker'],
    ['R-AUTHZ-18', 'platform_access_profile_templates', 'auto_assign', 'tenant_admin broker_master broker_member'],
    ['R-AUTHZ-25', 'platform_invitations', 'channel', 'email phone'],
    ['R-AUTHZ-25', 'platform_invitations', 'status', 'pending accepted revoked expired'],
    ['R-AUTHZ-28', 'platform_invitation_deliveries', 'channel', 'email sms whatsapp'],
    ['R-AUTHZ-28', 'platform_invitation_deliveries', 'status', 'queued sent delivered opened clicked bounced failed complained'],
    ['R-BRK-10', 'broker_store_codes', 'regime', 'standard substabelecido indicado subzero'],
    ['R-RUN-04', 'task_runs', 'queue', QUEUES],
    ['R-RUN-04', 'task_runs', 'trigger', 'dispatch event redrive'],
    ['R-RUN-05', 'task_runs', 'actor_kind', 'user system'],
    ['R-RUN-07', 'task_runs', 'status', RUN_STATUSES],
    ['R-RUN-16', 'platform_task_runs', 'queue', QUEUES],
    ['R-RUN-16', 'platform_task_runs', 'trigger', 'dispatch event redrive schedule'],
    ['R-RUN-16', 'platform_task_runs', 'actor_kind', 'system scheduler'],
    ['R-RUN-16', 'platform_task_runs', 'status', RUN_STATUSES],
    ['R-TRL-03', 'task_run_events', 'event', TRAIL_EVENTS],
    ['R-TRL-07', 'platform_task_run_events', 'event', TRAIL_EVENTS],
    ['R-IDM-04', 'idempotency_keys', 'status', LEDGER_STATUSES],
    ['R-IDM-04', 'platform_idempotency_keys', 'status', LEDGER_STATUSES],
    ['R-OBX-02', 'outbox_messages', 'queue', QUEUES],
    ['R-OBX-02', 'platform_outbox_messages', 'queue', QUEUES],
  ];
  /**
   * Value sets of the CHECKs that are exactly `column IN (...)` on the table: written as a list
   * (ARRAY['a'::text, ...]) or as one array constant ('{a,...}'::text[], the work tables' since 0027).
   */
  async function valueChecks(table: string, column: string): Promise<string[][]> {
    const defs = await db.sql`SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint
      WHERE contype = 'c' AND conrelid = ${table}::regclass`;
    const whole = new RegExp(`^CHECK \\(\\(${column} = ANY \\((?:ARRAY\\[([^\\]]*)\\]|'\\{([a-z_,]*)\\}'::text\\[\\])\\)\\)\\)$`);
    return defs.flatMap((r) => {
      const m = whole.exec(r.d as string);
      if (!m) return [];
      return [(m[1] !== undefined ? [...m[1].matchAll(/'([^']*)'::text/g)].map((v) => v[1]!) : m[2]!.split(',')).sort()];
    });
  }
  for (const [ids, table, column, values] of cases) {
    it(`${ids} ${table}.${column} accepts exactly: ${values}`, async () => {
      expect(await valueChecks(table, column)).toEqual([values.split(' ').sort()]);
    });
  }
  it('self-check: a column without a value CHECK yields none', async () => {
    expect(await valueChecks('user_banks', 'kind')).toEqual([]);
  });
});

/** A unique (constraint or index) over exactly these columns, with this predicate, or undefined. */
function findUnique(table: string, cols: string[], predicate: string | null = null): DbUnique | undefined {
  const key = [...cols].sort().join(',');
  return uniques.find((u) => u.table === table && [...u.columns].sort().join(',') === key && u.predicate === predicate);
}

/** A foreign key from exactly these columns (in order) to these target columns (in order). */
function hasReference(table: string, cols: string[], refTable: string, refCols: string[]): boolean {
  return foreignKeys.some((f) => f.table === table && f.refTable === refTable &&
    JSON.stringify(f.columns) === JSON.stringify(cols) && JSON.stringify(f.refColumns) === JSON.stringify(refCols));
}

it('self-check: a unique or a reference the database lacks is reported missing', () => {
  expect(findUnique('tenant_brokers', ['tenant_id', 'broker_id'])).toBeDefined();
  expect(findUnique('tenant_brokers', ['broker_code'])).toBeUndefined();
  expect(findUnique('broker_affiliations', ['tenant_id', 'broker_id'])).toBeUndefined(); // only partial
  expect(hasReference('brokers', ['party_id'], 'parties', ['id'])).toBe(true);
  expect(hasReference('broker_affiliations', ['parent_id', 'tenant_id'], 'tenant_brokers', ['tenant_id', 'broker_id'])).toBe(false);
});

describe('uniques the spec names', () => {
  // [requirement ids, table, columns, partial-index predicate as PostgreSQL prints it]
  const cases: Array<[string, string, string[], string | null]> = [
    ['R-AUTHZ-02', 'permissions', ['code'], null],
    ['R-AUTHZ-10', 'access_profile_templates', ['id', 'tenant_id'], null],
    ['R-AUTHZ-10', 'access_profile_templates', ['id', 'tenant_id', 'scope'], null],
    ['R-AUTHZ-17', 'platform_tenant_blueprints', ['name'], null],
    ['R-AUTHZ-21', 'platform_access_profiles', ['name'], null],
    ['R-AUTHZ-23', 'platform_grants', ['user_id'], '(revoked_at IS NULL)'],
    ['R-AUTHZ-25', 'platform_invitations', ['uid'], null],
    ['R-AUTHZ-25 R-AUTHZ-26', 'platform_invitations', ['token_sha256'], null],
    ['R-AUTHZ-28', 'platform_invitation_deliveries', ['uid'], null],
    ['R-AUTHZ-29', 'platform_invitation_deliveries', ['provider', 'provider_message_id'], null],
    ['R-AUTHZ-31', 'platform_invitation_delivery_events', ['delivery_id', 'dedup_key'], null],
    ['R-AUTHZ-32', 'session_contexts', ['id', 'tenant_id'], null],
    ['R-AUTHZ-32', 'session_contexts', ['session_id'], '(left_at IS NULL)'],
    ['R-BANK-03', 'user_banks', ['credential_id'], null],
    ['R-BANK-04', 'user_banks', ['id', 'credential_id'], null],
    ['R-BANK-04', 'user_banks', ['id', 'user_id', 'financial_institution_id'], null],
    ['R-BANK-04', 'user_banks', ['user_id', 'financial_institution_id'], '(closed_at IS NULL)'],
    ['R-BANK-07 R-IDX-05', 'bank_user_assignments', ['user_bank_id'], '(valid_until IS NULL)'],
    ['R-BANK-07', 'bank_user_assignments', ['id', 'tenant_id'], null],
    ['R-BANK-07', 'bank_user_assignments', ['id', 'user_bank_id'], null],
    ['R-BANK-07', 'bank_user_assignments', ['id', 'user_bank_id', 'tenant_id', 'broker_id'], null],
    ['R-BANK-11', 'bank_user_transfers', ['from_assignment_id'], null],
    ['R-BANK-11', 'bank_user_transfers', ['to_assignment_id'], null],
    ['R-BRK-09', 'store_codes', ['tenant_id', 'financial_institution_id', 'code'], null],
    ['R-AUTHZ-08', 'access_profiles', ['id', 'tenant_id', 'broker_id'], null],
    ['R-AUTHZ-08', 'access_profiles', ['id', 'tenant_id'], null],
    ['R-AUTHZ-08', 'access_profiles', ['id', 'tenant_id', 'scope'], null],
    ['R-BRK-03', 'brokers', ['uid'], null],
    ['R-BRK-04', 'tenant_brokers', ['tenant_id', 'broker_id'], null],
    ['R-BRK-04', 'tenant_brokers', ['tenant_id', 'broker_code'], null],
    ['R-BRK-05', 'broker_affiliations', ['uid'], null],
    ['R-BRK-05', 'broker_affiliations', ['tenant_id', 'broker_id'], '(ended_on IS NULL)'],
    ['R-BRK-07', 'tenant_broker_accounts', ['tenant_id', 'broker_id', 'tenant_account_id'], '(valid_until IS NULL)'],
  ];
  for (const [ids, table, cols, predicate] of cases) {
    it(`${ids} ${table} is unique on (${cols.join(', ')})${predicate ? ` where ${predicate}` : ''}`, () => {
      const found = findUnique(table, cols, predicate);
      expect(found, `${table} (${cols.join(', ')}) ${predicate ?? ''}`).toBeDefined();
    });
  }

  it('R-BRK-09 store_codes has both support uniques, (id, financial_institution_id, tenant_id) and (id, tenant_id, financial_institution_id), in that column order', () => {
    // Same column set, different order: each is the target of a different composite reference.
    const ordered = uniques.filter((u) => u.table === 'store_codes' && u.predicate === null).map((u) => u.columns.join(','));
    expect(ordered).toEqual(expect.arrayContaining(['id,financial_institution_id,tenant_id', 'id,tenant_id,financial_institution_id']));
  });

  it('R-AUTHZ-12 R-AUTHZ-20 the template link tables have no unique beyond their composite key', () => {
    for (const t of ['access_profile_template_permissions', 'platform_access_profile_template_permissions']) {
      expect(uniques.filter((u) => u.table === t).map((u) => u.name), t).toEqual([]);
    }
  });
});

describe('references the spec names', () => {
  const cases: Array<[string, string, string[], string, string[]]> = [
    ['R-AUTHZ-04', 'permission_use_cases', ['permission_id'], 'permissions', ['id']],
    ['R-AUTHZ-07', 'access_profiles', ['template_id', 'tenant_id', 'scope'], 'access_profile_templates', ['id', 'tenant_id', 'scope']],
    ['R-AUTHZ-07 R-BRK-02', 'access_profiles', ['tenant_id', 'broker_id'], 'tenant_brokers', ['tenant_id', 'broker_id']],
    ['R-AUTHZ-07', 'access_profiles', ['detached_by_user_id'], 'users', ['id']],
    ['R-AUTHZ-07', 'access_profiles', ['tenant_id'], 'tenants', ['id']],
    ['R-AUTHZ-10', 'access_profile_templates', ['source_platform_template_id'], 'platform_access_profile_templates', ['id']],
    ['R-AUTHZ-13', 'access_profile_template_changes', ['template_id', 'tenant_id'], 'access_profile_templates', ['id', 'tenant_id']],
    ['R-AUTHZ-18', 'platform_access_profile_templates', ['blueprint_id'], 'platform_tenant_blueprints', ['id']],
    ['R-AUTHZ-23', 'platform_grants', ['origin_platform_invitation_id'], 'platform_invitations', ['id']],
    ['R-BRK-03 R-BRK-02', 'brokers', ['party_id'], 'parties', ['id']],
    ['R-BRK-05', 'broker_affiliations', ['tenant_id', 'parent_id'], 'tenant_brokers', ['tenant_id', 'broker_id']],
    ['R-BRK-07', 'tenant_broker_accounts', ['tenant_account_id', 'tenant_id'], 'tenant_accounts', ['id', 'tenant_id']],
    ['R-BANK-08', 'bank_user_assignments', ['origin_membership_broker_id', 'tenant_id', 'broker_id', 'user_id'],
      'membership_brokers', ['id', 'tenant_id', 'broker_id', 'user_id']],
    ['R-BANK-08', 'bank_user_assignments', ['store_code_id', 'financial_institution_id', 'tenant_id'],
      'store_codes', ['id', 'financial_institution_id', 'tenant_id']],
    ['R-BANK-08', 'bank_user_assignments', ['tenant_id', 'broker_id'], 'tenant_brokers', ['tenant_id', 'broker_id']],
    ['R-BANK-08', 'bank_user_assignments', ['user_bank_id', 'user_id', 'financial_institution_id'],
      'user_banks', ['id', 'user_id', 'financial_institution_id']],
    ['R-BANK-08', 'bank_user_assignments', ['user_id', 'party_id'], 'users', ['id', 'party_id']],
    ['R-BANK-11', 'bank_user_transfers', ['from_assignment_id', 'user_bank_id', 'tenant_id', 'from_broker_id'],
      'bank_user_assignments', ['id', 'user_bank_id', 'tenant_id', 'broker_id']],
    ['R-BANK-11', 'bank_user_transfers', ['to_assignment_id', 'user_bank_id', 'tenant_id', 'to_broker_id'],
      'bank_user_assignments', ['id', 'user_bank_id', 'tenant_id', 'broker_id']],
  ];
  for (const [ids, table, cols, refTable, refCols] of cases) {
    it(`${ids} ${table} (${cols.join(', ')}) references ${refTable} (${refCols.join(', ')})`, () => {
      expect(hasReference(table, cols, refTable, refCols)).toBe(true);
    });
  }

  it('R-BRK-02 the broker is global: brokers has no tenant, and the broker tables reference (tenant_id, broker_id) of tenant_brokers', () => {
    expect(columns.get('brokers')!.map((c) => c.name)).not.toContain('tenant_id');
    for (const t of ['broker_affiliations', 'tenant_broker_accounts', 'store_codes', 'broker_store_codes']) {
      expect(hasReference(t, ['tenant_id', 'broker_id'], 'tenant_brokers', ['tenant_id', 'broker_id']), t).toBe(true);
    }
    // Every table carrying both tenant_id and broker_id pins the pair through a composite reference
    // (to tenant_brokers itself, or to a row that is itself pinned to it).
    const pairTables = [...columns].filter(([t, cs]) => t !== 'tenant_brokers' &&
      cs.some((c) => c.name === 'tenant_id') && cs.some((c) => c.name === 'broker_id')).map(([t]) => t);
    expect(pairTables.length).toBeGreaterThanOrEqual(10);
    const unpinned = pairTables.filter((t) => !foreignKeys.some((f) => f.table === t &&
      f.columns.includes('tenant_id') && f.columns.includes('broker_id')));
    expect(unpinned).toEqual([]);
  });
});
