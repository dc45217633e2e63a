// Where the database is: DATABASE_URL when set, otherwise an embedded PostgreSQL 18 with persistent
// data under SVC_DATA_DIR (default .data/) on SVC_EMBEDDED_PG_PORT (default 54329). A cluster already
// started by another `svc` command on the same data directory is reused.
import path from 'node:path';
import type { EmbeddedPostgres } from './embedded-postgres.ts';

export const DEFAULT_EMBEDDED_PG_PORT = 54329;
export const EMBEDDED_DATABASE = 'svc';

export interface ResolvedDatabase {
  url: string;
  embedded: boolean;
  /** Stops the embedded server if this call started it; no-op otherwise. */
  stop(): Promise<void>;
}

export async function resolveDatabase(
  env: { DATABASE_URL?: string; SVC_DATA_DIR?: string; SVC_EMBEDDED_PG_PORT?: string },
  log: (line: string) => void = () => {},
): Promise<ResolvedDatabase> {
  if (env.DATABASE_URL) return { url: env.DATABASE_URL, embedded: false, async stop() {} };
  const { startEmbeddedPostgres } = await import('./embedded-postgres.ts');
  const dataDir = path.join(path.resolve(env.SVC_DATA_DIR ?? '.data'), 'pg');
  const pg: EmbeddedPostgres = await startEmbeddedPostgres({
    dataDir,
    port: Number(env.SVC_EMBEDDED_PG_PORT ?? DEFAULT_EMBEDDED_PG_PORT),
    log,
  });
  const { createSql } = await import('./client.ts');
  const admin = createSql(pg.url, { max: 1 });
  try {
    const exists = await admin`SELECT 1 FROM pg_database WHERE datname = ${EMBEDDED_DATABASE}`;
    // Several `svc` commands may start at once on a fresh cluster: one of them creates the database.
    if (exists.length === 0) {
      await admin.unsafe(`CREATE DATABASE ${EMBEDDED_DATABASE}`).catch((error: { code?: string }) => {
        if (error.code !== '42P04' && error.code !== '23505') throw error;
      });
    }
  } finally {
    await admin.end();
  }
  return { url: pg.url.replace(/\/postgres$/, `/${EMBEDDED_DATABASE}`), embedded: true, stop: () => pg.stop() };
}
