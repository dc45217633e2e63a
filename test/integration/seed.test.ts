// Default seeders through the real CLI (`svc migrator deploy` / `db-seed`) on PostgreSQL 18:
// catalog, permissions and the one-shot platform bootstrap; reruns change nothing; a ceiling-breaking
// rescope fails the deploy leaving the database as it was.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRegistry } from '../../src/permissions/registry.ts';
import { parsePasswordHash, verifyPassword } from '../../seeders/password-hash.ts';
import { emptyDatabase, type TestDatabase } from '../support/services.ts';
import { PROJECT_ROOT, bootstrapEnv, snapshot, svc } from './seed-support.ts';

const catalogCount = (file: string) =>
  (JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'catalog', file), 'utf8')) as unknown[]).length;

describe('default seeders through `svc migrator deploy`', () => {
  let db: TestDatabase;
  const env = () => ({ DATABASE_URL: db.url, ...bootstrapEnv() });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-seed-'));

  beforeAll(async () => {
    db = await emptyDatabase();
  });
  afterAll(async () => {
    await db?.drop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('R-SEED-01 db-seed on a database without the baseline is refused before any seeder runs', async () => {
    const result = await svc(['migrator', 'db-seed'], env());
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('SCHEMA_NOT_CURRENT');
  });

  it('R-SEED-01 R-SEED-02 R-SEED-03 R-SEED-06 R-SEED-07 R-SEED-09 R-SEED-12 R-SEED-13 R-MIG-17 deploy on an empty database seeds the catalog, the permissions and exactly one operator', async () => {
    const result = await svc(['migrator', 'deploy'], env());
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    // Seeders ran in order.
    const order = ['CatalogSeeder', 'PermissionsSeeder', 'PlatformBootstrapSeeder'].map((s) => result.stdout.indexOf(`seeding ${s}`));
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    // R-SEED-09: nothing secret in any output.
    const output = result.stdout + result.stderr;
    expect(output).not.toContain(bootstrapEnv().PLATFORM_BOOTSTRAP_PASSWORD);
    expect(output).not.toContain('correct horse');

    const sql = db.sql;
    const count = async (table: string) => Number((await sql.unsafe(`SELECT count(*)::int AS n FROM ${table}`))[0]!.n);
    expect(await count('financial_institutions')).toBe(catalogCount('financial-institutions.json'));
    expect(await count('product_groups')).toBe(catalogCount('product-groups.json'));
    expect(await count('operation_types')).toBe(catalogCount('operation-types.json'));
    expect(await count('products')).toBe(catalogCount('products.json'));
    expect(await count('offers')).toBe(catalogCount('offers.json'));
    const [bb] = await sql`SELECT name FROM financial_institutions WHERE code = '001'`;
    expect(bb!.name).toBe('Banco do Brasil S.A.');

    const registry = buildRegistry();
    const permissions = await sql`SELECT code, scope, description, replaces_code FROM permissions ORDER BY code`;
    expect(permissions.map((p) => ({ ...p }))).toEqual(
      registry.permissions.map((p) => ({ code: p.code, scope: p.scope, description: p.description, replaces_code: p.replaces_code })),
    );
    const useCases = await sql`SELECT p.code, u.use_case FROM permission_use_cases u JOIN permissions p ON p.id = u.permission_id
                                ORDER BY 1, 2`;
    expect(useCases.map((u) => `${u.code} ${u.use_case}`)).toEqual(
      registry.permissions.flatMap((p) => p.use_cases.map((u) => `${p.code} ${u}`)),
    );

    // Exactly one operator, one active grant, granted by the operator itself, from an accepted invitation.
    expect(await count('users')).toBe(1);
    expect(await count('tenants')).toBe(0); // R-SEED-07
    const grants = await sql`SELECT * FROM platform_grants`;
    expect(grants).toHaveLength(1);
    const grant = grants[0]!;
    expect(grant.revoked_at).toBeNull();
    expect(grant.granted_by_user_id).toBe(grant.user_id);
    const [operator] = await sql`SELECT p.kind, p.display_name, pp.full_name FROM users u JOIN parties p ON p.id = u.party_id
                                  JOIN person_profiles pp ON pp.party_id = p.id WHERE u.id = ${grant.user_id}`;
    expect(operator).toMatchObject({ kind: 'person', display_name: 'root.operator', full_name: 'root.operator' }); // R-SEED-13
    const logins = await sql`SELECT * FROM platform_logins`;
    expect(logins).toHaveLength(1);
    expect(logins[0]).toMatchObject({ kind: 'username', value: 'root.operator', value_normalized: 'root.operator' });
    expect(logins[0]!.user_id).toBe(grant.user_id);

    const [invitation] = await sql`SELECT * FROM platform_invitations WHERE id = ${grant.origin_platform_invitation_id}`;
    expect(invitation).toMatchObject({
      status: 'accepted',
      channel: 'email',
      destination: 'Ops@Example.com',
      destination_normalized: 'ops@example.com',
      created_by_user_id: null,
      created_by_process: 'PlatformBootstrapSeeder',
    });
    expect(invitation!.accepted_by_user_id).toBe(grant.user_id);
    expect((invitation!.token_sha256 as Buffer).length).toBe(32);

    // The profile holds every platform permission of the registry, and only those.
    const held = await sql`SELECT p.code FROM platform_access_profile_permissions l JOIN permissions p ON p.id = l.permission_id
                           WHERE l.platform_access_profile_id = ${grant.platform_access_profile_id} ORDER BY 1`;
    expect(held.map((h) => h.code)).toEqual(registry.permissions.filter((p) => p.scope === 'platform').map((p) => p.code));
    expect(invitation!.platform_access_profile_id).toBe(grant.platform_access_profile_id);

    // Password credential: a memory-hard scrypt hash, never the password.
    const [version] = await sql`
      SELECT v.algorithm, v.secret FROM user_credentials uc JOIN credential_versions v ON v.credential_id = uc.credential_id
       JOIN credentials c ON c.id = uc.credential_id
       WHERE uc.user_id = ${grant.user_id} AND c.kind = 'password' AND v.retired_at IS NULL`;
    expect(version!.algorithm).toBe('scrypt');
    const encoded = (version!.secret as Buffer).toString('utf8');
    expect(encoded).not.toContain('correct horse');
    expect(parsePasswordHash(encoded)).toMatchObject({ logN: 17, r: 8, p: 1, keyLength: 32, saltLength: 16 });
    expect(await verifyPassword(bootstrapEnv().PLATFORM_BOOTSTRAP_PASSWORD!, encoded)).toBe(true);
    expect(await verifyPassword('wrong', encoded)).toBe(false);
  });

  it('R-MIG-17 R-SEED-02 R-SEED-03 a second deploy changes nothing (row counts and contents, updated_at included)', async () => {
    const before = await snapshot(db.sql);
    const result = await svc(['migrator', 'deploy'], env());
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('0 row(s) inserted, 0 updated');
    expect(result.stdout).toContain('0 inserted, 0 updated');
    expect(await snapshot(db.sql)).toEqual(before);
  });

  it('R-SEED-05 R-SEED-08 after revoking the grant, a deploy with other (even invalid) variables recreates nothing', async () => {
    const [grant] = await db.sql`SELECT id, user_id FROM platform_grants`;
    await db.sql`UPDATE platform_grants SET revoked_at = clock_timestamp(), revoked_by_user_id = ${grant!.user_id}
                 WHERE id = ${grant!.id}`;
    await db.sql`UPDATE platform_access_profiles SET name = 'Renamed by an operator'`;
    const before = await snapshot(db.sql);
    for (const variables of [
      { PLATFORM_BOOTSTRAP_USERNAME: 'another_operator', PLATFORM_BOOTSTRAP_PASSWORD: 'other secret', PLATFORM_BOOTSTRAP_EMAIL: 'x@example.com' },
      // Reads no variable at all: invalid or missing ones do not matter any more.
      { PLATFORM_BOOTSTRAP_USERNAME: 'not a valid name!', PLATFORM_BOOTSTRAP_PASSWORD: undefined, PLATFORM_BOOTSTRAP_EMAIL: undefined },
    ]) {
      const result = await svc(['migrator', 'deploy'], { ...env(), ...variables });
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect(result.stdout).toContain('a platform grant exists (active or revoked); nothing to do');
      expect(await snapshot(db.sql)).toEqual(before);
    }
  });

  it('R-SEED-04 R-CEIL-11 a registry rescope that breaks the ceiling fails the deploy and leaves the database as it was', async () => {
    const registry = buildRegistry();
    // platform.tenants.read is held by the platform administration profile: tenant scope is above its ceiling.
    const changed = {
      ...registry,
      permissions: [
        ...registry.permissions.map((p) =>
          p.code === 'platform.tenants.read'
            ? { ...p, scope: 'tenant' as const }
            : p.code === 'access.task_runs.read'
              ? { ...p, description: 'changed in the same deploy' }
              : p,
        ),
        { code: 'access.new_thing.read', scope: 'tenant' as const, description: 'new', replaces_code: null, use_cases: ['new-thing.read'] },
      ],
    };
    const file = path.join(tmp, 'permissions.json');
    fs.writeFileSync(file, JSON.stringify(changed));
    const before = await snapshot(db.sql);
    const result = await svc(['migrator', 'deploy'], { ...env(), SVC_PERMISSIONS_REGISTRY: file });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('PERMISSION_RESCOPE_REFUSED');
    expect(result.stderr).toContain('permission platform.tenants.read has scope tenant');
    expect(result.stderr).toContain('accepts only scope platform');
    // The catalog seeder ran before the failing one, but its counts were rolled back: none is reported.
    expect(result.stdout).toContain('seeding CatalogSeeder');
    expect(result.stdout).not.toMatch(/row\(s\) inserted/);
    expect(await snapshot(db.sql)).toEqual(before);
  });

  it('R-SEED-03 R-CFG-11 a registry from SVC_PERMISSIONS_REGISTRY is projected: description and scope updated, use cases synchronized', async () => {
    const registry = buildRegistry();
    const changed = {
      ...registry,
      permissions: registry.permissions.map((p) =>
        p.code === 'access.task_runs.read' ? { ...p, scope: 'broker' as const, description: 'Read runs (broker).', use_cases: ['task-runs.read', 'task-runs.list'] } : p,
      ),
    };
    const file = path.join(tmp, 'permissions-rescoped.json');
    fs.writeFileSync(file, JSON.stringify(changed));
    const result = await svc(['migrator', 'db-seed'], { ...env(), SVC_PERMISSIONS_REGISTRY: file });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const [p] = await db.sql`SELECT scope, description FROM permissions WHERE code = 'access.task_runs.read'`;
    expect(p).toMatchObject({ scope: 'broker', description: 'Read runs (broker).' });
    const uc = await db.sql`SELECT use_case FROM permission_use_cases u JOIN permissions p ON p.id = u.permission_id
                            WHERE p.code = 'access.task_runs.read' ORDER BY 1`;
    expect(uc.map((r) => r.use_case)).toEqual(['task-runs.list', 'task-runs.read']);
    // Back to the build's registry (built in-process when SVC_PERMISSIONS_REGISTRY is unset).
    expect((await svc(['migrator', 'db-seed'], env())).code).toBe(0);
    const [back] = await db.sql`SELECT scope FROM permissions WHERE code = 'access.task_runs.read'`;
    expect(back!.scope).toBe('tenant');
  });
});
