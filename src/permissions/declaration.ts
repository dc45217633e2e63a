// How a permission is declared in code, next to the use cases that need it. A declaration module calls
// `declarePermissions(source, [...])` so every entry remembers where it was declared: registry errors
// name the offending declaration by source and code.
import type { PermissionScope } from './scope-ceiling.ts';

export interface PermissionDeclaration {
  /** Dotted code, lowercase segments of [a-z0-9_], at least two: `access.task_runs.read`. */
  code: string;
  /** Highest holder scope meaning: `platform`, `tenant` or `broker`. */
  scope: PermissionScope;
  /** What holding it allows, for operators reading profiles. */
  description: string;
  /** Use cases (route or unit operation names) that check this permission; each belongs to one code. */
  useCases: readonly string[];
  /** Explicit rename: the former code this one replaces (must be listed as retired). */
  replacesCode?: string;
}

/** A declaration plus where it came from (e.g. `src/permissions/declarations/access.ts`). */
export interface SourcedDeclaration extends PermissionDeclaration {
  source: string;
}

export function declarePermissions(source: string, declarations: readonly PermissionDeclaration[]): SourcedDeclaration[] {
  return declarations.map((d) => ({ ...d, source }));
}
