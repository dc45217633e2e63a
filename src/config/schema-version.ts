// The newest migration name of this build, read from SVC_SCHEMA_VERSION (dist/schema-version.json,
// written by `svc emit`). The API and workers gate readiness on the database holding it.
import fs from 'node:fs';
import { z } from 'zod';

export class SchemaVersionError extends Error {
  readonly code = 'SCHEMA_VERSION_UNREADABLE';
}

const schemaVersionFile = z.object({ latestMigration: z.string().min(1) });

export function readSchemaVersion(file: string): string {
  let json: unknown;
  try {
    json = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (cause) {
    throw new SchemaVersionError(
      `cannot read the build's schema version from ${file} (SVC_SCHEMA_VERSION): run \`npm run build\` (svc emit) or point SVC_SCHEMA_VERSION at the build's schema-version.json`,
      { cause },
    );
  }
  const parsed = schemaVersionFile.safeParse(json);
  if (!parsed.success) {
    throw new SchemaVersionError(`${file} (SVC_SCHEMA_VERSION) must hold {"latestMigration": "<name>"}: regenerate it with \`svc emit\``);
  }
  return parsed.data.latestMigration;
}
