// PlatformBootstrapSeeder's refusals on first deploy: missing or invalid variables fail naming the
// variable (never its value) and keep nothing; a username that already was a platform login is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBootstrapVariables } from '../../seeders/platform-bootstrap-variables.ts';
import { emptyDatabase, type TestDatabase } from '../support/services.ts';
import { bootstrapEnv, snapshot, svc } from './seed-support.ts';

function problemOf(env: Record<string, string | undefined>): { code?: string; message: string } | undefined {
  try {
    readBootstrapVariables(env);
    return undefined;
  } catch (error) {
    return error as { code?: string; message: string };
  }
}

describe('bootstrap variables', () => {
  const valid = bootstrapEnv();

  it('R-SEED-10 R-SEED-11 R-SEED-12 R-SEED-13 valid variables; the name defaults to the username', () => {
    expect(readBootstrapVariables(valid)).toEqual({
      username: 'root.operator',
      password: valid.PLATFORM_BOOTSTRAP_PASSWORD,
      email: 'Ops@Example.com',
      name: 'root.operator',
    });
    expect(readBootstrapVariables({ ...valid, PLATFORM_BOOTSTRAP_NAME: 'Ana Operadora' }).name).toBe('Ana Operadora');
  });

  it('R-SEED-10 the username is 1 to 64 characters of [a-zA-Z0-9_.-]', () => {
    expect(problemOf({ ...valid, PLATFORM_BOOTSTRAP_USERNAME: 'a'.repeat(64) })).toBeUndefined();
    expect(problemOf({ ...valid, PLATFORM_BOOTSTRAP_USERNAME: 'A-z_0.9' })).toBeUndefined();
    for (const bad of ['a'.repeat(65), 'with space', 'ação', 'x@y', 'semi;colon']) {
      const p = problemOf({ ...valid, PLATFORM_BOOTSTRAP_USERNAME: bad });
      expect(p?.code, bad).toBe('PLATFORM_BOOTSTRAP_INVALID');
      expect(p!.message).toContain('PLATFORM_BOOTSTRAP_USERNAME: must be 1 to 64 characters from [a-zA-Z0-9_.-]');
      expect(p!.message).not.toContain(bad);
    }
  });

  it('R-SEED-11 the password is 1 to 1024 bytes of UTF-8, counted in bytes, never echoed', () => {
    expect(problemOf({ ...valid, PLATFORM_BOOTSTRAP_PASSWORD: 'x' })).toBeUndefined();
    expect(problemOf({ ...valid, PLATFORM_BOOTSTRAP_PASSWORD: 'é'.repeat(512) })).toBeUndefined(); // 1024 bytes
    for (const bad of ['é'.repeat(513), 'p'.repeat(1025), 'lone \ud800 surrogate']) {
      const p = problemOf({ ...valid, PLATFORM_BOOTSTRAP_PASSWORD: bad });
      expect(p?.code).toBe('PLATFORM_BOOTSTRAP_INVALID');
      expect(p!.message).toContain('PLATFORM_BOOTSTRAP_PASSWORD');
      expect(p!.message).not.toContain(bad.slice(0, 8));
    }
  });

  it('R-SEED-14 every missing required variable is named; an empty value counts as missing', () => {
    const p = problemOf({ PLATFORM_BOOTSTRAP_USERNAME: '', PLATFORM_BOOTSTRAP_NAME: 'Only a name' });
    expect(p!.message).toContain('PLATFORM_BOOTSTRAP_USERNAME: required on the first deploy');
    expect(p!.message).toContain('PLATFORM_BOOTSTRAP_PASSWORD: required on the first deploy');
    expect(p!.message).toContain('PLATFORM_BOOTSTRAP_EMAIL: required on the first deploy');
    expect(p!.message).not.toContain('PLATFORM_BOOTSTRAP_NAME');
    expect(problemOf({ ...valid, PLATFORM_BOOTSTRAP_EMAIL: 'not-an-email' })!.message).toContain('PLATFORM_BOOTSTRAP_EMAIL: must be an e-mail');
  });
});

