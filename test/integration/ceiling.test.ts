// Scope ceiling of permissions, in the database: the matrix function, the 8 triggers, the refusals
// (SQLSTATE 23514, constraint permission_scope_ceiling) and the concurrent races on real connections.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/db/client.ts';
import { createSql } from '../../src/db/client.ts';
import { HOLDER_SCOPES, SCOPE_CEILING } from '../../src/permissions/scope-ceiling.ts';
import { freshDatabase, type TestDatabase } from '../support/services.ts';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import { refusal } from '../support/refusal.ts';

/** A clone of the migrated template: 0012, 0013 and 0017 loaded the ceiling SQL. */
async function ceilingDatabase(): Promise<TestDatabase> {
  const db = await freshDatabase({ max: 6 });
  const [state] = await db.sql`SELECT to_regprocedure('permission_scope_ceiling(text)') IS NOT NULL AS ceiling`;
  if (!state!.ceiling) throw new Error('the migrated template has no permission_scope_ceiling(text): are 0012/0013/0017 in the journal?');
  return db;
}

interface Fixture {
  tenantId: string;
  brokerId: string;
  blueprintId: string;
  tenantProfile: string;
  brokerProfile: string;
  tenantTemplate: string;
  brokerTemplate: string;
  platformProfile: string;
  platformTenantTemplate: string;
  platformBrokerTemplate: string;
}

let counter = 0;
async function permission(sql: Sql, scope: string): Promise<{ id: string; code: string }> {
  counter += 1;
  const code = `ceiling_test.p${counter}.${scope}`;
  const [row] = await sql`INSERT INTO permissions (code, scope, description) VALUES (${code}, ${scope}, 'test')
    RETURNING id::text AS id`;
  return { id: row!.id as string, code };
}

async function one(sql: Sql, text: string, params: unknown[] = []): Promise<string> {
  const rows = await sql.unsafe(text, params as never[]);
  return String(rows[0]!.id);
}

async function buildFixture(sql: Sql): Promise<Fixture> {
  const blueprintId = await one(
    sql,
    `INSERT INTO platform_tenant_blueprints (name, description) VALUES ('ceiling-bp', 'test') RETURNING id`,
  );
  const tenantId = await one(sql, `INSERT INTO tenants (uid, name, blueprint_id) VALUES ('ceiling-t', 't', $1) RETURNING id`, [
    blueprintId,
  ]);
  const partyId = await one(sql, `INSERT INTO parties (kind, display_name) VALUES ('company', 'b') RETURNING id`);
  const brokerId = await one(sql, `INSERT INTO brokers (uid, party_id) VALUES ('ceiling-b', $1) RETURNING id`, [partyId]);
  await sql`INSERT INTO tenant_brokers (tenant_id, broker_id) VALUES (${tenantId}, ${brokerId})`;
  const base = { tenantId, brokerId, blueprintId } as Fixture;
  return {
    ...base,
    tenantProfile: await holder(sql, base, 'access_profiles', 'tenant'),
    brokerProfile: await holder(sql, base, 'access_profiles', 'broker'),
    tenantTemplate: await holder(sql, base, 'access_profile_templates', 'tenant'),
    brokerTemplate: await holder(sql, base, 'access_profile_templates', 'broker'),
    platformProfile: await one(sql, `INSERT INTO platform_access_profiles (name) VALUES ('ceiling-pp') RETURNING id`),
    platformTenantTemplate: await holder(sql, base, 'platform_access_profile_templates', 'tenant'),
    platformBrokerTemplate: await holder(sql, base, 'platform_access_profile_templates', 'broker'),
  };
}

