// The shared services of one harness invocation, all on loopback and all stopped at the end:
// PostgreSQL 18 (embedded, durable: fsync and synchronous_commit at their defaults, so the
// PostgreSQL peers and ours pay for real commits), a private Redis, and the SQS-protocol server
// when `ours` is measured.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createSql, type Sql } from '../../src/db/client.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded-postgres.ts';
import { freePort, startRedisServer, type RedisServer } from '../../src/kv/redis-server.ts';
import type { LocalSqsServer } from '../../src/queue/local-sqs-server.ts';
import { postmasterPid, redisServerPid } from './cpu.ts';
import { pgStatementsWanted } from './pg-statements.ts';

export interface Services {
  pg: EmbeddedPostgres;
  /** Admin pool on the `postgres` database (creating the per-system databases). */
  admin: Sql;
  redis: RedisServer;
  sqs?: LocalSqsServer;
  postgresVersion: string;
  redisVersion: string;
  /** PIDs whose process trees count as every system's server CPU (postmaster, redis-server). */
  serverPids(): number[];
  /** URL of a new empty database on the cluster. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

export async function startServices(options: { sqs: boolean; log: (line: string) => void }): Promise<Services> {
  const dataRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-pg-'));
  fs.chmodSync(dataRoot, 0o755);
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) {
      try {
        await stop();
      } catch (error) {
        options.log(`stopping a service failed: ${(error as Error).message}`);
      }
    }
    stops.length = 0;
  };
  try {
    const pg = await startEmbeddedPostgres({
      dataDir: path.join(dataRoot, 'data'),
      port: await freePort(),
      // Durable on purpose: the PostgreSQL peers and ours are measured with real commits.
      fast: false,
      log: options.log,
      // BENCH_PG_STATEMENTS=true: per-statement figures of each round (pg-statements.ts).
      settings: pgStatementsWanted() ? { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track_planning': 'on' } : undefined,
    });
    stops.push(async () => {
      await pg.stop();
      fs.rmSync(dataRoot, { recursive: true, force: true });
      if (pg.dataDir !== path.join(dataRoot, 'data')) fs.rmSync(pg.dataDir, { recursive: true, force: true });
    });
    const admin = createSql(pg.url, { max: 2, applicationName: 'bench-admin' });
    stops.push(() => admin.end({ timeout: 5 }));
    const [{ v } = { v: 'unknown' }] = await admin<{ v: string }[]>`SELECT current_setting('server_version') AS v`;

    const redis = await startRedisServer({ databases: 16 });
    stops.push(() => redis.stop());
    const redisVersion =
      /v=(\S+)/.exec(spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout ?? '')?.[1] ?? 'unknown';

    let sqs: LocalSqsServer | undefined;
    if (options.sqs) {
      const { startLocalSqsServer } = await import('../../src/queue/local-sqs-server.ts');
      sqs = await startLocalSqsServer();
      const server = sqs;
      stops.push(() => server.stop());
    }

    const pids = [postmasterPid(pg.dataDir), redisServerPid(redis.port)].filter((p): p is number => p !== undefined);
    return {
      pg,
      admin,
      redis,
      sqs,
      postgresVersion: v,
      redisVersion,
      serverPids: () => pids,
      async createDatabase(name) {
        if (!/^[a-z][a-z0-9_]*$/.test(name)) throw new Error(`bad database name ${name}`);
        await admin.unsafe(`CREATE DATABASE ${name}`);
        return pg.url.replace(/\/postgres$/, `/${name}`);
      },
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
