// Platform administration permissions. PlatformBootstrapSeeder gives every platform-scope permission of
// the registry to the platform administration profile of the first operator; later operators get
// profiles through platform invitations.
import { declarePermissions } from '../declaration.ts';

export const platformPermissions = declarePermissions('src/permissions/declarations/platform.ts', [
  {
    code: 'platform.tenants.read',
    scope: 'platform',
    description: 'List tenants and read their settings.',
    useCases: ['platform.tenants.list', 'platform.tenants.read'],
  },
  {
    code: 'platform.tenants.manage',
    scope: 'platform',
    description: 'Create a tenant from a blueprint, rename it, disable or re-enable it.',
    useCases: ['platform.tenants.create', 'platform.tenants.update', 'platform.tenants.disable'],
  },
  {
    code: 'platform.blueprints.manage',
    scope: 'platform',
    description: 'Create and edit tenant blueprints and their access profile templates.',
    useCases: ['platform.blueprints.create', 'platform.blueprints.update', 'platform.profile_templates.update'],
  },
  {
    code: 'platform.access_profiles.manage',
    scope: 'platform',
    description: 'Create and edit platform access profiles and the permissions they hold.',
    useCases: ['platform.access_profiles.create', 'platform.access_profiles.update'],
  },
  {
    code: 'platform.operators.invite',
    scope: 'platform',
    description: 'Invite a platform operator with a platform access profile, resend or revoke the invitation.',
    useCases: ['platform.invitations.create', 'platform.invitations.resend', 'platform.invitations.revoke'],
  },
  {
    code: 'platform.grants.revoke',
    scope: 'platform',
    description: 'Revoke a platform operator grant.',
    useCases: ['platform.grants.revoke'],
  },
  {
    code: 'platform.permissions.read',
    scope: 'platform',
    description: 'Read the permission registry and its history.',
    useCases: ['platform.permissions.list'],
  },
  {
    code: 'platform.tenant_context.enter',
    scope: 'platform',
    description: 'Act inside a tenant as an operator (session context), with a recorded reason.',
    useCases: ['platform.session_contexts.enter', 'platform.session_contexts.leave'],
  },
  {
    code: 'platform.task_runs.read',
    scope: 'platform',
    description: 'Read the status of platform background runs (maintenance, schedules).',
    useCases: ['platform.task-runs.read'],
  },
]);
