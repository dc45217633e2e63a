// A new user's run, end to end, with the real executables as separate processes: `svc migrator deploy`
// on an empty PostgreSQL 18 database, then the API (the real serveApi code, wired to the test session
// resolver) and one workers process with the relay, against Redis and the SQS-protocol server. A tenant
// task is dispatched the way a use case does (one transaction, then the wake signal); the test polls
// GET /task-runs/{runId} until it succeeded, checks the trail, then stops every process with SIGTERM.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectedRedis, emptyDatabase, freshQueuePrefix, freshRedisUrl, type TestDatabase } from '../support/services.ts';
import { freePort } from '../../src/kv/redis-server.ts';
import { signalOutbox } from '../../src/kv/wake.ts';
import { createSqsClient } from '../../src/queue/client.ts';
import { provisionQueues } from '../../src/queue/provision.ts';
import { createDispatcher } from '../../src/work/runtime/produce/dispatch.ts';
import { loadUnits, emitCatalog, writeCatalog } from '../../src/work/catalog.ts';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import { emitSchemaVersion } from '../../src/main/emit.ts';
import { createTenantMember } from './work-tables-support.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const unitsRoot = path.join(root, 'test', 'fixtures', 'units', 'e2e');
const STOP_TIMEOUT_MS = 8_000;

interface Proc {
  name: string;
  child: ChildProcess;
  output: string[];
}

function start(name: string, args: string[], env: NodeJS.ProcessEnv): Proc {
  const child = spawn(process.execPath, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  child.stdout.on('data', (d) => output.push(String(d)));
  child.stderr.on('data', (d) => output.push(String(d)));
  return { name, child, output };
}

function exited(p: Proc): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) {
    return Promise.resolve({ code: p.child.exitCode, signal: p.child.signalCode });
  }
  return new Promise((resolve) => p.child.once('exit', (code, signal) => resolve({ code, signal })));
}

