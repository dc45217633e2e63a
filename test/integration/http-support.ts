// Shared set-up of the HTTP integration tests: a fresh migrated database, a private Redis logical
// database, two tenants (each with a user and membership) whose sessions live in a fake resolver, and
// buildApp with a log capture. Everything is closed by `close()`.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { buildApp, type AppDeps, type HttpSettings } from '../../src/http/app.ts';
import { captureLogger } from '../../src/logging/logger.ts';
import type { Sql } from '../../src/db/client.ts';
import { connectedRedis, freshDatabase, freshRedisUrl, type TestDatabase } from '../support/services.ts';
import { FakeSessionResolver } from '../support/fake-session-resolver.ts';
import { createTenantMember } from './work-tables-support.ts';

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
  const db = await freshDatabase();
  const closers: Array<() => Promise<void>> = [() => db.drop()];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
  };
  try {
    const redisUrl = await freshRedisUrl();
    const redis = await connectedRedis(redisUrl, { name: 'http-test', autoPipelining: true });
    closers.push(async () => redis.disconnect());
    const memberA = await createTenantMember(db.sql);
    const memberB = await createTenantMember(db.sql);
    const resolver = new FakeSessionResolver()
      .add('token-a', memberA)
      .add('token-b', memberB)
      .add('token-no-permission', { ...memberA, permissions: [] });
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
    return { db, redis, redisUrl, app, resolver, logs, tenantA: memberA.tenantId, tenantB: memberB.tenantId, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** A second app over the fixture's database, Redis and sessions (no CORS, no logs), with `overrides`. */
export function fixtureApp(f: HttpFixture, overrides: Partial<AppDeps> = {}): Promise<FastifyInstance> {
  return buildApp({
    sql: f.db.sql,
    redis: f.redis,
    resolver: f.resolver,
    catalog: { version: 1, tasks: [], subscriptions: [] },
    latestMigration: LATEST,
    config: { corsOrigins: [], corsCredentials: false },
    logger: false,
    ...overrides,
  });
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
