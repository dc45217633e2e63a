// The permission set an edit proposes for a template, checked the way the database would check it
// (existence, retirement, the scope ceiling), so a bad set is refused with a domain code before any
// write instead of aborting the caller's transaction with a constraint error.
import type { TxSql } from '../db/client.ts';
import { assertWithinCeiling, isPermissionScope, ScopeCeilingError, type HolderScope } from '../permissions/scope-ceiling.ts';
import { AccessError } from './access-error.ts';

const NUMERIC_ID = /^[1-9][0-9]{0,18}$/;

export const byNumericId = (a: string, b: string) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0);

/** Distinct ids, ascending; refuses unknown or retired permissions and any above the holder's ceiling. */
export async function checkedPermissionSet(tx: TxSql, holderScope: HolderScope, ids: readonly string[]): Promise<string[]> {
  const wanted = [...new Set(ids.map(String))].sort(byNumericId);
  if (wanted.some((id) => !NUMERIC_ID.test(id))) throw new AccessError('ACCESS_TEMPLATE_PERMISSION_NOT_FOUND');
  if (wanted.length === 0) return wanted;
  // FOR SHARE, as the ceiling triggers do: a rescope of one of these waits until this edit commits.
  const rows = await tx`
    SELECT id::text, code, scope, deprecated_at FROM permissions
     WHERE id = ANY(${wanted}::bigint[]) ORDER BY id FOR SHARE`;
  if (rows.length !== wanted.length || rows.some((r) => r.deprecated_at !== null)) {
    throw new AccessError('ACCESS_TEMPLATE_PERMISSION_NOT_FOUND');
  }
  for (const row of rows) {
    const scope = row.scope as string;
    if (!isPermissionScope(scope)) throw new AccessError('ACCESS_TEMPLATE_PERMISSION_NOT_FOUND');
    try {
      assertWithinCeiling(holderScope, { code: row.code as string, scope });
    } catch (error) {
      if (error instanceof ScopeCeilingError) throw new AccessError('ACCESS_TEMPLATE_PERMISSION_ABOVE_SCOPE', { cause: error });
      throw error;
    }
  }
  return wanted;
}
