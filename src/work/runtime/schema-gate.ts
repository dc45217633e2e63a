// Workers consume only once the database holds the newest migration of their build: an older schema
// means the migrator has not run yet for this version, so the process waits (not ready) and polls.
import type { Sql } from '../../db/client.ts';
import { CONTROL_TABLE } from '../../migrator/runner.ts';

/** True when the migration-control table records `name`. */
export async function schemaHolds(sql: Sql, name: string): Promise<boolean> {
  const [exists] = await sql<{ present: boolean }[]>`SELECT to_regclass(${CONTROL_TABLE}) IS NOT NULL AS present`;
  if (!exists!.present) return false;
  const rows = await sql`SELECT 1 FROM ${sql(CONTROL_TABLE)} WHERE name = ${name} LIMIT 1`;
  return rows.length > 0;
}
