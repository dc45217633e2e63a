// `svc workers` as a real process: the pool-size boot refusal, and a boot that waits for the schema,
// serves /healthz and /readyz, and stops cleanly on SIGTERM, even one that arrives while it loads.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/kv/redis-server.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { runNodeProcess } from '../support/node-process.ts';
import { stallingProxy, type StallingProxy } from '../support/stalling-proxy.ts';
import { waitFor } from '../support/wait-for.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const CLI = path.join(ROOT, 'src/main/cli.ts');
const HOLD_IMPORT = path.join(ROOT, 'test/fixtures/hold-import.mjs');
let h: WorkHarness;
let dir: string;

beforeAll(async () => {
  h = await workHarness();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'workers-boot-'));
});
afterAll(async () => {
  fs.rmSync(dir, { recursive: true, force: true });
  await h?.close();
});

async function baseEnv(extra: Record<string, string>): Promise<NodeJS.ProcessEnv> {
  const [latest] = await h.sql`SELECT name FROM mikro_orm_migrations ORDER BY id DESC LIMIT 1`;
  const schemaFile = path.join(dir, 'schema-version.json');
  fs.writeFileSync(schemaFile, JSON.stringify({ latestMigration: latest?.name ?? 'none' }));
  return {
    ...process.env,
    DATABASE_URL: h.db.url,
    REDIS_URL: h.redisUrl!,
    SVC_SQS_ENDPOINT: h.endpoint,
    SVC_SQS_QUEUE_URL_PREFIX: h.queueUrlPrefix,
    SVC_SQS_LOCAL_CREDENTIALS: 'true',
    SVC_SQS_WAIT_SECONDS: '1',
    SVC_STOP_TIMEOUT_MS: '7000',
    SVC_SCHEMA_VERSION: schemaFile,
    LOG_LEVEL: 'warn',
    NODE_ENV: 'test',
    ...extra,
  };
}

