// The operator commands find the queues of a running `npm start` by themselves: the launcher writes its
// endpoints to <SVC_DATA_DIR>/dev-stack.json (src/config/dev-stack.ts), and `svc dlq list` run with no
// SVC_SQS_* variable reads them while that launcher lives. Here this test process plays the launcher
// (the file names its pid) over the harness's database and queues; the real launcher writing the file
// is covered by test/integration/dev-stack.test.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEV_STACK_FILE, withDevStackFallback, writeDevStackState } from '../../src/config/dev-stack.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { runNodeProcess } from '../support/node-process.ts';
import { jsonLines } from './operate-support.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
let h: WorkHarness;
let dataDir: string;

beforeAll(async () => {
  h = await workHarness();
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-dev-stack-'));
});
afterAll(async () => {
  await h?.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/** `svc <args>` with the harness's database and Redis, no SVC_SQS_* at all, and SVC_DATA_DIR = dataDir. */
async function svcWithoutSqsVariables(args: string[]) {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: h.db.url, REDIS_URL: h.redisUrl ?? 'redis://127.0.0.1:1', SVC_DATA_DIR: dataDir };
  for (const k of Object.keys(env)) if (k.startsWith('SVC_SQS_')) delete env[k];
  return runNodeProcess([path.join(ROOT, 'src/main/cli.ts'), ...args], { env, timeoutMs: 60_000 });
}

describe('svc dlq under npm start', () => {
  it('with no SVC_SQS_* set, `svc dlq list` uses the running stack\'s queues from its state file', async () => {
    await h.startWorkers({ queues: ['default'] });
    const failed = await h.dispatch('fixture.effect', { key: 'dev-stack-dlq', fail: 'permanent' });
    await h.relay();
    await h.waitForEvent(failed.runId, 'dead_lettered');
    const remove = writeDevStackState(dataDir, { SVC_SQS_REGION: 'us-east-1', SVC_SQS_ENDPOINT: h.endpoint, SVC_SQS_QUEUE_URL_PREFIX: h.queueUrlPrefix, SVC_SQS_LOCAL_CREDENTIALS: 'true' });
    try {
      const listed = await svcWithoutSqsVariables(['dlq', 'list', '--queue', 'default', '--json']);
      expect(listed.stderr).toContain('using the queues of the npm start stack');
      expect(listed.code).toBe(0);
      expect(jsonLines(listed.stdout).map((l) => l.runId)).toContain(failed.runId);
    } finally {
      remove();
    }
    expect(fs.existsSync(path.join(dataDir, DEV_STACK_FILE))).toBe(false);
  });

  it('a state file whose launcher is gone is ignored: the command names the missing variable', async () => {
    fs.writeFileSync(
      path.join(dataDir, DEV_STACK_FILE),
      JSON.stringify({ pid: 2 ** 22 + 17, start: '1', env: { SVC_SQS_ENDPOINT: h.endpoint, SVC_SQS_QUEUE_URL_PREFIX: h.queueUrlPrefix, SVC_SQS_LOCAL_CREDENTIALS: 'true' } }),
    );
    const listed = await svcWithoutSqsVariables(['dlq', 'list', '--queue', 'default']);
    expect(listed.code).not.toBe(0);
    expect(listed.stderr).toMatch(/CONFIG_INVALID[\s\S]*SVC_SQS_QUEUE_URL_PREFIX/);
    fs.rmSync(path.join(dataDir, DEV_STACK_FILE));
  });

  it('variables the environment sets win over the file; a REDIS_URL with a password is never written', () => {
    const remove = writeDevStackState(dataDir, { SVC_SQS_ENDPOINT: 'http://127.0.0.1:1', SVC_SQS_QUEUE_URL_PREFIX: 'http://127.0.0.1:1/000000000000/', REDIS_URL: 'redis://:secret@127.0.0.1:6379' });
    try {
      expect(fs.readFileSync(path.join(dataDir, DEV_STACK_FILE), 'utf8')).not.toContain('secret');
      expect(withDevStackFallback({ SVC_DATA_DIR: dataDir }).SVC_SQS_ENDPOINT).toBe('http://127.0.0.1:1');
      const explicit = withDevStackFallback({ SVC_DATA_DIR: dataDir, SVC_SQS_ENDPOINT: 'http://127.0.0.1:2' });
      expect(explicit.SVC_SQS_ENDPOINT).toBe('http://127.0.0.1:2');
      expect(explicit.SVC_SQS_QUEUE_URL_PREFIX).toBeUndefined();
    } finally {
      remove();
    }
  });
});
