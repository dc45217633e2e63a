// createTenantFromBlueprint against a migrated database: choosing a blueprint copies its platform
// templates (with permissions) into the tenant, and later platform edits never reach existing tenants.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from '../support/services.ts';
import { refusal } from '../support/refusal.ts';
import { createTenantFromBlueprint } from '../../src/tenancy/create-tenant-from-blueprint.ts';
import { createBlueprint, createPerson, createPermission, insertRow } from './domain-support.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await freshDatabase({ max: 3 });
});
afterAll(async () => {
  await db?.drop();
});

interface Fixture {
  blueprintId: string;
  adminTemplate: string;
  brokerTemplate: string;
  tenantPerm: string;
  brokerPerm: string;
  retiredPerm: string;
}

/** A blueprint with a tenant-scope and a broker-scope template, a disabled one, and a retired permission. */
async function blueprintWithTemplates(): Promise<Fixture> {
  const sql = db.sql;
  const blueprintId = await createBlueprint(sql);
  const tenantPerm = await createPermission(sql, 'tenant');
  const brokerPerm = await createPermission(sql, 'broker');
  const retiredPerm = await createPermission(sql, 'broker', true);
  const template = (scope: string, name: string, extra: Record<string, unknown> = {}) =>
    insertRow(sql, 'platform_access_profile_templates', { blueprint_id: blueprintId, scope, name, description: `${name} d`, ...extra });
  const adminTemplate = (await template('tenant', 'Administrators', { auto_assign: 'tenant_admin' })).id;
  const brokerTemplate = (await template('broker', 'Broker staff')).id;
  const disabled = (await template('broker', 'Old staff', { disabled_at: '2024-01-01T00:00:00Z' })).id;
  const link = (templateId: string, permissionId: string) =>
    insertRow(sql, 'platform_access_profile_template_permissions', { template_id: templateId, permission_id: permissionId });
  await link(adminTemplate, tenantPerm);
  await link(adminTemplate, brokerPerm);
  await link(brokerTemplate, brokerPerm);
  await link(brokerTemplate, retiredPerm);
  await link(disabled, brokerPerm);
  return { blueprintId, adminTemplate, brokerTemplate, tenantPerm, brokerPerm, retiredPerm };
}

async function tenantTemplates(tenantId: string) {
  return db.sql`
    SELECT t.id::text, t.source_platform_template_id::text AS source, t.scope, t.name, t.description, t.auto_assign, t.version,
           coalesce(array_agg(l.permission_id::text ORDER BY l.permission_id) FILTER (WHERE l.permission_id IS NOT NULL), '{}') AS perms
      FROM access_profile_templates t LEFT JOIN access_profile_template_permissions l ON l.template_id = t.id
     WHERE t.tenant_id = ${tenantId} GROUP BY t.id ORDER BY t.source_platform_template_id`;
}

