// A confirmed edit of a tenant's access-profile template (R-AUTHZ-15, R-AUTHZ-16). The editor first
// previews the impact (what is added and removed, which linked profiles and how many members they
// reach), decides for each linked profile, then confirms against the version it previewed:
//   * the template's permission set is replaced and its `version` rises by one;
//   * one access_profile_template_changes row records from/to version and the added and removed ids;
//   * each linked (not yet detached) profile gets one decision row:
//       `followed`: the profile keeps inheriting live and adopts the new template_version;
//       `detached`: the profile gets detached_at/detached_by_user_id and, as its own permissions, the
//                   template's set as it was before the edit, so detaching changes nothing for its members.
// Profiles detached earlier are not affected and get no decision.
import type { TxSql } from '../db/client.ts';
import type { HolderScope } from '../permissions/scope-ceiling.ts';
import { AccessError } from './access-error.ts';
import { byNumericId, checkedPermissionSet } from './template-permission-set.ts';

export type TemplateDecision = 'followed' | 'detached';

export interface TemplateEditProposal {
  tenantId: string;
  templateId: string;
  /** The complete permission set the template should have after the edit. */
  permissionIds: readonly string[];
}

export interface AffectedProfile {
  accessProfileId: string;
  name: string;
  brokerId: string | null;
  /** Members holding the profile through a link that is open today or starts later. */
  affectedUsers: number;
}

export interface TemplateEditPreview {
  fromVersion: number;
  toVersion: number;
  addedPermissionIds: string[];
  removedPermissionIds: string[];
  profiles: AffectedProfile[];
}

export interface ConfirmedTemplateEdit extends TemplateEditProposal {
  /** The version the editor previewed; another current version means someone edited in between. */
  expectedVersion: number;
  reason: string;
  /** From the server-side authenticated identity. */
  changedByUserId: string;
  /** Decision per linked profile id; profiles not named take `defaultDecision`. */
  decisions?: Readonly<Record<string, TemplateDecision>>;
  /** Decision for linked profiles absent from `decisions` (default `followed`). */
  defaultDecision?: TemplateDecision;
}

export interface TemplateEditResult {
  changeId: string;
  fromVersion: number;
  toVersion: number;
  addedPermissionIds: string[];
  removedPermissionIds: string[];
  decisions: (AffectedProfile & { decision: TemplateDecision })[];
}

interface LoadedEdit {
  scope: HolderScope;
  preview: TemplateEditPreview;
  /** The template's set before the edit (what a detached profile keeps). */
  currentIds: string[];
  nextIds: string[];
}

async function loadEdit(tx: TxSql, proposal: TemplateEditProposal, lock: boolean): Promise<LoadedEdit> {
  if (!/^[1-9][0-9]{0,18}$/.test(proposal.templateId)) throw new AccessError('ACCESS_TEMPLATE_NOT_FOUND');
  const forUpdate = lock ? tx`FOR UPDATE` : tx``;
  const [template] = await tx`
    SELECT scope, version FROM access_profile_templates
     WHERE id = ${proposal.templateId} AND tenant_id = ${proposal.tenantId} ${forUpdate}`;
  if (!template) throw new AccessError('ACCESS_TEMPLATE_NOT_FOUND');
  const scope = template.scope as HolderScope;

  const nextIds = await checkedPermissionSet(tx, scope, proposal.permissionIds);
  const currentIds = (
    await tx`SELECT permission_id::text AS id FROM access_profile_template_permissions WHERE template_id = ${proposal.templateId}`
  )
    .map((r) => r.id as string)
    .sort(byNumericId);
  const current = new Set(currentIds);
  const next = new Set(nextIds);

  // Locked in id order (only the profile rows) so two edits of one template queue instead of deadlocking.
  const linked = await tx`
    SELECT ap.id::text, ap.name, ap.broker_id::text,
           (SELECT count(DISTINCT map.membership_id)::int
              FROM membership_access_profiles map
              JOIN memberships m ON m.id = map.membership_id AND m.removed_at IS NULL
             WHERE map.access_profile_id = ap.id
               AND (map.valid_until IS NULL OR map.valid_until > current_date)) AS affected_users
      FROM access_profiles ap
     WHERE ap.template_id = ${proposal.templateId} AND ap.tenant_id = ${proposal.tenantId} AND ap.detached_at IS NULL
     ORDER BY ap.id
     ${lock ? tx`FOR UPDATE OF ap` : tx``}`;

  return {
    scope,
    currentIds,
    nextIds,
    preview: {
      fromVersion: template.version as number,
      toVersion: (template.version as number) + 1,
      addedPermissionIds: nextIds.filter((id) => !current.has(id)),
      removedPermissionIds: currentIds.filter((id) => !next.has(id)),
      profiles: linked.map((r) => ({
        accessProfileId: r.id as string,
        name: r.name as string,
        brokerId: (r.broker_id as string | null) ?? null,
        affectedUsers: r.affected_users as number,
      })),
    },
  };
}