/** A new holder row of the given table and scope (names are unique per call). */
async function holder(sql: Sql, f: Fixture, table: string, scope: 'tenant' | 'broker'): Promise<string> {
  counter += 1;
  const name = `holder-${counter}`;
  const brokerId = scope === 'broker' ? f.brokerId : null;
  switch (table) {
    case 'access_profiles':
      return one(sql, `INSERT INTO access_profiles (tenant_id, broker_id, name) VALUES ($1, $2, $3) RETURNING id`, [
        f.tenantId,
        brokerId,
        name,
      ]);
    case 'access_profile_templates':
      return one(sql, `INSERT INTO access_profile_templates (tenant_id, scope, name, description) VALUES ($1, $2, $3, 'test') RETURNING id`, [
        f.tenantId,
        scope,
        name,
      ]);
    case 'platform_access_profile_templates':
      return one(
        sql,
        `INSERT INTO platform_access_profile_templates (blueprint_id, scope, name, description) VALUES ($1, $2, $3, 'test') RETURNING id`,
        [f.blueprintId, scope, name],
      );
    default:
      throw new Error(`no holder factory for ${table}`);
  }
}

/** R-CEIL-02 as the spec's table gives it: holder scope → accepted permission scopes. */
const SPEC_MATRIX: Record<string, string[]> = { platform: ['platform'], tenant: ['tenant', 'broker'], broker: ['broker'] };

type Link = { table: string; holderColumn: string; holder: keyof Fixture };
const LINKS = {
  tenantProfile: { table: 'access_profile_permissions', holderColumn: 'access_profile_id', holder: 'tenantProfile' },
  brokerProfile: { table: 'access_profile_permissions', holderColumn: 'access_profile_id', holder: 'brokerProfile' },
  tenantTemplate: { table: 'access_profile_template_permissions', holderColumn: 'template_id', holder: 'tenantTemplate' },
  brokerTemplate: { table: 'access_profile_template_permissions', holderColumn: 'template_id', holder: 'brokerTemplate' },
  platformProfile: {
    table: 'platform_access_profile_permissions',
    holderColumn: 'platform_access_profile_id',
    holder: 'platformProfile',
  },
  platformTenantTemplate: {
    table: 'platform_access_profile_template_permissions',
    holderColumn: 'template_id',
    holder: 'platformTenantTemplate',
  },
  platformBrokerTemplate: {
    table: 'platform_access_profile_template_permissions',
    holderColumn: 'template_id',
    holder: 'platformBrokerTemplate',
  },
} satisfies Record<string, Link>;
const HOLDER_SCOPE: Record<keyof typeof LINKS, string> = {
  tenantProfile: 'tenant',
  brokerProfile: 'broker',
  tenantTemplate: 'tenant',
  brokerTemplate: 'broker',
  platformProfile: 'platform',
  platformTenantTemplate: 'tenant',
  platformBrokerTemplate: 'broker',
};

function link(sql: Sql, f: Fixture, which: keyof typeof LINKS, permissionId: string) {
  const l = LINKS[which];
  return sql.unsafe(`INSERT INTO ${l.table} (${l.holderColumn}, permission_id) VALUES ($1, $2)`, [f[l.holder], permissionId]);
}

interface PgError {
  code?: string;
  constraint_name?: string;
  message?: string;
}

function expectCeilingError(error: PgError, code: string, scope: string, expected: string[]) {
  expect(error.code).toBe('23514');
  expect(error.constraint_name).toBe('permission_scope_ceiling');
  expect(error.message).toContain(code);
  expect(error.message).toContain(`scope ${scope}`);
  expect(error.message).toContain(`accepts only scope ${expected.join(' or ')}`);
}

/** Links whose permission is above its holder's ceiling; must always be empty. */
async function ceilingBreaches(sql: Sql): Promise<number> {
  const [row] = await sql`SELECT count(*)::int AS n FROM (
    SELECT 1 FROM access_profile_permissions l JOIN access_profiles h ON h.id = l.access_profile_id
      JOIN permissions p ON p.id = l.permission_id WHERE p.scope <> ALL (permission_scope_ceiling(h.scope))
    UNION ALL SELECT 1 FROM access_profile_template_permissions l JOIN access_profile_templates h ON h.id = l.template_id
      JOIN permissions p ON p.id = l.permission_id WHERE p.scope <> ALL (permission_scope_ceiling(h.scope))
    UNION ALL SELECT 1 FROM platform_access_profile_permissions l JOIN permissions p ON p.id = l.permission_id
      WHERE p.scope <> 'platform'
    UNION ALL SELECT 1 FROM platform_access_profile_template_permissions l
      JOIN platform_access_profile_templates h ON h.id = l.template_id
      JOIN permissions p ON p.id = l.permission_id WHERE p.scope <> ALL (permission_scope_ceiling(h.scope))) x`;
  return row!.n as number;
}

