// Workers consume only once the database holds the newest migration of their build: an older schema
// means the migrator has not run yet for this version, so the process waits (not ready) and polls.
import fs from 'node:fs';
import type { Sql } from '../db/client.ts';
import { CONTROL_TABLE } from '../migrator/runner.ts';

/** Reads the build's newest migration name from SVC_SCHEMA_VERSION: JSON `{ "latestMigration": ... }` or a bare name. */
export function readSchemaVersionFile(file: string): string | null {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
  if (text.startsWith('{')) {
    const json = JSON.parse(text) as { latestMigration?: unknown; latest?: unknown; name?: unknown };
    const name = json.latestMigration ?? json.latest ?? json.name;
    return typeof name === 'string' && name.length > 0 ? name : null;
  }
  return text.length > 0 ? text : null;
}

/** True when the migration-control table records `name`. */
export async function schemaHolds(sql: Sql, name: string): Promise<boolean> {
  const [exists] = await sql<{ present: boolean }[]>`SELECT to_regclass(${CONTROL_TABLE}) IS NOT NULL AS present`;
  if (!exists!.present) return false;
  const rows = await sql`SELECT 1 FROM ${sql(CONTROL_TABLE)} WHERE name = ${name} LIMIT 1`;
  return rows.length > 0;
}