async function waitFor<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('a new user runs the service end to end', () => {
  let db: TestDatabase;
  let dist: string;
  const procs: Proc[] = [];
  let env: NodeJS.ProcessEnv;
  let apiPort: number;
  let healthPort: number;
  let queueUrlPrefix: string;
  let sqsEndpoint: string;
  let redisUrl: string;

  beforeAll(async () => {
    db = await emptyDatabase();
    dist = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-e2e-'));
    emitSchemaVersion(root, dist);
    writeCatalog(path.join(dist, 'tasks.json'), await emitCatalog(unitsRoot));
    redisUrl = await freshRedisUrl();
    ({ endpoint: sqsEndpoint, queueUrlPrefix } = freshQueuePrefix());
    const sqs = createSqsClient({ region: 'us-east-1', endpoint: sqsEndpoint, localCredentials: true });
    await provisionQueues(sqs, queueUrlPrefix);
    sqs.destroy();
    apiPort = await freePort();
    healthPort = await freePort();
    env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
      DATABASE_URL: db.url,
      REDIS_URL: redisUrl,
      SVC_SCHEMA_VERSION: path.join(dist, 'schema-version.json'),
      SVC_TASKS_CATALOG: path.join(dist, 'tasks.json'),
      SVC_UNITS_ROOT: unitsRoot,
      SVC_API_PORT: String(apiPort),
      SVC_API_HOST: '127.0.0.1',
      SVC_API_METRICS_PORT: '0',
      SVC_HEALTH_PORT: String(healthPort),
      SVC_SQS_REGION: 'us-east-1',
      SVC_SQS_ENDPOINT: sqsEndpoint,
      SVC_SQS_QUEUE_URL_PREFIX: queueUrlPrefix,
      SVC_SQS_LOCAL_CREDENTIALS: 'true',
      SVC_SQS_WAIT_SECONDS: '1',
      SVC_STOP_TIMEOUT_MS: String(STOP_TIMEOUT_MS),
      PLATFORM_BOOTSTRAP_USERNAME: 'e2e.admin',
      PLATFORM_BOOTSTRAP_PASSWORD: 'e2e-password-not-secret',
      PLATFORM_BOOTSTRAP_EMAIL: 'e2e@example.test',
    };
  }, 120_000);

  afterAll(async () => {
    for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await Promise.all(procs.map(exited));
    await db?.drop();
    if (dist) fs.rmSync(dist, { recursive: true, force: true });
  });

  it('R-EXE-04 R-MIG-17 R-EXE-02 R-EXE-03 R-OBX-06 R-OBX-10 R-TRL-08 deploys, serves, runs a tenant task to succeeded with its full trail, and stops cleanly on SIGTERM', async () => {
    // 1. The migrator applies the build's migrations (the 17 of the baseline and the corrections after
    // them) and seeds, then exits 0 (it listens on no port).
    const migrator = start('migrator', ['src/main/cli.ts', 'migrator', 'deploy'], env);
    procs.push(migrator);
    const deployed = await exited(migrator);
    expect(deployed.code, migrator.output.join('')).toBe(0);
    const [applied] = await db.sql`SELECT count(*)::int AS n FROM mikro_orm_migrations`;
    const journal = JSON.parse(fs.readFileSync(path.join(root, 'drizzle/meta/_journal.json'), 'utf8')) as { entries: unknown[] };
    expect(journal.entries.length).toBeGreaterThanOrEqual(17);
    expect(applied!.n).toBe(journal.entries.length);

    // 2. A tenant with a member, and a session the API's test resolver accepts.
    const member = await createTenantMember(db.sql);
    const token = 'e2e-session-token-0123456789';
    const api = start('api', ['test/fixtures/api-with-test-sessions.ts'], {
      ...env,
      SVC_TEST_SESSIONS: JSON.stringify({ [token]: { tenantId: member.tenantId, userId: member.userId, membershipId: member.membershipId } }),
    });
    const workers = start('workers', ['src/main/cli.ts', 'workers'], {
      ...env,
      QUEUES: 'critical,default,bulk,maintenance',
      SVC_RELAY: 'true',
    });
    procs.push(api, workers);
    const base = `http://127.0.0.1:${apiPort}`;
    await waitFor('API ready', async () => ((await fetch(`${base}/ready`)).status === 200 ? true : undefined));
    await waitFor('workers ready', async () => {
      const r = await fetch(`http://127.0.0.1:${healthPort}/healthz`);
      const body = (await r.json()) as { ready: boolean };
      return body.ready ? true : undefined;
    });

    // 3. Dispatch the way a use case does: in its own unit of work, then the wake signal after commit.
    const units = await loadUnits(unitsRoot);
    const dispatcher = createDispatcher({
      resolve: (name) => {
        const u = units.get(name);
        return u ? { name: u.name, queue: u.queue, context: u.context, payload: u.payload } : undefined;
      },
    });
    const actor = { kind: 'user' as const, tenantId: member.tenantId, userId: member.userId, membershipId: member.membershipId, label: 'e2e user' };
    const dispatched = await inUnitOfWork(db.sql, actor, (tx) => dispatcher.dispatchTask(tx, 'demo.greet', { who: 'world' }, { actor }));
    const redis = await connectedRedis(redisUrl, { name: 'e2e-signal' });
    await signalOutbox(redis);
    redis.disconnect();

    // 4. Poll the status route through the test session resolver until the run succeeded.
    const data = await waitFor('run succeeded', async () => {
      const r = await fetch(`${base}/task-runs/${dispatched.runId}`, { headers: { authorization: `Bearer ${token}` } });
      if (r.status !== 200) return undefined;
      const body = (await r.json()) as { success: boolean; data: { status: string; outcome: unknown; finishedAt: string } };
      return body.data.status === 'succeeded' ? body.data : undefined;
    });
    expect(data.outcome).toEqual({ greeted: 'world' });
    expect(data.finishedAt).toMatch(/Z$/);

    // 5. The trail holds every step, in order.
    const trail = await db.sql`SELECT event FROM task_run_events WHERE run_id = ${dispatched.runId} ORDER BY id`;
    expect(trail.map((r) => r.event)).toEqual(['queued', 'sent', 'received', 'started', 'succeeded']);

    // 6. SIGTERM: every process exits 0 within the stop budget.
    const t0 = Date.now();
    api.child.kill('SIGTERM');
    workers.child.kill('SIGTERM');
    const [a, w] = await Promise.all([exited(api), exited(workers)]);
    expect(Date.now() - t0).toBeLessThan(STOP_TIMEOUT_MS);
    expect(a.code, api.output.join('')).toBe(0);
    expect(w.code, workers.output.join('')).toBe(0);
  }, 120_000);
});
