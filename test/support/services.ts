// Per-test-file access to the run's private services (see global-setup.ts). Each file gets its own
// database cloned from the migrated template, its own Redis logical database (so wake signals and
// caches never cross) and its own queue-name prefix on the shared SQS server.
import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { Redis } from 'ioredis';
import { createSql, type Sql } from '../../src/db/client.ts';
import { createRedis, type RedisClientOptions } from '../../src/kv/client.ts';

export function services() {
  return inject('services');
}

export interface TestDatabase {
  name: string;
  url: string;
  /** A small pool on the fresh database; closed by `drop()`. */
  sql: Sql;
  drop(): Promise<void>;
}

function adminUrlFor(db: string): string {
  return services().pgAdminUrl.replace(/\/postgres$/, `/${db}`);
}

/** A fresh database cloned from the migrated template (CREATE DATABASE ... TEMPLATE). */
export async function freshDatabase(options: { template?: string; max?: number } = {}): Promise<TestDatabase> {
  const s = services();
  const name = `t_${randomBytes(6).toString('hex')}`;
  const admin = createSql(s.pgAdminUrl, { max: 1 });
  try {
    await admin.unsafe(`CREATE DATABASE ${name} TEMPLATE ${options.template ?? s.templateDb}`);
  } finally {
    await admin.end();
  }
  const url = adminUrlFor(name);
  const sql = createSql(url, { max: options.max ?? 5 });
  return {
    name,
    url,
    sql,
    async drop() {
      await sql.end({ timeout: 5 });
      const a = createSql(s.pgAdminUrl, { max: 1 });
      try {
        await a.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await a.end();
      }
    },
  };
}

/** An empty database (no migrations), for migrator tests. */
export async function emptyDatabase(): Promise<TestDatabase> {
  return freshDatabase({ template: 'template0' });
}

/** A Redis URL on a logical database no other test file uses in this run. */
export async function freshRedisUrl(): Promise<string> {
  const base = services().redisUrl;
  const counter = new Redis(base, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await counter.connect();
    const n = await counter.incr('svc:test:next-db');
    return `${base}/${1 + (n % 1023)}`;
  } finally {
    counter.disconnect();
  }
}

/**
 * The project's Redis client, returned once it is ready: the client refuses commands while it connects
 * (no offline queue), so a test that uses it straight away fails on a loaded machine. Bounded: a Redis
 * that never becomes ready fails the test with its name instead of hanging it.
 */
export async function connectedRedis(url: string, options: RedisClientOptions = {}): Promise<Redis> {
  const redis = createRedis(url, options);
  redis.on('error', () => {});
  const timeoutMs = 10_000;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      new Promise((resolve) => redis.once('ready', resolve)),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Redis client ${options.name ?? ''} not ready after ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } catch (error) {
    redis.disconnect();
    throw error;
  } finally {
    clearTimeout(timer);
  }
  return redis;
}

/** SQS endpoint and a queue URL prefix unique to the caller, so queues never cross between files. */
export function freshQueuePrefix(): { endpoint: string; queueUrlPrefix: string } {
  const endpoint = services().sqsEndpoint;
  return { endpoint, queueUrlPrefix: `${endpoint}/000000000000/q${randomBytes(4).toString('hex')}_` };
}
