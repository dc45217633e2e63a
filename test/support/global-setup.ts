// One set of private services per test run: a throwaway PostgreSQL 18 cluster holding a migrated
// template database, a private redis-server and an in-memory SQS-protocol server, all on loopback.
// Test files reach them through test/support/services.ts. Everything is stopped at the end, even
// when tests fail.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres.ts';
import { createSql } from '../../src/db/client.ts';
import { applyMigrations } from '../../src/migrator/runner.ts';
import { freePort, startRedisServer } from '../../src/kv/redis-server.ts';
import { startLocalSqsServer } from '../../src/queue/local-sqs-server.ts';

export const TEMPLATE_DB = 'svc_template';
export const PROJECT_ROOT = path.resolve(import.meta.dirname, '..', '..');

export interface TestServices {
  /** URL of the cluster's `postgres` database (admin connection). */
  pgAdminUrl: string;
  pgPort: number;
  templateDb: string;
  redisUrl: string;
  sqsEndpoint: string;
  /** Scratch directory of this run (mode 755 so the postgres user can reach it). */
  baseDir: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    services: TestServices;
  }
}

export default async function setup(project: TestProject) {
  const baseDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-test-'));
  fs.chmodSync(baseDir, 0o755);
  const stops: Array<() => Promise<void>> = [];
  const teardown = async () => {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    fs.rmSync(baseDir, { recursive: true, force: true });
  };
  try {
    const pg = await startEmbeddedPostgres({
      dataDir: path.join(baseDir, 'pg'),
      port: await freePort(),
      fast: true,
    });
    stops.push(() => pg.stop());

    const admin = createSql(pg.url, { max: 1 });
    await admin.unsafe(`CREATE DATABASE ${TEMPLATE_DB}`);
    await admin.end();
    const templateUrl = pg.url.replace(/\/postgres$/, `/${TEMPLATE_DB}`);
    const template = createSql(templateUrl, { max: 2 });
    await applyMigrations(template, { root: PROJECT_ROOT });
    await template.end();

    const redis = await startRedisServer({ databases: 1024 });
    stops.push(() => redis.stop());
    const sqs = await startLocalSqsServer();
    stops.push(() => sqs.stop());

    project.provide('services', {
      pgAdminUrl: pg.url,
      pgPort: pg.port,
      templateDb: TEMPLATE_DB,
      redisUrl: redis.url,
      sqsEndpoint: sqs.endpoint,
      baseDir,
    });
  } catch (error) {
    await teardown();
    throw error;
  }
  return teardown;
}
