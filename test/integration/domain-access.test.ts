// Access-profile templates against a migrated database: live inheritance (effectivePermissions) and
// the confirmed edit with its change record and per-profile decisions.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from '../support/services.ts';
import { refusal } from '../support/refusal.ts';
import {
  editAccessProfileTemplate,
  previewAccessProfileTemplateEdit,
} from '../../src/access/edit-access-profile-template.ts';
import { effectivePermissions } from '../../src/access/effective-permissions.ts';
import { buildDomainWorld, createPermission, inRolledBack, insertRow, type DomainWorld } from './domain-support.ts';

let db: TestDatabase;
let w: DomainWorld;
beforeAll(async () => {
  db = await freshDatabase({ max: 3 });
  w = await buildDomainWorld(db.sql);
});
afterAll(async () => {
  await db?.drop();
});

let names = 0;
async function template(scope: 'tenant' | 'broker', permissionIds: string[]): Promise<string> {
  names += 1;
  const id = (await insertRow(db.sql, 'access_profile_templates', {
    tenant_id: w.a.id, scope, name: `template ${names}`, description: 'd',
  })).id as string;
  for (const permission_id of permissionIds) await insertRow(db.sql, 'access_profile_template_permissions', { template_id: id, permission_id });
  return id;
}

async function profile(templateId: string | null, brokerId: string | null = null, extra: Record<string, unknown> = {}): Promise<string> {
  names += 1;
  return (await insertRow(db.sql, 'access_profiles', {
    tenant_id: w.a.id, broker_id: brokerId, name: `profile ${names}`,
    ...(templateId ? { template_id: templateId, template_version: 1 } : {}), ...extra,
  })).id as string;
}

async function hold(membershipId: string, profileId: string, validUntil: string | null = null): Promise<void> {
  await insertRow(db.sql, 'membership_access_profiles', {
    tenant_id: w.a.id, membership_id: membershipId, access_profile_id: profileId, valid_from: '2024-01-01', valid_until: validUntil,
  });
}

const effective = async (profileId: string) =>
  db.sql.begin((tx) => effectivePermissions(tx, { tenantId: w.a.id, accessProfileId: profileId }));
const ids = (e: { permissions: { id: string }[] }) => e.permissions.map((p) => p.id).sort();
const sorted = (list: string[]) => [...list].sort();

describe('effectivePermissions', () => {
  it('R-AUTHZ-11 a profile linked to a template inherits its permissions live; detached and unlinked profiles use their own', async () => {
    const [p1, p2, p3, own] = [
      await createPermission(db.sql, 'tenant'), await createPermission(db.sql, 'broker'),
      await createPermission(db.sql, 'tenant'), await createPermission(db.sql, 'tenant'),
    ];
    const t = await template('tenant', [p1, p2]);
    const linked = await profile(t);
    // Own rows of a linked profile are ignored while it follows the template.
    await insertRow(db.sql, 'access_profile_permissions', { access_profile_id: linked, permission_id: own });

    const first = await effective(linked);
    expect(first.source).toBe('template');
    expect(first.templateId).toBe(t);
    expect(ids(first)).toEqual(sorted([p1, p2]));

    // Live: a change to the template shows at once, without touching the profile.
    await insertRow(db.sql, 'access_profile_template_permissions', { template_id: t, permission_id: p3 });
    await db.sql`DELETE FROM access_profile_template_permissions WHERE template_id = ${t} AND permission_id = ${p1}`;
    expect(ids(await effective(linked))).toEqual(sorted([p2, p3]));
    // A permission that left the code grants nothing.
    await db.sql`UPDATE permissions SET deprecated_at = clock_timestamp() WHERE id = ${p3}`;
    expect(ids(await effective(linked))).toEqual([p2]);

    const unlinked = await profile(null);
    await insertRow(db.sql, 'access_profile_permissions', { access_profile_id: unlinked, permission_id: own });
    expect(await effective(unlinked)).toMatchObject({ source: 'own', templateId: null });
    expect(ids(await effective(unlinked))).toEqual([own]);

    const detached = await profile(t, null, { detached_at: '2024-02-01T00:00:00Z' });
    await insertRow(db.sql, 'access_profile_permissions', { access_profile_id: detached, permission_id: own });
    expect((await effective(detached)).source).toBe('own');
    expect(ids(await effective(detached))).toEqual([own]);

    const disabled = await profile(t, null, { disabled_at: '2024-02-01T00:00:00Z' });
    expect(await effective(disabled)).toMatchObject({ disabled: true, permissions: [] });

    const otherTenant = await refusal(() =>
      db.sql.begin((tx) => effectivePermissions(tx, { tenantId: w.b.id, accessProfileId: linked })));
    expect(otherTenant.code).toBe('ACCESS_PROFILE_NOT_FOUND');
  });
});