describe('first deploy refusals through `svc migrator deploy`', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await emptyDatabase();
    // Schema only: the seeding deploys below each start from a database without any operator.
    const applied = await svc(['migrator', 'apply'], { DATABASE_URL: db.url });
    expect(applied.code).toBe(0);
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('R-SEED-14 R-SEED-01 a missing variable fails the deploy naming it, and no seeder keeps anything', async () => {
    const before = await snapshot(db.sql);
    const result = await svc(['migrator', 'deploy'], { DATABASE_URL: db.url, ...bootstrapEnv({ PLATFORM_BOOTSTRAP_PASSWORD: undefined }) });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('PLATFORM_BOOTSTRAP_INVALID');
    expect(result.stderr).toContain('PLATFORM_BOOTSTRAP_PASSWORD: required on the first deploy');
    expect(result.stderr).not.toContain('PLATFORM_BOOTSTRAP_USERNAME');
    // One transaction: the catalog and permissions of the same run were rolled back too.
    expect(await snapshot(db.sql)).toEqual(before);
  });

  it('R-SEED-09 R-SEED-11 an invalid password is named, never printed', async () => {
    const secret = `s3cr3t-${'ü'.repeat(600)}`;
    const result = await svc(['migrator', 'deploy'], { DATABASE_URL: db.url, ...bootstrapEnv({ PLATFORM_BOOTSTRAP_PASSWORD: secret }) });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('PLATFORM_BOOTSTRAP_PASSWORD: must be 1 to 1024 bytes of UTF-8');
    expect(result.stdout + result.stderr).not.toContain('s3cr3t');
  });

  it('R-SEED-06 R-SEED-01 the bootstrap is one transaction: a failure at its last step (the grant) leaves nothing behind', async () => {
    // Fault injection: the grant, written last, is refused by a trigger this test adds and removes.
    await db.sql.unsafe(`CREATE FUNCTION test_refuse_grant() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'injected failure at the grant'; END $$`);
    await db.sql.unsafe(`CREATE TRIGGER test_refuse_grant BEFORE INSERT ON platform_grants FOR EACH ROW EXECUTE FUNCTION test_refuse_grant()`);
    try {
      const before = await snapshot(db.sql);
      const result = await svc(['migrator', 'deploy'], { DATABASE_URL: db.url, ...bootstrapEnv({ PLATFORM_BOOTSTRAP_USERNAME: 'grant.fault' }) });
      expect(result.code).toBe(1);
      expect(result.stdout + result.stderr).toContain('injected failure at the grant');
      // Party, user, login, credential, profile, invitation (and catalog, permissions): all rolled back.
      expect(await snapshot(db.sql)).toEqual(before);
      const [logins] = await db.sql`SELECT count(*)::int AS n FROM platform_logins WHERE value_normalized = 'grant.fault'`;
      expect(logins!.n).toBe(0);
    } finally {
      await db.sql.unsafe('DROP TRIGGER test_refuse_grant ON platform_grants');
      await db.sql.unsafe('DROP FUNCTION test_refuse_grant()');
    }
  });

  it('R-SEED-15 a username that already was a platform login is refused, not taken over', async () => {
    const [party] = await db.sql`INSERT INTO parties (kind, display_name) VALUES ('person', 'Earlier') RETURNING id`;
    const [user] = await db.sql`INSERT INTO users (party_id) VALUES (${party!.id}) RETURNING id`;
    await db.sql`INSERT INTO platform_logins (user_id, kind, value, value_normalized, removed_at)
                 VALUES (${user!.id}, 'username', 'Root.Operator', 'root.operator', clock_timestamp())`;
    const before = await snapshot(db.sql);
    const result = await svc(['migrator', 'deploy'], { DATABASE_URL: db.url, ...bootstrapEnv() });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('PLATFORM_BOOTSTRAP_USERNAME_TAKEN');
    expect(result.stdout + result.stderr).not.toContain(bootstrapEnv().PLATFORM_BOOTSTRAP_PASSWORD);
    expect(await snapshot(db.sql)).toEqual(before);
    const [grants] = await db.sql`SELECT count(*)::int AS n FROM platform_grants`;
    expect(grants!.n).toBe(0);
  });
});
