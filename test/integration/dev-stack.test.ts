// `npm start` (svc dev): the whole service on embedded defaults, as a new user runs it. Started,
// stopped with Ctrl-C (SIGINT), started again on the same data: the second run changes nothing and
// nothing is left running. A port already in use gives one clear line.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/kv/redis-server.ts';
import { z } from 'zod';
import { createSql, type Sql } from '../../src/db/client.ts';
import { inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
import { createDispatcher } from '../../src/work/runtime/produce/dispatch.ts';
import { freshRedisUrl, services } from '../support/services.ts';
import { waitFor } from '../support/wait-for.ts';
import { pidsWhere } from '../support/process-list.ts';
import { runNodeProcess } from '../support/node-process.ts';
import { processStartTime } from '../../src/db/cluster-lease.ts';

const root = path.resolve(import.meta.dirname, '..', '..');

interface Dev {
  child: ChildProcess;
  output: string[];
  exit: Promise<number | null>;
}

function startDev(env: NodeJS.ProcessEnv): Dev {
  // A process group of its own, like a terminal's foreground job, so the test can Ctrl-C the whole group.
  const child = spawn(process.execPath, ['src/main/cli.ts', 'dev'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const output: string[] = [];
  child.stdout.on('data', (d) => output.push(String(d)));
  child.stderr.on('data', (d) => output.push(String(d)));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output, exit };
}

async function waitReady(url: string, dev: Dev, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (dev.child.exitCode !== null) throw new Error(`svc dev exited early:\n${dev.output.join('')}`);
    const ok = await fetch(url).then((r) => r.ok, () => false);
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`not ready after ${timeoutMs} ms:\n${dev.output.join('')}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function waitOutput(dev: Dev, pattern: RegExp, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pattern.test(dev.output.join(''))) {
    if (dev.child.exitCode !== null) throw new Error(`svc dev exited early:\n${dev.output.join('')}`);
    if (Date.now() > deadline) throw new Error(`no ${pattern} after ${timeoutMs} ms:\n${dev.output.join('')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** What a terminal does on Ctrl-C: SIGINT to every process of the foreground group. */
function ctrlC(dev: Dev): void {
  process.kill(-dev.child.pid!, 'SIGINT');
}

/** The pid a data directory's postmaster.pid names, if the file is there. */
function postmasterPid(dataDir: string): number | undefined {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return undefined;
  return Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
}

function postgresRunningOn(dataDir: string): boolean {
  const pid = postmasterPid(dataDir);
  return pid !== undefined && alive(pid);
}

/** A PATH with everything of this one except `command` (a machine without that package, simulated). */
function pathWithout(command: string): string {
  const dir = fs.mkdtempSync(path.join(services().baseDir, `path-without-${command}-`));
  for (const entry of (process.env.PATH ?? '').split(':')) {
    let names: string[] = [];
    try {
      names = fs.readdirSync(entry);
    } catch {}
    for (const name of names) {
      if (name.startsWith(command) || fs.existsSync(path.join(dir, name))) continue;
      fs.symlinkSync(path.join(entry, name), path.join(dir, name));
    }
  }
  return dir;
}

/** True while a `pg_ctl ... stop` of `dataDir` runs (any user's: as root, pg_ctl runs as postgres). */
function pgCtlStopRunning(dataDir: string): boolean {
  return pidsWhere((argv) => (argv[0]?.endsWith('pg_ctl') ?? false) && argv.includes('stop') && argv.includes(dataDir)).length > 0;
}

/** Local addresses a TCP port listens on (from /proc/net/tcp and tcp6), e.g. ['127.0.0.1'] or ['0.0.0.0']. */
function listeningAddresses(port: number): string[] {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const found: string[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const lines = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').slice(1) : [];
    for (const line of lines) {
      const [, local, , st] = line.trim().split(/\s+/);
      if (!local || st !== '0A' || !local.endsWith(`:${hexPort}`)) continue;
      const hex = local.slice(0, local.indexOf(':'));
      if (hex.length === 8) found.push(hex.match(/../g)!.reverse().map((b) => parseInt(b, 16)).join('.'));
      else found.push(hex === '0'.repeat(32) ? '::' : hex === '00000000000000000000000001000000' ? '::1' : hex);
    }
  }
  return found;
}

async function portOpen(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

/** Whether `pid` still runs: a zombie has ended (an orphan's is reaped whenever init gets to it), as the launcher reads it. */
function alive(pid: number): boolean {
  return processStartTime(pid) !== undefined;
}

describe('npm start (svc dev)', () => {
  const dataDir = path.join(services().baseDir, `dev-${process.pid}`);
  const started: Dev[] = [];
  afterAll(async () => {
    // A failed test may leave a launcher running: stop it the way a user would (it stops its services).
    for (const d of started) if (d.child.exitCode === null && d.child.signalCode === null) ctrlC(d);
    for (const d of started) if (d.child.exitCode === null && d.child.signalCode === null) ctrlC(d);
    await Promise.race([Promise.all(started.map((d) => d.exit)), new Promise((r) => setTimeout(r, 30_000))]);
    for (const d of started) if (d.child.exitCode === null && d.child.signalCode === null) d.child.kill('SIGKILL');
  });

  const baseEnv = async (pgPort: number) => ({
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    SVC_DATA_DIR: dataDir,
    SVC_EMBEDDED_PG_PORT: String(pgPort),
    SVC_API_PORT: String(await freePort()),
    SVC_HEALTH_PORT: String(await freePort()),
    SVC_API_METRICS_PORT: '0',
    SVC_SQS_WAIT_SECONDS: '1',
    SVC_STOP_TIMEOUT_MS: '8000',
    LOG_LEVEL: 'warn',
  });
  const pgData = path.join(dataDir, 'pg');

  it('R-EXE-01 R-MIG-17 uses the Redis at REDIS_URL on a non-default port (no redis-server installed), binds loopback, stops on Ctrl-C; a second start changes nothing and a double Ctrl-C still stops everything', async () => {
    const pgPort = await freePort();
    // First run: a Redis on a non-default port at REDIS_URL, on a machine without redis-server.
    const env1 = { ...(await baseEnv(pgPort)), REDIS_URL: await freshRedisUrl(), PATH: pathWithout('redis-server') };
    const first = startDev(env1);
    started.push(first);
    await waitReady(`http://127.0.0.1:${env1.SVC_API_PORT}/ready`, first);
    await waitReady(`http://127.0.0.1:${env1.SVC_HEALTH_PORT}/readyz`, first);
    expect(first.output.join('')).toMatch(/using the Redis at REDIS_URL/);
    expect(first.output.join('')).not.toMatch(/private redis-server/);
    expect(postgresRunningOn(pgData)).toBe(true);
    // The workers' health port, like the API, listens on loopback only.
    expect(listeningAddresses(Number(env1.SVC_HEALTH_PORT))).toEqual(['127.0.0.1']);
    expect(listeningAddresses(Number(env1.SVC_API_PORT))).toEqual(['127.0.0.1']);

    const url = `postgres://postgres@127.0.0.1:${pgPort}/svc`;
    const sql = createSql(url, { max: 1 });
    const snapshot = async (q: Sql) => {
      const [r] = await q`SELECT
        (SELECT count(*)::int FROM mikro_orm_migrations) AS migrations,
        (SELECT count(*)::int FROM permissions) AS permissions,
        (SELECT count(*)::int FROM financial_institutions) AS institutions,
        (SELECT count(*)::int FROM platform_grants) AS grants,
        (SELECT count(*)::int FROM tenants WHERE uid = 'dev-tenant') AS dev_tenants,
        (SELECT count(*)::int FROM memberships) AS memberships,
        (SELECT max(updated_at)::text FROM financial_institutions) AS catalog_updated`;
      return r!;
    };
    const before = await snapshot(sql);
    await sql.end();
    // Every migration of the build: the 17 of the baseline and the corrections after them.
    const journal = JSON.parse(fs.readFileSync(path.join(root, 'drizzle/meta/_journal.json'), 'utf8')) as { entries: unknown[] };
    expect(before.migrations).toBe(journal.entries.length);
    expect(before.grants).toBe(1);
    // A development tenant to dispatch for (DevSeeder), named on start with its id.
    expect(before.dev_tenants).toBe(1);
    expect(first.output.join('')).toMatch(/development tenant: uid dev-tenant \(id \d+\)/);

    // The operator commands find this stack's queues by themselves (its random SQS port is in
    // <SVC_DATA_DIR>/dev-stack.json): no SVC_SQS_* variable is set here.
    const dlq = await runNodeProcess([path.join(root, 'src/main/cli.ts'), 'dlq', 'list', '--queue', 'critical'], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, SVC_DATA_DIR: dataDir, SVC_EMBEDDED_PG_PORT: String(pgPort), REDIS_URL: env1.REDIS_URL },
      timeoutMs: 60_000,
    });
    expect(dlq.stderr).toContain('using the queues of the npm start stack');
    expect(dlq.code, dlq.stderr).toBe(0);

    ctrlC(first);
    expect(await first.exit, first.output.join('')).toBe(0);
    expect(postgresRunningOn(pgData), first.output.join('')).toBe(false);
    expect(fs.existsSync(path.join(dataDir, 'dev-stack.json'))).toBe(false);

    // Second run on the same data with a private redis-server, stopped by a double Ctrl-C.
    const env2 = { ...(await baseEnv(pgPort)), SVC_DEV_PRIVATE_REDIS: 'true' };
    const second = startDev(env2);
    started.push(second);
    await waitReady(`http://127.0.0.1:${env2.SVC_API_PORT}/ready`, second);
    await waitReady(`http://127.0.0.1:${env2.SVC_HEALTH_PORT}/readyz`, second);
    expect(second.output.join('')).toMatch(/started a private redis-server/);
    expect(second.output.join('')).toMatch(/development tenant: uid dev-tenant \(id \d+\)/);
    const sql2 = createSql(url, { max: 1 });
    const after = await snapshot(sql2);
    await sql2.end();
    expect(after).toEqual(before);

    const privateRedis = /started a private redis-server on redis:\/\/127\.0\.0\.1:(\d+)/.exec(second.output.join(''));
    ctrlC(second);
    await new Promise((r) => setTimeout(r, 100));
    ctrlC(second);
    expect(await second.exit, second.output.join('')).toBe(0);
    // Nothing left behind: PostgreSQL, the private redis-server, the API and the workers are gone.
    expect(postgresRunningOn(pgData), second.output.join('')).toBe(false);
    expect(await portOpen(Number(privateRedis![1]))).toBe(false);
    expect(await portOpen(Number(env2.SVC_API_PORT))).toBe(false);
    expect(await portOpen(Number(env2.SVC_HEALTH_PORT))).toBe(false);
  }, 300_000);

  it('R-EXE-01 a start after a crashed launcher (SIGKILL) reclaims what it left and stops it on Ctrl-C', async () => {
    const pgPort = await freePort();
    const env = { ...(await baseEnv(pgPort)), SVC_DEV_PRIVATE_REDIS: 'true' };
    const crashed = startDev(env);
    started.push(crashed);
    await waitReady(`http://127.0.0.1:${env.SVC_API_PORT}/ready`, crashed);
    const oldRedisPort = Number(/started a private redis-server on redis:\/\/127\.0\.0\.1:(\d+)/.exec(crashed.output.join(''))![1]);
    const state = JSON.parse(fs.readFileSync(path.join(dataDir, 'dev-launcher.json'), 'utf8')) as { processes: Array<{ name: string; pid: number }> };
    // The workers run with the flags their image and `npm run workers` pass (src/main/workers-node-flags.ts).
    const workers = state.processes.find((p) => p.name === 'workers');
    expect(fs.readFileSync(`/proc/${workers!.pid}/cmdline`, 'utf8').split('\0')).toContain('--max-semi-space-size=16');
    // Only the launcher dies: its API, workers, private Redis and PostgreSQL stay up as orphans.
    crashed.child.kill('SIGKILL');
    await crashed.exit;
    expect(postgresRunningOn(pgData)).toBe(true);
    expect(await portOpen(oldRedisPort)).toBe(true);

    const next = startDev(env);
    started.push(next);
    // The orphaned API still answers /ready: wait for the new launcher's own API first.
    await waitOutput(next, /API on http/);
    await waitReady(`http://127.0.0.1:${env.SVC_API_PORT}/ready`, next);
    const text = next.output.join('');
    expect(text).toMatch(/a crashed run left running/);
    expect(text).toMatch(/reclaiming the PostgreSQL server/);
    expect(await portOpen(oldRedisPort)).toBe(false);
    for (const p of state.processes) expect(alive(p.pid)).toBe(false);

    ctrlC(next);
    expect(await next.exit, next.output.join('')).toBe(0);
    expect(postgresRunningOn(pgData)).toBe(false);
    expect(await portOpen(Number(env.SVC_API_PORT))).toBe(false);
  }, 300_000);

  it('R-EXE-01 a second Ctrl-C while PostgreSQL is slow to stop does not cut its stop short: pg_ctl sees it through and nothing is left running', async () => {
    const env = { ...(await baseEnv(await freePort())), SVC_DEV_PRIVATE_REDIS: 'true' };
    const dev = startDev(env);
    started.push(dev);
    await waitReady(`http://127.0.0.1:${env.SVC_API_PORT}/ready`, dev);
    await waitReady(`http://127.0.0.1:${env.SVC_HEALTH_PORT}/readyz`, dev);
    const postmaster = postmasterPid(pgData)!;
    // The fault: a postmaster that does not answer its stop yet (frozen), so the launcher's pg_ctl stop
    // is still waiting when the operator presses Ctrl-C again.
    process.kill(postmaster, 'SIGSTOP');
    try {
      ctrlC(dev);
      await waitFor(() => pgCtlStopRunning(pgData), 60_000, { stepMs: 20, what: 'the launcher’s pg_ctl stop under way' });
      ctrlC(dev);
    } finally {
      process.kill(postmaster, 'SIGCONT');
    }
    const output = () => dev.output.join('');
    expect(await dev.exit, output()).toBe(0);
    // The second Ctrl-C reached the launcher, not its pg_ctl: the stop was confirmed, never escalated.
    expect(output()).toMatch(/SIGINT again/);
    expect(output()).not.toMatch(/did not confirm the stop|immediate shutdown/);
    expect(postgresRunningOn(pgData), output()).toBe(false);
    expect(alive(postmaster)).toBe(false);
  }, 300_000);

  it('R-EXE-01 a REDIS_URL nothing answers at is refused in one line, never replaced by a private Redis, and nothing is left running', async () => {
    const env = { ...(await baseEnv(await freePort())), REDIS_URL: `redis://127.0.0.1:${await freePort()}` };
    const dev = startDev(env);
    started.push(dev);
    expect(await dev.exit, dev.output.join('')).toBe(1);
    const text = dev.output.join('');
    expect(text).toMatch(/REDIS_UNREACHABLE: nothing answers at REDIS_URL \(127\.0\.0\.1:\d+\)/);
    expect(text).not.toMatch(/private redis-server on/);
    expect(text).not.toMatch(/\n\s+at /);
    expect(postgresRunningOn(pgData)).toBe(false);
  }, 120_000);

  it('R-EXE-01 without redis-server installed, asking for a private Redis says to install it or set REDIS_URL', async () => {
    const env = { ...(await baseEnv(await freePort())), SVC_DEV_PRIVATE_REDIS: 'true', PATH: pathWithout('redis-server') };
    const dev = startDev(env);
    started.push(dev);
    expect(await dev.exit).toBe(1);
    expect(dev.output.join('')).toMatch(/REDIS_SERVER_MISSING: SVC_DEV_PRIVATE_REDIS=true needs redis-server, which is not installed/);
    expect(postgresRunningOn(pgData)).toBe(false);
  }, 120_000);

  it('says in one line what to do when the API port is already in use', async () => {
    const blocker = net.createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => blocker.listen(port, '127.0.0.1', () => resolve()));
    try {
      const dev = startDev({
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        SVC_DATA_DIR: dataDir,
        SVC_API_PORT: String(port),
        SVC_HEALTH_PORT: String(await freePort()),
      });
      started.push(dev);
      expect(await dev.exit).toBe(1);
      const text = dev.output.join('');
      expect(text).toMatch(new RegExp(`PORT_IN_USE: port ${port} is already in use; stop what holds it or set SVC_API_PORT`));
      expect(text).not.toMatch(/\n\s+at /); // no stack trace
    } finally {
      blocker.close();
    }
  }, 60_000);

  it('reloads the units when a unit file changes: a new unit runs without a restart; a broken one is refused and the last good units keep running', async () => {
    const pgPort = await freePort();
    // Units of the test's own, importing the authoring API by absolute path (the project's units/ stays as it is).
    const unitsRoot = fs.mkdtempSync(path.join(services().baseDir, 'dev-units-'));
    const api = path.join(root, 'src', 'work', 'index.ts');
    const unitFile = (name: string) => `import { z } from 'zod';
import { defineTask } from '${api}';
export const unit = defineTask({ name: 'demo.${name}', queue: 'default', context: 'system', payload: z.object({}), async handler() { return { unit: '${name}' }; } });
`;
    fs.symlinkSync(path.join(root, 'node_modules'), path.join(unitsRoot, 'node_modules'));
    fs.mkdirSync(path.join(unitsRoot, 'units', 'demo'), { recursive: true });
    fs.writeFileSync(path.join(unitsRoot, 'units', 'demo', 'first.task.ts'), unitFile('first'));
    const env = { ...(await baseEnv(pgPort)), REDIS_URL: await freshRedisUrl(), SVC_UNITS_ROOT: unitsRoot, SVC_DATA_DIR: `${dataDir}-reload`, LOG_LEVEL: 'info' };
    const dev = startDev(env);
    started.push(dev);
    await waitReady(`http://127.0.0.1:${env.SVC_HEALTH_PORT}/readyz`, dev);
    expect(dev.output.join('')).toMatch(/watching .*units: a changed unit reloads the workers and the API/);

    const sql = createSql(`postgres://postgres@127.0.0.1:${pgPort}/svc`, { max: 2 });
    try {
      const system: Actor = { kind: 'system', label: 'dev-reload-test' };
      const dispatcher = createDispatcher({
        resolve: (name) => (name.startsWith('demo.') ? { name, queue: 'default', context: 'system', payload: z.object({}) } : undefined),
        instance: 'dev-reload-test',
      });
      const runOf = async (name: string) => (await inUnitOfWork(sql, system, (tx) => dispatcher.dispatchTask(tx, name, {}, { actor: system }))).runId;
      const statusOf = async (runId: string) => (await sql<{ status: string }[]>`SELECT status FROM platform_task_runs WHERE run_id = ${runId}`)[0]?.status;

      // A new unit file: the units are checked, the workers and the API restart, and its runs succeed.
      fs.writeFileSync(path.join(unitsRoot, 'units', 'demo', 'second.task.ts'), unitFile('second'));
      await waitOutput(dev, /units reloaded: the workers and the API restarted with them/, 120_000);
      const second = await runOf('demo.second');
      await waitFor(async () => (await statusOf(second)) === 'succeeded', 60_000, { stepMs: 200, what: 'the new unit run by the reloaded workers' });

      // A broken unit file: refused, said so, and the workers keep the last good units.
      const mark = dev.output.length;
      fs.writeFileSync(path.join(unitsRoot, 'units', 'demo', 'third.task.ts'), `import { nothing } from './missing.ts';\nexport const unit = nothing;\n`);
      await waitOutput(dev, /the units do not pass \(see above\): the workers and the API keep the last good units/, 120_000);
      expect(dev.output.slice(mark).join('')).not.toMatch(/units reloaded/);
      const first = await runOf('demo.first');
      await waitFor(async () => (await statusOf(first)) === 'succeeded', 60_000, { stepMs: 200, what: 'a run of the last good units' });
      expect(await fetch(`http://127.0.0.1:${env.SVC_HEALTH_PORT}/readyz`).then((r) => r.status)).toBe(200);
    } finally {
      await sql.end({ timeout: 5 });
    }
    ctrlC(dev);
    expect(await dev.exit, dev.output.join('')).toBe(0);
  }, 300_000);
});
