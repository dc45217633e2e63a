// PermissionsSeeder: projects the permission registry into `permissions` and `permission_use_cases`.
// The registry is the emitted permissions.json named by SVC_PERMISSIONS_REGISTRY (the migrator image
// receives the one its build emitted); when the variable is unset it is built in-process from the
// declarations, which gives the same content as `npm run permissions:emit`.
// Upsert by code, updating description and scope only when they differ. A scope change goes through
// the database's scope ceiling (trigger permissions_scope_ceiling): if it would leave any holder above
// its ceiling the database refuses it and, the seeders sharing one transaction, the deploy fails with
// nothing written. Permissions are never deleted; marking deprecated_at and writing permission_changes
// are left to a later component.
import type { TxSql } from '../src/db/client.ts';
import type { SeedContext, Seeder } from '../src/migrator/seed-runner.ts';
import { loadRegistry } from '../src/permissions/registry-file.ts';
import { SeederError } from './seeder-error.ts';

export const PermissionsSeeder: Seeder = {
  name: 'PermissionsSeeder',
  async run(tx: TxSql, ctx: SeedContext): Promise<void> {
    const { registry, origin } = loadRegistry(ctx.env, ctx.root);
    let inserted = 0;
    let updated = 0;
    for (const p of registry.permissions) {
      let rows;
      try {
        rows = await tx`
          INSERT INTO permissions AS t (code, scope, description, replaces_code)
          VALUES (${p.code}, ${p.scope}, ${p.description}, ${p.replaces_code})
          ON CONFLICT (code) DO UPDATE SET scope = EXCLUDED.scope, description = EXCLUDED.description
            WHERE t.scope IS DISTINCT FROM EXCLUDED.scope OR t.description IS DISTINCT FROM EXCLUDED.description
          RETURNING (xmax = 0) AS inserted`;
      } catch (error) {
        const e = error as { code?: string; constraint_name?: string; message?: string };
        if (e.code === '23514' && e.constraint_name === 'permission_scope_ceiling') {
          throw new SeederError(
            'PERMISSION_RESCOPE_REFUSED',
            `the registry changes the scope of ${p.code} to ${p.scope}, which the scope ceiling refuses: ${e.message}. ` +
              `Remove the permission from those holders first, or keep its scope.`,
            { cause: error },
          );
        }
        throw error;
      }
      if (rows.length > 0) {
        if (rows[0]!.inserted) inserted += 1;
        else updated += 1;
      }
    }

    // Use cases: the table mirrors the registry exactly (a code that left the registry keeps its row in
    // `permissions` but gates no use case any more).
    const pairs = registry.permissions.flatMap((p) => p.use_cases.map((u) => ({ code: p.code, useCase: u })));
    const codes = pairs.map((x) => x.code);
    const useCases = pairs.map((x) => x.useCase);
    const removed = await tx`
      DELETE FROM permission_use_cases pu
       WHERE NOT EXISTS (
         SELECT 1 FROM permissions p, unnest(${codes}::text[], ${useCases}::text[]) AS r(code, use_case)
          WHERE p.id = pu.permission_id AND p.code = r.code AND pu.use_case = r.use_case)
      RETURNING 1`;
    const added = await tx`
      INSERT INTO permission_use_cases (permission_id, use_case)
      SELECT p.id, r.use_case FROM unnest(${codes}::text[], ${useCases}::text[]) AS r(code, use_case)
        JOIN permissions p ON p.code = r.code
      ON CONFLICT (permission_id, use_case) DO NOTHING
      RETURNING 1`;

    ctx.log(
      `permissions: ${registry.permissions.length} from ${origin}; ${inserted} inserted, ${updated} updated; ` +
        `use cases ${added.length} added, ${removed.length} removed`,
    );
  },
};
