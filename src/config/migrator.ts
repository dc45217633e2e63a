// Environment of the migrator executable (`svc migrator deploy|apply|status|db-seed`).
import path from 'node:path';
import { z } from 'zod';
import { databaseUrl, integer, logLevel, nodeEnv, parseEnv, type Env } from './parse.ts';

export const migratorEnvSchema = z.object({
  /** Target database; unset means the embedded PostgreSQL 18 under SVC_DATA_DIR. */
  DATABASE_URL: databaseUrl,
  /** Where the embedded cluster keeps its data (default `.data`). */
  SVC_DATA_DIR: z.string().optional(),
  /** Port of the embedded cluster (default 54329). */
  SVC_EMBEDDED_PG_PORT: integer(1, 65535).optional(),
  LOG_LEVEL: logLevel,
  NODE_ENV: nodeEnv,
  /** Path of the emitted permission registry (`permissions.json`) the PermissionsSeeder projects. */
  SVC_PERMISSIONS_REGISTRY: z.string().optional(),
  /** Root holding drizzle/, sql/ and seeders/ (default: the project root); tests point it at fixtures. */
  SVC_MIGRATIONS_ROOT: z.string().optional(),
  // Bootstrap variables are optional here: PlatformBootstrapSeeder validates them, and only on a
  // database without any platform grant.
  PLATFORM_BOOTSTRAP_USERNAME: z.string().optional(),
  PLATFORM_BOOTSTRAP_PASSWORD: z.string().optional(),
  PLATFORM_BOOTSTRAP_EMAIL: z.string().optional(),
  PLATFORM_BOOTSTRAP_NAME: z.string().optional(),
});

export type MigratorConfig = z.infer<typeof migratorEnvSchema>;

export function loadMigratorConfig(env: Env): MigratorConfig {
  return parseEnv('migrator', migratorEnvSchema, env);
}

/** The project root this build ships in (src/config/ is two levels below it). */
export const PROJECT_ROOT = path.resolve(import.meta.dirname, '..', '..');

export function migrationsRoot(config: { SVC_MIGRATIONS_ROOT?: string }): string {
  return path.resolve(config.SVC_MIGRATIONS_ROOT ?? PROJECT_ROOT);
}