describe('editAccessProfileTemplate', () => {
  it('R-AUTHZ-15 R-AUTHZ-16 a confirmed edit raises the version, records added/removed ids and one decision per linked profile', async () => {
    const [keep, drop, add] = [
      await createPermission(db.sql, 'tenant'), await createPermission(db.sql, 'broker'), await createPermission(db.sql, 'broker'),
    ];
    const t = await template('tenant', [keep, drop]);
    const follower = await profile(t);
    const leaver = await profile(t);
    const earlier = await profile(t, null, { detached_at: '2024-02-01T00:00:00Z' });
    await hold(w.ana.membershipA, follower);
    await hold(w.bia.membershipA, follower);
    await hold(w.admin.membershipA, follower, '2024-06-01'); // ended: not affected
    await hold(w.admin.membershipA, leaver);

    const preview = await db.sql.begin((tx) =>
      previewAccessProfileTemplateEdit(tx, { tenantId: w.a.id, templateId: t, permissionIds: [keep, add, add] }));
    expect(preview).toEqual({
      fromVersion: 1, toVersion: 2, addedPermissionIds: [add], removedPermissionIds: [drop],
      profiles: [
        { accessProfileId: follower, name: expect.any(String), brokerId: null, affectedUsers: 2 },
        { accessProfileId: leaver, name: expect.any(String), brokerId: null, affectedUsers: 1 },
      ],
    });
    // The preview wrote nothing.
    expect((await db.sql`SELECT version FROM access_profile_templates WHERE id = ${t}`)[0]!.version).toBe(1);

    const result = await db.sql.begin((tx) =>
      editAccessProfileTemplate(tx, {
        tenantId: w.a.id, templateId: t, permissionIds: [keep, add], expectedVersion: 1,
        reason: 'drop the export right', changedByUserId: w.admin.userId, decisions: { [leaver]: 'detached' },
      }));
    expect(result).toMatchObject({ fromVersion: 1, toVersion: 2, addedPermissionIds: [add], removedPermissionIds: [drop] });

    expect((await db.sql`SELECT version FROM access_profile_templates WHERE id = ${t}`)[0]!.version).toBe(2);
    const [change] = await db.sql`
      SELECT id::text, tenant_id::text, from_version, to_version, added_permission_ids::text[] AS added,
             removed_permission_ids::text[] AS removed, reason, changed_by_user_id::text
        FROM access_profile_template_changes WHERE template_id = ${t}`;
    expect({ ...change }).toEqual({
      id: result.changeId, tenant_id: w.a.id, from_version: 1, to_version: 2, added: [add], removed: [drop],
      reason: 'drop the export right', changed_by_user_id: w.admin.userId,
    });
    const decisions = await db.sql`
      SELECT access_profile_id::text AS profile, decision, affected_users FROM access_profile_template_change_decisions
       WHERE change_id = ${result.changeId} ORDER BY access_profile_id`;
    expect(decisions.map((d) => ({ ...d }))).toEqual([
      { profile: follower, decision: 'followed', affected_users: 2 },
      { profile: leaver, decision: 'detached', affected_users: 1 },
    ]);

    // followed: keeps tracking, adopts the new version, and its members get the new set.
    const [f] = await db.sql`SELECT template_version, detached_at FROM access_profiles WHERE id = ${follower}`;
    expect({ ...f }).toEqual({ template_version: 2, detached_at: null });
    expect(ids(await effective(follower))).toEqual(sorted([keep, add]));
    // detached: detached_at and its own copy of the permissions as they were before the edit.
    const [l] = await db.sql`
      SELECT template_version, detached_at IS NOT NULL AS detached, detached_by_user_id::text FROM access_profiles WHERE id = ${leaver}`;
    expect({ ...l }).toEqual({ template_version: 1, detached: true, detached_by_user_id: w.admin.userId });
    expect(await effective(leaver)).toMatchObject({ source: 'own' });
    expect(ids(await effective(leaver))).toEqual(sorted([keep, drop]));

    // A later edit reaches the follower only: the detached profiles get no decision and keep their own set.
    const second = await db.sql.begin((tx) =>
      editAccessProfileTemplate(tx, {
        tenantId: w.a.id, templateId: t, permissionIds: [add], expectedVersion: 2, reason: 'narrow', changedByUserId: w.admin.userId,
      }));
    expect(second.decisions.map((d) => [d.accessProfileId, d.decision])).toEqual([[follower, 'followed']]);
    expect(ids(await effective(leaver))).toEqual(sorted([keep, drop]));
    expect(ids(await effective(follower))).toEqual([add]);
    expect((await db.sql`SELECT template_version FROM access_profiles WHERE id = ${earlier}`)[0]!.template_version).toBe(1);
  });

  it('R-AUTHZ-15 a stale, empty, unknown or above-scope edit is refused and changes nothing', async () => {
    const [tp, bp] = [await createPermission(db.sql, 'tenant'), await createPermission(db.sql, 'broker')];
    const retired = await createPermission(db.sql, 'broker', true);
    const brokerTemplate = await template('broker', [bp]);
    const linked = await profile(brokerTemplate, w.b1);
    const base = { tenantId: w.a.id, templateId: brokerTemplate, expectedVersion: 1, reason: 'r', changedByUserId: w.admin.userId };
    const refusedCode = async (overrides: Record<string, unknown>) => {
      let code: string | undefined;
      await inRolledBack(db.sql, async (tx) => {
        code = (await refusal(() => editAccessProfileTemplate(tx, { ...base, permissionIds: [], ...overrides }))).code;
      });
      return code;
    };
    expect(await refusedCode({ permissionIds: [bp, tp], expectedVersion: 1 })).toBe('ACCESS_TEMPLATE_PERMISSION_ABOVE_SCOPE');
    expect(await refusedCode({ permissionIds: [retired] })).toBe('ACCESS_TEMPLATE_PERMISSION_NOT_FOUND');
    expect(await refusedCode({ permissionIds: ['999999999'] })).toBe('ACCESS_TEMPLATE_PERMISSION_NOT_FOUND');
    expect(await refusedCode({ permissionIds: [], expectedVersion: 0 })).toBe('ACCESS_TEMPLATE_VERSION_CONFLICT');
    expect(await refusedCode({ permissionIds: [bp] })).toBe('ACCESS_TEMPLATE_NO_CHANGE');
    expect(await refusedCode({ permissionIds: [], reason: '   ' })).toBe('ACCESS_TEMPLATE_REASON_REQUIRED');
    expect(await refusedCode({ permissionIds: [], decisions: { '424242': 'detached' } })).toBe('ACCESS_TEMPLATE_DECISION_UNKNOWN_PROFILE');
    expect(await refusedCode({ permissionIds: [], tenantId: w.b.id })).toBe('ACCESS_TEMPLATE_NOT_FOUND');

    // A refusal thrown inside a committed transaction leaves everything as it was.
    const aborted = await refusal(() => db.sql.begin((tx) => editAccessProfileTemplate(tx, { ...base, permissionIds: [bp, tp] })));
    expect(aborted.code).toBe('ACCESS_TEMPLATE_PERMISSION_ABOVE_SCOPE');
    expect((await db.sql`SELECT version FROM access_profile_templates WHERE id = ${brokerTemplate}`)[0]!.version).toBe(1);
    expect((await db.sql`SELECT count(*)::int AS n FROM access_profile_template_changes WHERE template_id = ${brokerTemplate}`)[0]!.n).toBe(0);
    expect(ids(await effective(linked))).toEqual([bp]);
  });
});
