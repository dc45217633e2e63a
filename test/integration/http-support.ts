// Shared set-up of the HTTP integration tests: a fresh database holding the work tables, a private
// Redis logical database, two tenants with sessions in a fake resolver, and buildApp with a log
// capture. Everything is closed by `close()`.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { buildApp, type HttpSettings } from '../../src/http/app.ts';
import { createRedis } from '../../src/kv/client.ts';
import { captureLogger } from '../../src/logging/logger.ts';
import type { Sql } from '../../src/db/client.ts';
import { ensureControlTable } from '../../src/migrator/runner.ts';
import { emptyDatabase, freshRedisUrl, type TestDatabase } from '../support/services.ts';
import { FakeSessionResolver } from '../support/fake-session-resolver.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

/**
 * A database holding the real run tables (the frozen sql/work/0016_work.sql) over minimal stand-ins of
 * the tables they reference (tenants, users, memberships), plus the migration-control table. The HTTP
 * tests exercise task_runs and readiness only, so they stay independent of the domain migrations.
 */
export async function runsDatabase(): Promise<TestDatabase> {
  const db = await emptyDatabase();
  try {
    await db.sql.unsafe(`
      CREATE TABLE tenants (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY);
      CREATE TABLE users (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY);
      CREATE TABLE memberships (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        user_id bigint NOT NULL REFERENCES users (id), tenant_id bigint NOT NULL REFERENCES tenants (id),
        UNIQUE (id, user_id, tenant_id));`);
    await ensureControlTable(db.sql);
    await db.sql.unsafe(fs.readFileSync(path.join(ROOT, 'sql/work/0016_work.sql'), 'utf8'));
  } catch (error) {
    await db.drop();
    throw error;
  }
  return db;
}

async function createTenant(sql: Sql): Promise<string> {
  const [row] = await sql`INSERT INTO tenants DEFAULT VALUES RETURNING id::text AS id`;
  return row!.id as string;
}

export const LATEST = 'test_latest_migration';

export interface HttpFixture {
  db: TestDatabase;
  redis: Redis;
  redisUrl: string;
  app: FastifyInstance;
  resolver: FakeSessionResolver;
  logs: ReturnType<typeof captureLogger>;
  tenantA: string;
  tenantB: string;
  close(): Promise<void>;
}

export async function httpFixture(
  config: Partial<HttpSettings> = {},
  extend?: (app: FastifyInstance) => void,
): Promise<HttpFixture> {
  const db = await runsDatabase();
  const closers: Array<() => Promise<void>> = [() => db.drop()];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
  };
  try {
    const redisUrl = await freshRedisUrl();
    const redis = createRedis(redisUrl, { name: 'http-test', autoPipelining: true });
    closers.push(async () => redis.disconnect());
    const tenantA = await createTenant(db.sql);
    const tenantB = await createTenant(db.sql);
    const resolver = new FakeSessionResolver()
      .add('token-a', { tenantId: tenantA, userId: '10', membershipId: '100' })
      .add('token-b', { tenantId: tenantB, userId: '20', membershipId: '200' })
      .add('token-no-permission', { tenantId: tenantA, permissions: [] });
    const logs = captureLogger('trace');
    const app = await buildApp({
      sql: db.sql,
      redis,
      resolver,
      catalog: { version: 1, tasks: [], subscriptions: [] },
      latestMigration: LATEST,
      config: { corsOrigins: ['https://app.example.com'], corsCredentials: true, ...config },
      logger: logs.logger,
    });
    extend?.(app);
    await app.ready();
    closers.push(() => app.close());
    return { db, redis, redisUrl, app, resolver, logs, tenantA, tenantB, close };
  } catch (error) {
    await close();
    throw error;
  }
}

export interface RunFields {
  status?: 'queued' | 'running' | 'retrying' | 'succeeded' | 'failed' | 'skipped';
  progress?: number;
  attempts?: number;
  outcome?: Record<string, unknown>;
  name?: string;
  queue?: string;
}

/** Inserts a task run of `tenantId` directly (a system-actor run needs no actor row). */
export async function insertRun(sql: Sql, tenantId: string, fields: RunFields = {}): Promise<string> {
  const runId = randomUUID();
  const status = fields.status ?? 'running';
  const started = status !== 'queued';
  const finished = ['succeeded', 'failed', 'skipped'].includes(status);
  await sql`
    INSERT INTO task_runs (run_id, tenant_id, name, queue, trigger, actor_kind, actor_label, correlation_id, causation_id,
                           status, attempts, progress, outcome, started_at, finished_at)
    VALUES (${runId}, ${tenantId}, ${fields.name ?? 'reports.build'}, ${fields.queue ?? 'default'}, 'dispatch', 'system', 'test',
            ${randomUUID()}, ${randomUUID()}, ${status}, ${fields.attempts ?? (started ? 1 : 0)}, ${fields.progress ?? 0},
            ${sql.json((fields.outcome ?? {}) as never)},
            ${started ? sql`clock_timestamp()` : null}, ${finished ? sql`clock_timestamp()` : null})`;
  return runId;
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
export const cookie = (token: string, name = '__Host-svc_session') => ({ cookie: `${name}=${token}` });
