// The permission registry: every declaration of src/permissions/declarations/, validated as a whole.
// `svc permissions emit` writes it to dist/permissions.json and the PermissionsSeeder projects it into
// the database. An invalid registry fails the emit (and so the image build), naming each offending
// declaration by source file and code.
import { accessPermissions } from './declarations/access.ts';
import { platformPermissions } from './declarations/platform.ts';
import { retiredCodes, type RetiredCode } from './declarations/retired.ts';
import type { SourcedDeclaration } from './declaration.ts';
import { isPermissionScope, type PermissionScope } from './scope-ceiling.ts';

/** Every declaration module of the build; a new module is added here. */
export const declaredPermissions: readonly SourcedDeclaration[] = [...accessPermissions, ...platformPermissions];

/** Lowercase dotted code, at least two segments, each starting with a letter. */
export const PERMISSION_CODE_PATTERN = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;
export const PERMISSION_CODE_MAX_LENGTH = 128;
/** Use cases name an operation: letters, digits and `._-`, starting with a letter. */
export const USE_CASE_PATTERN = /^[a-z][a-z0-9._-]*$/;

/** One permission as emitted into permissions.json and projected into the database. */
export interface RegistryPermission {
  code: string;
  scope: PermissionScope;
  description: string;
  replaces_code: string | null;
  use_cases: string[];
}

export interface PermissionRegistry {
  /** Format version of permissions.json. */
  version: 1;
  /** Sorted by code; use cases sorted. */
  permissions: RegistryPermission[];
}

export interface RegistryProblem {
  /** Where the offending declaration is, e.g. `src/permissions/declarations/access.ts`. */
  source: string;
  /** The offending declaration's code (as written). */
  code: string;
  rule: string;
}

export class PermissionRegistryError extends Error {
  readonly code = 'PERMISSION_REGISTRY_INVALID';
  readonly problems: RegistryProblem[];
  constructor(problems: RegistryProblem[]) {
    super(
      `invalid permission registry (${problems.length} problem${problems.length === 1 ? '' : 's'}); fix the declarations:\n` +
        problems.map((p) => `  ${p.source}: ${JSON.stringify(p.code)}: ${p.rule}`).join('\n'),
    );
    this.name = 'PermissionRegistryError';
    this.problems = problems;
  }
}

/** Every problem of a set of declarations (empty when valid). */
export function registryProblems(
  declarations: readonly SourcedDeclaration[],
  retired: readonly RetiredCode[] = retiredCodes,
): RegistryProblem[] {
  const problems: RegistryProblem[] = [];
  const report = (d: SourcedDeclaration, rule: string) =>
    problems.push({ source: d.source, code: String(d.code), rule });

  const byCode = new Map<string, SourcedDeclaration>();
  const useCaseOwner = new Map<string, SourcedDeclaration>();
  const replacedBy = new Map<string, SourcedDeclaration>();
  const retiredSet = new Set(retired.map((r) => r.code));
  const declaredCodes = new Set(declarations.map((d) => d.code));

  for (const d of declarations) {
    if (typeof d.code !== 'string' || !PERMISSION_CODE_PATTERN.test(d.code)) {
      report(d, 'malformed code: expected lowercase dotted segments of [a-z0-9_], at least two, e.g. access.task_runs.read');
    } else if (d.code.length > PERMISSION_CODE_MAX_LENGTH) {
      report(d, `code longer than ${PERMISSION_CODE_MAX_LENGTH} characters`);
    }
    const first = byCode.get(d.code);
    if (first) report(d, `duplicate code: already declared in ${first.source}`);
    else byCode.set(d.code, d);

    if (!isPermissionScope(d.scope)) {
      report(d, `unknown scope ${JSON.stringify(d.scope)}: expected platform, tenant or broker`);
    }
    if (typeof d.description !== 'string' || d.description.trim() === '') {
      report(d, 'missing description');
    }
    if (!Array.isArray(d.useCases) || d.useCases.length === 0) {
      report(d, 'no use case: list the use cases that check this permission');
    } else {
      const seen = new Set<string>();
      for (const useCase of d.useCases) {
        if (typeof useCase !== 'string' || !USE_CASE_PATTERN.test(useCase)) {
          report(d, `malformed use case ${JSON.stringify(useCase)}: expected [a-z][a-z0-9._-]*`);
          continue;
        }
        if (seen.has(useCase)) {
          report(d, `use case ${useCase} listed twice`);
          continue;
        }
        seen.add(useCase);
        const owner = useCaseOwner.get(useCase);
        if (owner && owner.code !== d.code) {
          report(d, `use case ${useCase} is already claimed by ${owner.code} (${owner.source}); a use case belongs to one code`);
        } else {
          useCaseOwner.set(useCase, d);
        }
      }
    }

    if (d.replacesCode !== undefined) {
      const target = d.replacesCode;
      if (typeof target !== 'string' || !PERMISSION_CODE_PATTERN.test(target)) {
        report(d, `replaces_code ${JSON.stringify(target)} is not a dotted code`);
      } else if (target === d.code) {
        report(d, 'replaces_code points to itself');
      } else if (declaredCodes.has(target)) {
        report(d, `replaces_code ${target} is still declared: a rename retires the former code`);
      } else if (!retiredSet.has(target)) {
        report(d, `replaces_code ${target} points nowhere: no retired code has that name (src/permissions/declarations/retired.ts)`);
      } else {
        const other = replacedBy.get(target);
        if (other) report(d, `replaces_code ${target} is already replaced by ${other.code} (${other.source})`);
        else replacedBy.set(target, d);
      }
    }
  }
  return problems;
}

/** Validates the declarations and builds the registry; throws PermissionRegistryError when invalid. */
export function buildRegistry(
  declarations: readonly SourcedDeclaration[] = declaredPermissions,
  retired: readonly RetiredCode[] = retiredCodes,
): PermissionRegistry {
  const problems = registryProblems(declarations, retired);
  if (problems.length > 0) throw new PermissionRegistryError(problems);
  const permissions = declarations
    .map((d) => ({
      code: d.code,
      scope: d.scope,
      description: d.description.trim(),
      replaces_code: d.replacesCode ?? null,
      use_cases: [...d.useCases].sort(),
    }))
    .sort((a, b) => (a.code < b.code ? -1 : a.code > b.code ? 1 : 0));
  return { version: 1, permissions };
}