/** What confirming `proposal` would change and whom it reaches; writes nothing. */
export async function previewAccessProfileTemplateEdit(tx: TxSql, proposal: TemplateEditProposal): Promise<TemplateEditPreview> {
  return (await loadEdit(tx, proposal, false)).preview;
}

export async function editAccessProfileTemplate(tx: TxSql, edit: ConfirmedTemplateEdit): Promise<TemplateEditResult> {
  const reason = edit.reason.trim();
  if (!reason) throw new AccessError('ACCESS_TEMPLATE_REASON_REQUIRED');
  const { preview, currentIds } = await loadEdit(tx, edit, true);
  if (preview.fromVersion !== edit.expectedVersion) throw new AccessError('ACCESS_TEMPLATE_VERSION_CONFLICT');
  const { addedPermissionIds: added, removedPermissionIds: removed } = preview;
  if (added.length === 0 && removed.length === 0) throw new AccessError('ACCESS_TEMPLATE_NO_CHANGE');

  const linkedIds = new Set(preview.profiles.map((p) => p.accessProfileId));
  const named = edit.decisions ?? {};
  if (Object.keys(named).some((id) => !linkedIds.has(id))) throw new AccessError('ACCESS_TEMPLATE_DECISION_UNKNOWN_PROFILE');
  const decided = preview.profiles.map((p) => ({ ...p, decision: named[p.accessProfileId] ?? edit.defaultDecision ?? 'followed' }));

  // Detached profiles first, while the template still has the old set: each gets its own copy of it.
  for (const profile of decided.filter((p) => p.decision === 'detached')) {
    await tx`DELETE FROM access_profile_permissions WHERE access_profile_id = ${profile.accessProfileId}`;
    if (currentIds.length) {
      await tx`INSERT INTO access_profile_permissions (access_profile_id, permission_id)
               SELECT ${profile.accessProfileId}, unnest(${currentIds}::bigint[])`;
    }
    await tx`UPDATE access_profiles
                SET detached_at = clock_timestamp(), detached_by_user_id = ${edit.changedByUserId}, updated_at = clock_timestamp()
              WHERE id = ${profile.accessProfileId}`;
  }

  if (removed.length) {
    await tx`DELETE FROM access_profile_template_permissions
              WHERE template_id = ${edit.templateId} AND permission_id = ANY(${removed}::bigint[])`;
  }
  if (added.length) {
    await tx`INSERT INTO access_profile_template_permissions (template_id, permission_id)
             SELECT ${edit.templateId}, unnest(${added}::bigint[])`;
  }
  await tx`UPDATE access_profile_templates SET version = ${preview.toVersion}, updated_at = clock_timestamp()
            WHERE id = ${edit.templateId}`;

  const followed = decided.filter((p) => p.decision === 'followed').map((p) => p.accessProfileId);
  if (followed.length) {
    await tx`UPDATE access_profiles SET template_version = ${preview.toVersion}, updated_at = clock_timestamp()
              WHERE id = ANY(${followed}::bigint[])`;
  }

  const [change] = await tx`
    INSERT INTO access_profile_template_changes
      (tenant_id, template_id, from_version, to_version, added_permission_ids, removed_permission_ids, reason, changed_by_user_id)
    VALUES (${edit.tenantId}, ${edit.templateId}, ${preview.fromVersion}, ${preview.toVersion},
            ${added}::bigint[], ${removed}::bigint[], ${reason}, ${edit.changedByUserId})
    RETURNING id::text`;
  const changeId = change!.id as string;
  for (const profile of decided) {
    await tx`INSERT INTO access_profile_template_change_decisions (change_id, access_profile_id, decision, affected_users)
             VALUES (${changeId}, ${profile.accessProfileId}, ${profile.decision}, ${profile.affectedUsers})`;
  }

  return {
    changeId,
    fromVersion: preview.fromVersion,
    toVersion: preview.toVersion,
    addedPermissionIds: added,
    removedPermissionIds: removed,
    decisions: decided,
  };
}