describe('createTenantFromBlueprint', () => {
  it('R-AUTHZ-17 R-AUTHZ-19 creating a tenant records the chosen blueprint and copies its enabled templates with their permissions', async () => {
    const f = await blueprintWithTemplates();
    const operator = await createPerson(db.sql, 'Operator');
    const created = await db.sql.begin((tx) =>
      createTenantFromBlueprint(tx, { blueprintId: f.blueprintId, name: '  Acme Promotora ', createdByUserId: operator.userId }));

    const [tenant] = await db.sql`SELECT uid, name, blueprint_id::text, created_by_user_id::text FROM tenants WHERE id = ${created.tenantId}`;
    expect(tenant).toEqual({ uid: created.uid, name: 'Acme Promotora', blueprint_id: f.blueprintId, created_by_user_id: operator.userId });

    const rows = await tenantTemplates(created.tenantId);
    expect(rows.map((r) => ({ ...r }))).toEqual([
      {
        id: created.templates[0]!.id, source: f.adminTemplate, scope: 'tenant', name: 'Administrators',
        description: 'Administrators d', auto_assign: 'tenant_admin', version: 1, perms: [f.tenantPerm, f.brokerPerm],
      },
      {
        // The retired permission is not copied; the disabled template is not copied at all.
        id: created.templates[1]!.id, source: f.brokerTemplate, scope: 'broker', name: 'Broker staff',
        description: 'Broker staff d', auto_assign: null, version: 1, perms: [f.brokerPerm],
      },
    ]);
    expect(created.templates.map((t) => [t.sourcePlatformTemplateId, t.permissionIds])).toEqual([
      [f.adminTemplate, [f.tenantPerm, f.brokerPerm]],
      [f.brokerTemplate, [f.brokerPerm]],
    ]);
  });

  it('R-AUTHZ-19 later edits of the platform templates do not affect tenants created before', async () => {
    const f = await blueprintWithTemplates();
    const first = await db.sql.begin((tx) => createTenantFromBlueprint(tx, { blueprintId: f.blueprintId, name: 'First' }));
    const before = (await tenantTemplates(first.tenantId)).map((r) => ({ ...r }));

    const extra = await createPermission(db.sql, 'broker');
    await db.sql`UPDATE platform_access_profile_templates SET name = 'Renamed', description = 'changed' WHERE id = ${f.adminTemplate}`;
    await db.sql`DELETE FROM platform_access_profile_template_permissions WHERE template_id = ${f.adminTemplate} AND permission_id = ${f.tenantPerm}`;
    await insertRow(db.sql, 'platform_access_profile_template_permissions', { template_id: f.brokerTemplate, permission_id: extra });
    await db.sql`UPDATE platform_access_profile_templates SET disabled_at = clock_timestamp() WHERE id = ${f.brokerTemplate}`;

    expect((await tenantTemplates(first.tenantId)).map((r) => ({ ...r }))).toEqual(before);

    // A tenant created after the edits gets the blueprint as it is now.
    const second = await db.sql.begin((tx) => createTenantFromBlueprint(tx, { blueprintId: f.blueprintId, name: 'Second' }));
    const now = await tenantTemplates(second.tenantId);
    expect(now.map((r) => [r.source, r.name, r.perms])).toEqual([[f.adminTemplate, 'Renamed', [f.brokerPerm]]]);
  });

  it('R-AUTHZ-17 a tenant needs an existing, enabled blueprint and a free uid; a refusal creates nothing', async () => {
    const f = await blueprintWithTemplates();
    const count = async () => Number((await db.sql`SELECT count(*) AS n FROM tenants`)[0]!.n);
    const tenantsBefore = await count();

    const missing = await refusal(() => db.sql.begin((tx) => createTenantFromBlueprint(tx, { blueprintId: '987654321', name: 'X' })));
    expect(missing.code).toBe('TENANT_BLUEPRINT_NOT_FOUND');
    const garbage = await refusal(() => db.sql.begin((tx) => createTenantFromBlueprint(tx, { blueprintId: 'abc', name: 'X' })));
    expect(garbage.code).toBe('TENANT_BLUEPRINT_NOT_FOUND');
    const unnamed = await refusal(() => db.sql.begin((tx) => createTenantFromBlueprint(tx, { blueprintId: f.blueprintId, name: '  ' })));
    expect(unnamed.code).toBe('TENANT_NAME_INVALID');

    await db.sql`UPDATE platform_tenant_blueprints SET disabled_at = clock_timestamp() WHERE id = ${f.blueprintId}`;
    const disabled = await refusal(() => db.sql.begin((tx) => createTenantFromBlueprint(tx, { blueprintId: f.blueprintId, name: 'X' })));
    expect(disabled.code).toBe('TENANT_BLUEPRINT_DISABLED');
    expect(await count()).toBe(tenantsBefore);

    const enabled = await createBlueprint(db.sql);
    await db.sql.begin((tx) => createTenantFromBlueprint(tx, { blueprintId: enabled, name: 'Taken', uid: 'tenant-uid-taken' }));
    const taken = await refusal(() =>
      db.sql.begin((tx) => createTenantFromBlueprint(tx, { blueprintId: enabled, name: 'Again', uid: 'tenant-uid-taken' })));
    expect(taken.code).toBe('TENANT_UID_TAKEN');
    expect(await count()).toBe(tenantsBefore + 1);
  });
});
