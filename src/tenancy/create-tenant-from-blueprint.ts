// Creating a tenant means choosing a platform blueprint (R-AUTHZ-17): the tenant row names it, and the
// blueprint's enabled platform access-profile templates are copied, with their permissions, into the
// tenant's own access_profile_templates (R-AUTHZ-19). The copy is a snapshot: each tenant template
// remembers its source in source_platform_template_id, but later edits of the platform template never
// reach it; the tenant evolves its templates through editAccessProfileTemplate.
import { randomUUID } from 'node:crypto';
import type { TxSql } from '../db/client.ts';
import { TenancyError } from './tenancy-error.ts';

export interface CreateTenantInput {
  /** The platform blueprint chosen for the tenant. */
  blueprintId: string;
  name: string;
  /** Public id; a random UUID when omitted. */
  uid?: string;
  /** The platform operator creating it (null for processes such as seeders). */
  createdByUserId?: string | null;
}

export interface CopiedTemplate {
  id: string;
  sourcePlatformTemplateId: string;
  scope: 'tenant' | 'broker';
  name: string;
  autoAssign: string | null;
  /** Sorted ascending (numeric). */
  permissionIds: string[];
}

export interface CreatedTenant {
  tenantId: string;
  uid: string;
  blueprintId: string;
  templates: CopiedTemplate[];
}

const byNumber = (a: string, b: string) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0);

export async function createTenantFromBlueprint(tx: TxSql, input: CreateTenantInput): Promise<CreatedTenant> {
  const name = input.name.trim();
  if (!name) throw new TenancyError('TENANT_NAME_INVALID');

  if (!/^[1-9][0-9]{0,18}$/.test(input.blueprintId)) throw new TenancyError('TENANT_BLUEPRINT_NOT_FOUND');
  // FOR SHARE: a blueprint being disabled concurrently waits for this creation (or wins and is refused here).
  const [blueprint] = await tx`
    SELECT id::text, disabled_at FROM platform_tenant_blueprints WHERE id = ${input.blueprintId} FOR SHARE`;
  if (!blueprint) throw new TenancyError('TENANT_BLUEPRINT_NOT_FOUND');
  if (blueprint.disabled_at !== null) throw new TenancyError('TENANT_BLUEPRINT_DISABLED');

  const uid = input.uid ?? randomUUID();
  // Checked first so a taken uid does not abort the caller's transaction with a unique violation; the
  // constraint still decides under a concurrent insert.
  const [taken] = await tx`SELECT 1 FROM tenants WHERE uid = ${uid}`;
  if (taken) throw new TenancyError('TENANT_UID_TAKEN');
  let tenantId: string;
  try {
    const [tenant] = await tx`
      INSERT INTO tenants (uid, name, blueprint_id, created_by_user_id)
      VALUES (${uid}, ${name}, ${input.blueprintId}, ${input.createdByUserId ?? null})
      RETURNING id::text`;
    tenantId = tenant!.id as string;
  } catch (error) {
    if ((error as { constraint_name?: string }).constraint_name === 'tenants_uid_key') {
      throw new TenancyError('TENANT_UID_TAKEN', { cause: error });
    }
    throw error;
  }

  // Templates locked FOR SHARE so an edit of one of them in flight lands wholly before or after the copy.
  const copied = await tx`
    WITH source AS (
      SELECT id, scope, name, description, auto_assign
        FROM platform_access_profile_templates
       WHERE blueprint_id = ${input.blueprintId} AND disabled_at IS NULL
       ORDER BY id
         FOR SHARE
    )
    INSERT INTO access_profile_templates (tenant_id, scope, name, description, auto_assign, version, source_platform_template_id)
    SELECT ${tenantId}, scope, name, description, auto_assign, 1, id FROM source ORDER BY id
    RETURNING id::text, source_platform_template_id::text, scope, name, auto_assign`;

  // Deprecated permissions left the code: a new tenant does not start with them.
  const links = await tx`
    INSERT INTO access_profile_template_permissions (template_id, permission_id)
    SELECT t.id, pp.permission_id
      FROM access_profile_templates t
      JOIN platform_access_profile_template_permissions pp ON pp.template_id = t.source_platform_template_id
      JOIN permissions p ON p.id = pp.permission_id AND p.deprecated_at IS NULL
     WHERE t.tenant_id = ${tenantId}
     ORDER BY t.id, pp.permission_id
    RETURNING template_id::text, permission_id::text`;

  const permissionsOf = new Map<string, string[]>();
  for (const link of links) {
    const list = permissionsOf.get(link.template_id as string) ?? [];
    list.push(link.permission_id as string);
    permissionsOf.set(link.template_id as string, list);
  }
  const templates = copied.map((row) => ({
    id: row.id as string,
    sourcePlatformTemplateId: row.source_platform_template_id as string,
    scope: row.scope as 'tenant' | 'broker',
    name: row.name as string,
    autoAssign: (row.auto_assign as string | null) ?? null,
    permissionIds: (permissionsOf.get(row.id as string) ?? []).sort(byNumber),
  }));
  templates.sort((a, b) => byNumber(a.id, b.id));
  return { tenantId, uid, blueprintId: String(blueprint.id), templates };
}
