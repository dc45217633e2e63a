// One set of private services per test run: a throwaway PostgreSQL 18 cluster holding a migrated
// template database, a private redis-server and an in-memory SQS-protocol server, all on loopback.
// Test files reach them through test/support/services.ts. Everything is stopped at the end, even
// when tests fail.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { createSql } from '../../src/db/client.ts';
import { applyMigrations } from '../../src/migrator/runner.ts';
import { selectBackendName, type StartedBackend } from './backends/types.ts';

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
  const backend =
    selectBackendName(process.env) === 'containers'
      ? (await import('./backends/containers.ts')).containersBackend
      : (await import('./backends/embedded.ts')).embeddedBackend;
  let started: StartedBackend | undefined;
  const teardown = async () => {
    await started?.stop().catch(() => {});
    fs.rmSync(baseDir, { recursive: true, force: true });
  };
  try {
    started = await backend.start(baseDir);
    const admin = createSql(started.pgAdminUrl, { max: 1 });
    try {
      await admin.unsafe(`DROP DATABASE IF EXISTS ${TEMPLATE_DB}`);
      await admin.unsafe(`CREATE DATABASE ${TEMPLATE_DB}`);
    } finally {
      await admin.end();
    }
    const template = createSql(started.pgAdminUrl.replace(/\/postgres$/, `/${TEMPLATE_DB}`), { max: 2 });
    try {
      await applyMigrations(template, { root: PROJECT_ROOT });
    } finally {
      await template.end();
    }
    project.provide('services', {
      pgAdminUrl: started.pgAdminUrl,
      pgPort: started.pgPort,
      templateDb: TEMPLATE_DB,
      redisUrl: started.redisUrl,
      sqsEndpoint: started.sqsEndpoint,
      baseDir,
    });
  } catch (error) {
    await teardown();
    throw error;
  }
  return teardown;
}
