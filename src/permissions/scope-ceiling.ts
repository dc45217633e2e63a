// Application mirror of the database function permission_scope_ceiling(holder_scope)
// (sql/authorization/scope-ceiling.sql). The database is the source of truth and refuses anything above
// the ceiling; this copy lets use cases and the registry fail earlier with a clearer error.
// test/integration/ceiling.test.ts asserts both are equal for every holder scope.

export const PERMISSION_SCOPES = ['platform', 'tenant', 'broker'] as const;
export type PermissionScope = (typeof PERMISSION_SCOPES)[number];

/** Holders have the same three scopes as permissions. */
export const HOLDER_SCOPES = PERMISSION_SCOPES;
export type HolderScope = PermissionScope;

/** Permission scopes each holder scope accepts. */
export const SCOPE_CEILING: Readonly<Record<HolderScope, readonly PermissionScope[]>> = Object.freeze({
  platform: Object.freeze(['platform'] as const),
  tenant: Object.freeze(['tenant', 'broker'] as const),
  broker: Object.freeze(['broker'] as const),
});

export function isPermissionScope(value: unknown): value is PermissionScope {
  return typeof value === 'string' && (PERMISSION_SCOPES as readonly string[]).includes(value);
}

/** True when a holder of `holder` scope may hold a permission of `permission` scope. */
export function ceilingAccepts(holder: HolderScope, permission: PermissionScope): boolean {
  return SCOPE_CEILING[holder].includes(permission);
}

export class ScopeCeilingError extends Error {
  readonly code = 'PERMISSION_SCOPE_CEILING';
  readonly permissionCode: string;
  readonly permissionScope: PermissionScope;
  readonly holderScope: HolderScope;
  constructor(permissionCode: string, permissionScope: PermissionScope, holderScope: HolderScope) {
    super(
      `permission ${permissionCode} has scope ${permissionScope}, above the ceiling of a ${holderScope} holder, ` +
        `which accepts only scope ${SCOPE_CEILING[holderScope].join(' or ')}`,
    );
    this.name = 'ScopeCeilingError';
    this.permissionCode = permissionCode;
    this.permissionScope = permissionScope;
    this.holderScope = holderScope;
  }
}

/** Throws ScopeCeilingError when the permission is above the holder's ceiling. */
export function assertWithinCeiling(holder: HolderScope, permission: { code: string; scope: PermissionScope }): void {
  if (!ceilingAccepts(holder, permission.scope)) throw new ScopeCeilingError(permission.code, permission.scope, holder);
}