describe('scope ceiling (database)', () => {
  let db: TestDatabase;
  let f: Fixture;

  beforeAll(async () => {
    db = await ceilingDatabase();
    f = await buildFixture(db.sql);
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('R-CEIL-02 R-CEIL-04 the application mirror equals permission_scope_ceiling() for every holder scope', async () => {
    for (const holder of HOLDER_SCOPES) {
      const [row] = await db.sql`SELECT permission_scope_ceiling(${holder}) AS accepted`;
      expect([...(row!.accepted as string[])].sort(), holder).toEqual([...SCOPE_CEILING[holder]].sort());
      expect([...(row!.accepted as string[])].sort(), holder).toEqual([...SPEC_MATRIX[holder]!].sort());
    }
    expect([...HOLDER_SCOPES].sort()).toEqual(Object.keys(SPEC_MATRIX).sort());
    const [unknown] = await db.sql`SELECT permission_scope_ceiling('nobody') AS accepted`;
    expect(unknown!.accepted).toEqual([]);
  });

  it('R-CEIL-05 R-CEIL-06 R-CEIL-07 R-AUTHZ-02 the eight ceiling triggers exist with their timing and events', async () => {
    const rows = await db.sql`
      SELECT t.tgname AS name, c.relname AS table, pg_get_triggerdef(t.oid) AS def
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
       WHERE NOT t.tgisinternal AND t.tgname LIKE '%scope_ceiling' ORDER BY t.tgname`;
    const defs = Object.fromEntries(rows.map((r) => [r.name as string, r.def as string]));
    expect(Object.keys(defs).sort()).toEqual(
      [
        'access_profile_permissions_scope_ceiling',
        'access_profile_template_permissions_scope_ceiling',
        'access_profile_templates_scope_ceiling',
        'access_profiles_scope_ceiling',
        'permissions_scope_ceiling',
        'platform_access_profile_permissions_scope_ceiling',
        'platform_access_profile_template_permissions_scope_ceiling',
        'platform_access_profile_templates_scope_ceiling',
      ].sort(),
    );
    for (const table of [
      'access_profile_permissions',
      'access_profile_template_permissions',
      'platform_access_profile_permissions',
      'platform_access_profile_template_permissions',
    ]) {
      expect(defs[`${table}_scope_ceiling`]).toContain(`BEFORE INSERT OR UPDATE ON public.${table} FOR EACH ROW`);
    }
    expect(defs.access_profiles_scope_ceiling).toContain('AFTER UPDATE ON public.access_profiles FOR EACH ROW EXECUTE');
    for (const table of ['access_profile_templates', 'platform_access_profile_templates']) {
      expect(defs[`${table}_scope_ceiling`]).toContain(`AFTER UPDATE OF scope ON public.${table} FOR EACH ROW WHEN`);
      expect(defs[`${table}_scope_ceiling`]).toContain('(old.scope IS DISTINCT FROM new.scope)');
    }
    expect(defs.permissions_scope_ceiling).toContain('AFTER UPDATE OF scope ON public.permissions FOR EACH ROW');
  });

  it('R-CEIL-08 the ceiling reads take FOR SHARE locks (redefined by 0017 with the same signatures)', async () => {
    for (const signature of [
      'permission_scope_ceiling_read_permission(bigint)',
      'permission_scope_ceiling_read_holder(text,bigint)',
      'permission_scope_ceiling_holder_violations(text,bigint,text)',
      'permission_scope_ceiling_permission_violations(bigint,text)',
    ]) {
      const [row] = await db.sql`SELECT pg_get_functiondef(to_regprocedure(${signature})) AS def`;
      expect(row!.def, signature).toMatch(/FOR SHARE/);
    }
  });

  it('R-CEIL-01 R-CEIL-02 R-CEIL-03 R-AUTHZ-09 R-AUTHZ-22 every holder accepts exactly the scopes of the matrix', async () => {
    for (const which of Object.keys(LINKS) as Array<keyof typeof LINKS>) {
      const holderScope = HOLDER_SCOPE[which];
      for (const scope of ['platform', 'tenant', 'broker']) {
        const p = await permission(db.sql, scope);
        // The spec's matrix, written out (not the code's mirror, which R-CEIL-04 compares separately).
        const accepted = SPEC_MATRIX[holderScope]!.includes(scope);
        if (accepted) {
          await link(db.sql, f, which, p.id);
        } else {
          const error = await refusal(link(db.sql, f, which, p.id));
          expectCeilingError(error, p.code, scope, SPEC_MATRIX[holderScope]!);
        }
      }
    }
    expect(await ceilingBreaches(db.sql)).toBe(0);
  });

  it('R-CEIL-13 a grant by a non-holder, beyond what the grantor holds, and a self-grant all pass the database', async () => {
    // Grant rules (only what one holds, no self-grant, grantor position) belong to the grant routes: the
    // database must accept links made under any actor as long as the scopes fit.
    const personUser = async (name: string) => {
      const party = await one(db.sql, `INSERT INTO parties (kind, display_name) VALUES ('person', $1) RETURNING id`, [name]);
      return one(db.sql, `INSERT INTO users (party_id) VALUES ($1) RETURNING id`, [party]);
    };
    const member = async (userId: string) =>
      one(db.sql, `INSERT INTO memberships (uid, tenant_id, user_id) VALUES ($1, $2, $3) RETURNING id`, [`ceil13-${userId}`, f.tenantId, userId]);
    const asUser = <T>(userId: string, membershipId: string, work: (tx: Sql) => Promise<T>) =>
      inUnitOfWork(db.sql, { kind: 'user', tenantId: f.tenantId, userId, membershipId, label: 'grantor' }, (tx) => work(tx as unknown as Sql));

    // A grantor holding no profile at all links a tenant permission to a tenant profile and a broker
    // permission to a broker profile it has no position in.
    const outsider = await personUser('outsider');
    const outsiderMembership = await member(outsider);
    const tenantPerm = await permission(db.sql, 'tenant');
    const brokerPerm = await permission(db.sql, 'broker');
    await asUser(outsider, outsiderMembership, async (tx) => {
      await link(tx, f, 'tenantProfile', tenantPerm.id);
      await link(tx, f, 'brokerProfile', brokerPerm.id);
      const [ctx] = await tx`SELECT current_setting('app.user_id') AS u`;
      expect(ctx!.u).toBe(outsider);
    });

    // A self-grant: the grantor holds the profile it adds a permission to.
    const self = await personUser('self');
    const selfMembership = await member(self);
    const ownProfile = await holder(db.sql, f, 'access_profiles', 'tenant');
    await db.sql`INSERT INTO membership_access_profiles (tenant_id, membership_id, access_profile_id, valid_from)
      VALUES (${f.tenantId}, ${selfMembership}, ${ownProfile}, '2024-01-01')`;
    const selfPerm = await permission(db.sql, 'tenant');
    await asUser(self, selfMembership, (tx) => link(tx, { ...f, tenantProfile: ownProfile }, 'tenantProfile', selfPerm.id));

    // A platform operator adding a permission to the platform profile of its own grant.
    const operator = await personUser('operator');
    const invitation = await one(db.sql, `INSERT INTO platform_invitations (uid, channel, destination, destination_normalized,
        token_sha256, platform_access_profile_id, status, expires_at, created_by_process)
      VALUES ('ceil13-inv', 'email', 'o@x.io', 'o@x.io', sha256('ceil13'::bytea), $1, 'accepted', '2099-01-01', 'test') RETURNING id`,
    [f.platformProfile]);
    await db.sql`INSERT INTO platform_grants (user_id, platform_access_profile_id, granted_by_user_id, reason, origin_platform_invitation_id)
      VALUES (${operator}, ${f.platformProfile}, ${operator}, 'self', ${invitation})`;
    const platformPerm = await permission(db.sql, 'platform');
    await db.sql.begin(async (tx) => {
      await tx`SELECT set_config('app.user_id', ${operator}, true)`;
      await link(tx as unknown as Sql, f, 'platformProfile', platformPerm.id);
    });

    const linked = await db.sql`SELECT permission_id::text AS id FROM access_profile_permissions
        WHERE permission_id IN (${tenantPerm.id}, ${brokerPerm.id}, ${selfPerm.id})
      UNION ALL SELECT permission_id::text FROM platform_access_profile_permissions WHERE permission_id = ${platformPerm.id}`;
    expect(linked.map((r) => r.id).sort()).toEqual([tenantPerm.id, brokerPerm.id, selfPerm.id, platformPerm.id].sort());
    // The scopes still decide: the same self-granting actor is refused a permission above the profile.
    const above = await permission(db.sql, 'platform');
    const refused = await refusal(asUser(self, selfMembership, (tx) => link(tx, { ...f, tenantProfile: ownProfile }, 'tenantProfile', above.id)));
    expectCeilingError(refused, above.code, 'platform', ['tenant', 'broker']);
  });

  it('R-CEIL-11 each link table refuses with 23514, permission_scope_ceiling and code, scope, expected scope', async () => {
    const cases: Array<[keyof typeof LINKS, string, string[]]> = [
      ['brokerProfile', 'tenant', ['broker']],
      ['tenantTemplate', 'platform', ['tenant', 'broker']],
      ['platformProfile', 'broker', ['platform']],
      ['platformBrokerTemplate', 'tenant', ['broker']],
    ];
    for (const [which, scope, expected] of cases) {
      const p = await permission(db.sql, scope);
      const error = await refusal(link(db.sql, f, which, p.id));
      expectCeilingError(error, p.code, scope, expected);
      expect(error.message).toContain(LINKS[which].table.replace(/_permissions$/, 's'));
    }
  });

  it('R-CEIL-11 an UPDATE of a link row is checked like an insert', async () => {
    const ok = await permission(db.sql, 'broker');
    const above = await permission(db.sql, 'tenant');
    await link(db.sql, f, 'brokerProfile', ok.id);
    const error = await refusal(
      db.sql`UPDATE access_profile_permissions SET permission_id = ${above.id}
              WHERE access_profile_id = ${f.brokerProfile} AND permission_id = ${ok.id}`,
    );
    expectCeilingError(error, above.code, 'tenant', ['broker']);
  });

  it('R-CEIL-06 R-CEIL-11 a holder rescope is refused while it holds a permission above the new scope', async () => {
    // access_profiles: scope follows broker_id (generated column), the trigger is plain AFTER UPDATE.
    const profile = await holder(db.sql, f, 'access_profiles', 'tenant');
    const tenantOnly = await permission(db.sql, 'tenant');
    await db.sql`INSERT INTO access_profile_permissions (access_profile_id, permission_id) VALUES (${profile}, ${tenantOnly.id})`;
    const error = await refusal(db.sql`UPDATE access_profiles SET broker_id = ${f.brokerId} WHERE id = ${profile}`);
    expectCeilingError(error, tenantOnly.code, 'tenant', ['broker']);
    // A plain update that keeps the scope passes.
    await db.sql`UPDATE access_profiles SET name = 'renamed' WHERE id = ${profile}`;

    const template = await holder(db.sql, f, 'access_profile_templates', 'tenant');
    const forTemplate = await permission(db.sql, 'tenant');
    await db.sql`INSERT INTO access_profile_template_permissions (template_id, permission_id) VALUES (${template}, ${forTemplate.id})`;
    const e2 = await refusal(db.sql`UPDATE access_profile_templates SET scope = 'broker' WHERE id = ${template}`);
    expectCeilingError(e2, forTemplate.code, 'tenant', ['broker']);

    const platformTemplate = await holder(db.sql, f, 'platform_access_profile_templates', 'tenant');
    const forPlatformTemplate = await permission(db.sql, 'tenant');
    await db.sql`INSERT INTO platform_access_profile_template_permissions (template_id, permission_id)
                 VALUES (${platformTemplate}, ${forPlatformTemplate.id})`;
    const e3 = await refusal(
      db.sql`UPDATE platform_access_profile_templates SET scope = 'broker' WHERE id = ${platformTemplate}`,
    );
    expectCeilingError(e3, forPlatformTemplate.code, 'tenant', ['broker']);
  });

  it('R-CEIL-06 a holder rescope that keeps every permission under the ceiling passes', async () => {
    const [t] = await db.sql`SELECT id::text AS id FROM access_profile_templates WHERE id = ${f.brokerTemplate}`;
    const broker = await permission(db.sql, 'broker');
    await link(db.sql, f, 'brokerTemplate', broker.id);
    await db.sql`UPDATE access_profile_templates SET scope = 'tenant' WHERE id = ${t!.id}`;
    await db.sql`UPDATE access_profile_templates SET scope = 'broker' WHERE id = ${t!.id}`;
  });

  it('R-CEIL-07 R-CEIL-11 R-SEED-04 a permission rescope is refused through each of the four link tables', async () => {
    const cases: Array<[keyof typeof LINKS, string, string, string[]]> = [
      ['brokerProfile', 'broker', 'tenant', ['broker']],
      ['tenantTemplate', 'tenant', 'platform', ['tenant', 'broker']],
      ['platformProfile', 'platform', 'tenant', ['platform']],
      ['platformBrokerTemplate', 'broker', 'platform', ['broker']],
    ];
    for (const [which, from, to, expected] of cases) {
      const p = await permission(db.sql, from);
      await link(db.sql, f, which, p.id);
      const error = await refusal(db.sql`UPDATE permissions SET scope = ${to} WHERE id = ${p.id}`);
      expectCeilingError(error, p.code, to, expected);
      const [row] = await db.sql`SELECT scope FROM permissions WHERE id = ${p.id}`;
      expect(row!.scope).toBe(from);
    }
    // Unlinked, or still under every holder's ceiling: passes.
    const free = await permission(db.sql, 'broker');
    await db.sql`UPDATE permissions SET scope = 'platform' WHERE id = ${free.id}`;
    const lowered = await permission(db.sql, 'tenant');
    await link(db.sql, f, 'tenantProfile', lowered.id);
    await db.sql`UPDATE permissions SET scope = 'broker' WHERE id = ${lowered.id}`;
  });

  it('R-CEIL-12 a missing permission or holder is reported by the foreign key, not the ceiling', async () => {
    const missingPermission = await refusal(link(db.sql, f, 'brokerProfile', '999999999'));
    expect(missingPermission.code).toBe('23503');
    const p = await permission(db.sql, 'broker');
    const missingHolder = await refusal(
      db.sql`INSERT INTO access_profile_permissions (access_profile_id, permission_id) VALUES (999999999, ${p.id})`,
    );
    expect(missingHolder.code).toBe('23503');
    const missingPlatformHolder = await refusal(
      db.sql`INSERT INTO platform_access_profile_permissions (platform_access_profile_id, permission_id)
             VALUES (999999999, ${p.id})`,
    );
    expect(missingPlatformHolder.code).toBe('23503');
  });

  describe('R-CEIL-09 R-CEIL-10 concurrent changes on two real connections', () => {
    let observer: Sql;
    beforeAll(() => {
      observer = createSql(db.url, { max: 1 });
    });
    afterAll(async () => {
      await observer?.end({ timeout: 5 });
    });

    /** Two transactions on their own connections; the second statement runs while the first is open. */
    async function race(first: (c: Sql) => Promise<unknown>, second: (c: Sql) => Promise<unknown>) {
      return inTwoTransactions(async (a, b, bPid) => {
        await first(a);
        const pending = second(b).then(
          () => null,
          (error: PgError) => error,
        );
        await waitUntilBlocked(bPid);
        await a`COMMIT`;
        const secondError = await pending;
        if (secondError) await b`ROLLBACK`;
        else await b`COMMIT`;
        return { secondError };
      });
    }

    /** Two connections, each in an open transaction with a short deadlock timeout; closed after `work`. */
    async function inTwoTransactions<T>(work: (a: Sql, b: Sql, bPid: number) => Promise<T>): Promise<T> {
      const a = createSql(db.url, { max: 1 });
      const b = createSql(db.url, { max: 1 });
      try {
        await a`BEGIN`;
        await b`BEGIN`;
        await a`SET LOCAL deadlock_timeout = '200ms'`;
        await b`SET LOCAL deadlock_timeout = '200ms'`;
        const [pb] = await b`SELECT pg_backend_pid() AS pid`;
        return await work(a, b, pb!.pid as number);
      } finally {
        await a.end({ timeout: 5 });
        await b.end({ timeout: 5 });
      }
    }

    async function waitUntilBlocked(pid: number) {
      for (let i = 0; i < 200; i++) {
        const [row] = await observer`SELECT wait_event_type FROM pg_stat_activity WHERE pid = ${pid}`;
        if (row?.wait_event_type === 'Lock') return;
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error(`backend ${pid} never waited on a lock: the second statement did not queue behind the first`);
    }

    /**
     * Races two writes that each fit the ceiling alone but together would put tenant permission `p` on
     * a broker holder: the second must be refused by the ceiling, and nothing may breach it after.
     */
    async function expectSecondRefused(
      p: { code: string },
      first: (c: Sql) => Promise<unknown>,
      second: (c: Sql) => Promise<unknown>,
    ) {
      const { secondError } = await race(first, second);
      expectCeilingError(secondError!, p.code, 'tenant', ['broker']);
      expect(await ceilingBreaches(db.sql)).toBe(0);
    }

    /** A tenant-level access profile (no broker) the holder-rescope races move to the broker. */
    function tenantProfile(name: string): Promise<string> {
      return one(db.sql, `INSERT INTO access_profiles (tenant_id, name) VALUES ($1, $2) RETURNING id`, [f.tenantId, name]);
    }

    it('R-CEIL-08 a link locks the permission row first and the holder row second', async () => {
      // A holds the holder row; B's link then waits on it. Had B taken the holder first, it would hold
      // nothing on the permission yet; taken permission first, the permission row is already share-locked.
      const p = await permission(db.sql, 'broker');
      const profile = await holder(db.sql, f, 'access_profiles', 'broker');
      await inTwoTransactions(async (a, b, bPid) => {
        await a`SELECT id FROM access_profiles WHERE id = ${profile} FOR UPDATE`;
        const pending = b`INSERT INTO access_profile_permissions (access_profile_id, permission_id) VALUES (${profile}, ${p.id})`
          .then(() => null, (error: PgError) => error);
        await waitUntilBlocked(bPid);
        const probe = await refusal(observer.begin((tx) => tx`SELECT id FROM permissions WHERE id = ${p.id} FOR UPDATE NOWAIT`));
        expect(probe.code).toBe('55P03'); // lock_not_available: B share-locked the permission before waiting
        await a`COMMIT`;
        expect(await pending).toBeNull();
        await b`COMMIT`;
      });
    });

    it('R-CEIL-09 link first, permission rescope second: the rescope waits, sees the link and refuses', async () => {
      const p = await permission(db.sql, 'broker');
      await expectSecondRefused(
        p,
        (a) => link(a, f, 'brokerProfile', p.id),
        (b) => b`UPDATE permissions SET scope = 'tenant' WHERE id = ${p.id}`,
      );
    });

    it('R-CEIL-09 permission rescope first, link second: the link waits, rereads the scope and refuses', async () => {
      const p = await permission(db.sql, 'broker');
      await expectSecondRefused(
        p,
        (a) => a`UPDATE permissions SET scope = 'tenant' WHERE id = ${p.id}`,
        (b) => link(b, f, 'brokerProfile', p.id),
      );
    });

    it('R-CEIL-09 holder rescope first, link second: the link waits for the holder and refuses', async () => {
      const p = await permission(db.sql, 'tenant');
      const holder = await tenantProfile('race-1');
      await expectSecondRefused(
        p,
        (a) => a`UPDATE access_profiles SET broker_id = ${f.brokerId} WHERE id = ${holder}`,
        (b) => b`INSERT INTO access_profile_permissions (access_profile_id, permission_id) VALUES (${holder}, ${p.id})`,
      );
    });

    it('R-CEIL-09 link first, holder rescope second: the rescope waits, sees the link and refuses', async () => {
      const p = await permission(db.sql, 'tenant');
      const holder = await tenantProfile('race-2');
      await expectSecondRefused(
        p,
        (a) => a`INSERT INTO access_profile_permissions (access_profile_id, permission_id) VALUES (${holder}, ${p.id})`,
        (b) => b`UPDATE access_profiles SET broker_id = ${f.brokerId} WHERE id = ${holder}`,
      );
    });

    it('R-CEIL-09 holder rescope and permission rescope in both orders never both commit', async () => {
      for (const holderFirst of [true, false]) {
        const p = await permission(db.sql, 'broker');
        const holder = await tenantProfile(`race-3-${holderFirst}`);
        await db.sql`INSERT INTO access_profile_permissions (access_profile_id, permission_id) VALUES (${holder}, ${p.id})`;
        const holderRescope = (c: Sql) => c`UPDATE access_profiles SET broker_id = ${f.brokerId} WHERE id = ${holder}`;
        const permissionRescope = (c: Sql) => c`UPDATE permissions SET scope = 'tenant' WHERE id = ${p.id}`;
        const { secondError } = await race(
          holderFirst ? holderRescope : permissionRescope,
          holderFirst ? permissionRescope : holderRescope,
        );
        expect(['23514', '40P01']).toContain(secondError?.code);
        expect(await ceilingBreaches(db.sql)).toBe(0);
      }
    });

    it('R-CEIL-10 holder edit then link, against a rescope of that permission: one is aborted, nothing breaks the ceiling', async () => {
      const p = await permission(db.sql, 'broker');
      const holder = await one(
        db.sql,
        `INSERT INTO access_profiles (tenant_id, broker_id, name) VALUES ($1, $2, 'race-4') RETURNING id`,
        [f.tenantId, f.brokerId],
      );
      const other = await one(
        db.sql,
        `INSERT INTO access_profiles (tenant_id, broker_id, name) VALUES ($1, $2, 'race-4b') RETURNING id`,
        [f.tenantId, f.brokerId],
      );
      // The rescope must lock `holder` (linked to p), while A already holds it.
      await db.sql`INSERT INTO access_profile_permissions (access_profile_id, permission_id) VALUES (${holder}, ${p.id})`;
      await inTwoTransactions(async (a, b, bPid) => {
        await a`UPDATE access_profiles SET name = 'race-4 edited' WHERE id = ${holder}`;
        const rescope = b`UPDATE permissions SET scope = 'tenant' WHERE id = ${p.id}`.then(
          () => null,
          (e: PgError) => e,
        );
        await waitUntilBlocked(bPid);
        const linking = a`INSERT INTO access_profile_permissions (access_profile_id, permission_id) VALUES (${other}, ${p.id})`.then(
          () => null,
          (e: PgError) => e,
        );
        const [rescopeError, linkError] = await Promise.all([rescope, linking]);
        const errors = [rescopeError, linkError].filter((e): e is PgError => e !== null);
        expect(errors.length).toBeGreaterThanOrEqual(1);
        for (const e of errors) expect(['40P01', '23514']).toContain(e.code);
        await (linkError ? a`ROLLBACK` : a`COMMIT`);
        await (rescopeError ? b`ROLLBACK` : b`COMMIT`);
      });
      expect(await ceilingBreaches(db.sql)).toBe(0);
      const [row] = await db.sql`SELECT scope FROM permissions WHERE id = ${p.id}`;
      // Either the rescope was aborted (scope stays broker) or the link was: never both applied.
      expect(['broker', 'tenant']).toContain(row!.scope);
    });
  });
});
