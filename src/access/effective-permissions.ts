// What an access profile grants right now (R-AUTHZ-11). A profile linked to a template and not
// detached inherits live: it has exactly the template's current permissions, whatever its own rows say,
// so a template edit the profile follows reaches its members without touching the profile. A detached
// profile, or one never linked, has its own access_profile_permissions. Retired permissions
// (deprecated_at set) and disabled profiles grant nothing.
import type { TxSql } from '../db/client.ts';
import { AccessError } from './access-error.ts';

export interface EffectivePermission {
  id: string;
  code: string;
  scope: 'tenant' | 'broker';
}

export interface EffectivePermissions {
  accessProfileId: string;
  /** `template`: inherited live from `templateId`; `own`: the profile's own rows. */
  source: 'template' | 'own';
  templateId: string | null;
  /** The template version a following profile adopted (null when not linked). */
  templateVersion: number | null;
  disabled: boolean;
  /** Ordered by code. */
  permissions: EffectivePermission[];
}

export async function effectivePermissions(
  tx: TxSql,
  profile: { tenantId: string; accessProfileId: string },
): Promise<EffectivePermissions> {
  if (!/^[1-9][0-9]{0,18}$/.test(profile.accessProfileId)) throw new AccessError('ACCESS_PROFILE_NOT_FOUND');
  const [row] = await tx`
    SELECT template_id::text, template_version, detached_at, disabled_at
      FROM access_profiles WHERE id = ${profile.accessProfileId} AND tenant_id = ${profile.tenantId}`;
  if (!row) throw new AccessError('ACCESS_PROFILE_NOT_FOUND');
  const templateId = (row.template_id as string | null) ?? null;
  const source = templateId !== null && row.detached_at === null ? 'template' : 'own';
  const disabled = row.disabled_at !== null;
  const permissions = disabled
    ? []
    : source === 'template'
      ? await tx`
          SELECT p.id::text, p.code, p.scope FROM access_profile_template_permissions l
            JOIN permissions p ON p.id = l.permission_id AND p.deprecated_at IS NULL
           WHERE l.template_id = ${templateId} ORDER BY p.code`
      : await tx`
          SELECT p.id::text, p.code, p.scope FROM access_profile_permissions l
            JOIN permissions p ON p.id = l.permission_id AND p.deprecated_at IS NULL
           WHERE l.access_profile_id = ${profile.accessProfileId} ORDER BY p.code`;
  return {
    accessProfileId: profile.accessProfileId,
    source,
    templateId,
    templateVersion: (row.template_version as number | null) ?? null,
    disabled,
    permissions: permissions.map((p) => ({ id: p.id as string, code: p.code as string, scope: p.scope as 'tenant' | 'broker' })),
  };
}
