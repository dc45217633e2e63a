// A PostgreSQL 18 cluster of one test file's own, migrated, for tests that stop and start the server
// (the shared test cluster serves every other file at the same time). Commits wait for their WAL to be
// written, as in production (the fast cluster turns that off on its command line): an immediate stop
// then loses no commit a client saw succeed, so a run left behind can only be one the workers left.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createSql, type Sql } from '../../src/db/client.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded-postgres.ts';
import { freePort } from '../../src/kv/redis-server.ts';
import { applyMigrations } from '../../src/migrator/runner.ts';
import type { TestDatabase } from './services.ts';
import { waitFor } from './wait-for.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

export interface OwnCluster {
  /** The migrated `postgres` database, for workHarness({ database }); its drop leaves the cluster to close(). */
  database: TestDatabase;
  sql: Sql;
  /**
   * Stops the server as `pg_ctl stop -m immediate` does (SIGQUIT to the postmaster: every backend quits
   * at once, no checkpoint, crash recovery at the next start) or `-m fast` (sessions terminated, a clean
   * shutdown). Resolves once the postmaster is gone.
   */
  stop(mode: 'immediate' | 'fast'): Promise<void>;
  /** Starts the server again on the same data directory and port. */
  start(): Promise<void>;
  /** Ends the pool, stops the server and removes its files. */
  close(): Promise<void>;
}

export async function ownCluster(prefix: string): Promise<OwnCluster> {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), `${prefix}-`));
  fs.chmodSync(scratch, 0o755);
  const port = await freePort();
  const startPg = () => startEmbeddedPostgres({ dataDir: path.join(scratch, 'pg'), port, fast: true });
  let pg: EmbeddedPostgres | undefined = await startPg();
  // Set from a connection of its own, before the pool opens any: a session takes the database's default
  // when it starts, so a pool connection opened before it kept the command line's `off` for its whole
  // life, and a transaction it committed could be taken back by an immediate stop after its COMMIT had
  // answered (a run's effect acknowledged, its message deleted, then lost: the run left `running`).
  const setup = createSql(pg.url, { max: 1 });
  try {
    await setup`ALTER DATABASE postgres SET synchronous_commit = on`;
  } finally {
    await setup.end({ timeout: 5 });
  }
  const sql = createSql(pg.url, { max: 30 });
  await applyMigrations(sql, { root: ROOT });
  return {
    database: { name: 'postgres', url: pg.url, sql, drop: async () => {} },
    sql,
    async stop(mode) {
      const server = pg!;
      pg = undefined;
      if (mode === 'immediate') {
        const postmaster = Number(fs.readFileSync(path.join(server.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
        process.kill(postmaster, 'SIGQUIT');
        const gone = () => {
          try {
            process.kill(postmaster, 0);
            return false;
          } catch {
            return true;
          }
        };
        await waitFor(gone, 20_000, { what: 'the postmaster gone after an immediate shutdown' });
      }
      // Gives this process's lease up; after an immediate shutdown there is no server left to stop.
      await server.stop();
    },
    async start() {
      pg = await startPg();
    },
    async close() {
      try {
        await sql.end({ timeout: 5 });
      } finally {
        await pg?.stop();
        fs.rmSync(scratch, { recursive: true, force: true });
      }
    },
  };
}