describe('svc workers', () => {
  it('R-WRK-11 refuses to boot with DATABASE_POOL_SIZE below 2 x slots + 2, naming the variable', async () => {
    // The shipped units: maintenance.purge (1) on maintenance + login notification (4) on critical = 5 slots.
    const result = await runNodeProcess([CLI, 'workers'], {
      env: await baseEnv({ QUEUES: 'critical,maintenance', DATABASE_POOL_SIZE: '11' }),
      timeoutMs: 120_000,
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('DATABASE_POOL_SIZE');
    expect(result.stderr).toContain('at least 12');
  }, 150_000);

  it('R-EXE-03 R-CFG-07 a taken SVC_HEALTH_PORT exits 1 with one error line instead of hanging on its connections', async () => {
    const port = await freePort();
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(port, '0.0.0.0', resolve));
    try {
      // Bounded far above a boot (seconds, minutes on a busy machine): a process that hangs never ends.
      const result = await runNodeProcess([CLI, 'workers'], {
        env: await baseEnv({ QUEUES: 'maintenance', SVC_HEALTH_PORT: String(port) }),
        timeoutMs: 120_000,
      });
      expect(result.timedOut).toBe(false); // not killed by the bound: the process ended by itself
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/^svc: EADDRINUSE: /m);
      expect(result.stderr).not.toMatch(/\n\s+at /);
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  }, 150_000);

  it('R-WRK-12 R-CFG-07 boots, reports ready on SVC_HEALTH_PORT, and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    // Started without the workers' node flags (src/main/workers-node-flags.ts): they boot, and say so.
    const child = spawn(process.execPath, [CLI, 'workers'], {
      env: await baseEnv({ QUEUES: 'critical,maintenance', DATABASE_POOL_SIZE: '12', SVC_HEALTH_PORT: String(port), SVC_RELAY: 'true' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    let stdout = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      const deadline = Date.now() + 30_000;
      let ready: Response | undefined;
      while (Date.now() < deadline) {
        ready = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
        if (ready?.status === 200) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(ready?.status, stderr).toBe(200);
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(await health.json()).toMatchObject({ ready: true, draining: false });
      const flagsLine = stdout.split('\n').find((l) => l.includes('without their node flags'));
      expect(flagsLine, stdout).toBeDefined();
      expect(JSON.parse(flagsLine!)).toMatchObject({ level: 40, missing: ['--max-semi-space-size=16'] });
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('R-WRK-12 a SIGTERM that arrives while the workers still load their modules stops them cleanly once up (exit 0), instead of killing them mid-boot', async () => {
    // Found under load: `npm start` stopped right after the API was ready met workers still importing,
    // and Node's default action for the signal killed them (the launcher saw code 128).
    const marker = path.join(dir, 'loading');
    const release = path.join(dir, 'release');
    const child = spawn(process.execPath, ['--import', HOLD_IMPORT, CLI, 'workers'], {
      env: await baseEnv({
        QUEUES: 'critical',
        DATABASE_POOL_SIZE: '12',
        SVC_HEALTH_PORT: String(await freePort()),
        HOLD_IMPORT_MATCH: '/src/main/workers.ts',
        HOLD_IMPORT_MARKER: marker,
        HOLD_IMPORT_RELEASE: release,
      }),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    try {
      // The workers module is being loaded, and held there: the signal arrives mid-boot.
      await waitFor(() => fs.existsSync(marker), 30_000);
      child.kill('SIGTERM');
      fs.writeFileSync(release, '');
      expect(await exited, stderr).toEqual({ code: 0, signal: null });
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
  /** `svc workers` with its database behind `proxy`; `stop` sends SIGTERM and says how it ended (or `still running` 20 s past the budget) and when. */
  async function workersBehind(proxy: StallingProxy, extra: Record<string, string>) {
    const child = spawn(process.execPath, [CLI, 'workers'], {
      env: await baseEnv({ DATABASE_URL: proxy.url, QUEUES: 'critical,maintenance', DATABASE_POOL_SIZE: '12', SVC_RELAY: 'true', ...extra }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    return {
      output: () => output,
      async stop(budgetMs: number) {
        const stopAt = Date.now();
        child.kill('SIGTERM');
        const result = await Promise.race([exited, new Promise<'still running'>((r) => setTimeout(() => r('still running'), budgetMs + 20_000))]);
        return { result, tookMs: Date.now() - stopAt };
      },
      /** Whatever happened: the process killed if still there, the proxy resumed and closed. */
      async close() {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        proxy.resume();
        await proxy.close();
      },
    };
  }

  /** SIGTERM: the workers exit 0 by themselves within the budget, and say which part they left behind. */
  async function expectStoppedWithin(workers: Awaited<ReturnType<typeof workersBehind>>, budgetMs: number, leftBehind: RegExp) {
    const { result, tookMs } = await workers.stop(budgetMs);
    expect(result, workers.output()).toEqual({ code: 0, signal: null });
    expect(tookMs, `stopped in ${tookMs} ms\n${workers.output()}`).toBeLessThanOrEqual(budgetMs);
    expect(workers.output()).toMatch(leftBehind);
  }

  it('R-WRK-09 R-CFG-06 a SIGTERM while the database stops answering still ends the workers within SVC_STOP_TIMEOUT_MS (exit 0): a relay or rescue pass waiting on it is abandoned, not awaited', async () => {
    // Found under load: a stop that met a relay pass waiting on a frozen postmaster waited for the pass's
    // own deadline (a minute), past the launcher's budget, and the workers were killed (code 128).
    const proxy = await stallingProxy(h.db.url);
    const stopBudgetMs = 7_000;
    const port = await freePort();
    const workers = await workersBehind(proxy, {
      SVC_HEALTH_PORT: String(port),
      SVC_RELAY_SWEEP_INTERVAL_MS: '100',
      SVC_RESCUE_INTERVAL_MS: '100',
      SVC_STOP_TIMEOUT_MS: String(stopBudgetMs),
    });
    try {
      await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, 60_000, { what: 'the workers ready' });
      // The database stops answering: what the relay and the rescuer send from now on gets no answer.
      proxy.stall();
      // A pass is waiting on it once the sweep came round (a pass a sweep interval, and none answered).
      await new Promise((r) => setTimeout(r, 500));
      // What made the stop wait before: a pass that was waiting on the database when it came.
      await expectStoppedWithin(workers, stopBudgetMs, /"part":"(relay|rescuer)".*did not stop within the stop budget/);
    } finally {
      await workers.close();
    }
  }, 120_000);

  it('R-WRK-09 a SIGTERM while the boot waits on a database that stopped answering (the clock read of a queue that started empty) ends the workers within SVC_STOP_TIMEOUT_MS: nothing the boot starts afterwards outlives the stop', async () => {
    // The database stops answering just as the boot reads its clock, before the relay and the rescuer start.
    const proxy = await stallingProxy(h.db.url, { stallOn: 'clock_timestamp()::text AS at' });
    const stopBudgetMs = 7_000;
    const workers = await workersBehind(proxy, {
      SVC_HEALTH_PORT: String(await freePort()),
      SVC_RESCUE_QUEUE_STARTED_EMPTY: 'true',
      SVC_STOP_TIMEOUT_MS: String(stopBudgetMs),
    });
    try {
      await waitFor(() => proxy.stalled, 60_000, { what: 'the boot reading the database clock' });
      await expectStoppedWithin(workers, stopBudgetMs, /"part":"boot".*did not stop within the stop budget/);
    } finally {
      await workers.close();
    }
  }, 120_000);
});
