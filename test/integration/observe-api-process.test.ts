// The `svc api` executable's metrics port as a real process: GET /metrics answers on
// SVC_API_METRICS_PORT with the request it just served, the public port has no /metrics, and a taken
// metrics port stops the boot with one line and exit 1.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, waitForPort } from '../../src/kv/redis-server.ts';
import { freshDatabase, freshRedisUrl, type TestDatabase } from '../support/services.ts';
import { sampleValue, scrape } from '../support/prometheus-text.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const CLI = path.join(ROOT, 'src', 'main', 'cli.ts');

let db: TestDatabase;
let dir: string;
let env: Record<string, string>;

beforeAll(async () => {
  db = await freshDatabase({ max: 2 });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-api-metrics-'));
  fs.writeFileSync(path.join(dir, 'tasks.json'), JSON.stringify({ version: 1, tasks: [], subscriptions: [] }));
  fs.writeFileSync(path.join(dir, 'schema-version.json'), JSON.stringify({ latestMigration: 'api_metrics_latest' }));
  env = {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: db.url,
    REDIS_URL: await freshRedisUrl(),
    SVC_API_HOST: '127.0.0.1',
    SVC_TASKS_CATALOG: path.join(dir, 'tasks.json'),
    SVC_SCHEMA_VERSION: path.join(dir, 'schema-version.json'),
    LOG_LEVEL: 'info',
  };
});
afterAll(async () => {
  await db?.drop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

function start(extra: Record<string, string>): { child: ChildProcess; exit: Promise<number | null>; stderr: () => string } {
  const child = spawn(process.execPath, [CLI, 'api'], { env: { ...env, ...extra }, cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d) => (err += String(d)));
  return { child, exit: new Promise((resolve) => child.once('exit', resolve)), stderr: () => err };
}

describe('svc api metrics port', () => {
  it('serves GET /metrics on SVC_API_METRICS_PORT, never on the public port', async () => {
    const [port, metricsPort] = [await freePort(), await freePort()];
    const run = start({ SVC_API_PORT: String(port), SVC_API_METRICS_PORT: String(metricsPort) });
    try {
      await waitForPort(port, '127.0.0.1', 30_000);
      expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
      expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(404);
      const text = await scrape(`http://127.0.0.1:${metricsPort}/metrics`);
      expect(sampleValue(text, 'svc_http_requests_total', { route: '/health', method: 'GET', status: '200' })).toBe(1);
      expect(sampleValue(text, 'svc_http_requests_total', { route: 'unmatched', status: '404' })).toBe(1);
      run.child.kill('SIGTERM');
      expect(await run.exit).toBe(0);
    } finally {
      run.child.kill('SIGKILL');
    }
  });

  it('a taken metrics port stops the boot: exit 1, one line, no stack', async () => {
    const blocker = net.createServer();
    const metricsPort = await freePort();
    await new Promise<void>((resolve) => blocker.listen(metricsPort, '127.0.0.1', () => resolve()));
    try {
      const run = start({ SVC_API_PORT: String(await freePort()), SVC_API_METRICS_PORT: String(metricsPort) });
      const timer = setTimeout(() => run.child.kill('SIGKILL'), 30_000);
      expect(await run.exit).toBe(1);
      clearTimeout(timer);
      expect(run.stderr()).toMatch(/EADDRINUSE/);
      expect(run.stderr()).not.toMatch(/\n\s+at /);
    } finally {
      blocker.close();
    }
  });
});
