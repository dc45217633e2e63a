// `npm start` (svc dev): the whole service on embedded defaults, as a new user runs it. Started,
// stopped with Ctrl-C (SIGINT), started again on the same data: the second run changes nothing and
// nothing is left running. A port already in use gives one clear line.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/kv/redis-server.ts';
import { createSql, type Sql } from '../../src/db/client.ts';
import { freshRedisUrl, services } from '../support/services.ts';

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
  child.stdout!.on('data', (d) => output.push(String(d)));
  child.stderr!.on('data', (d) => output.push(String(d)));
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

/** What a terminal does on Ctrl-C: SIGINT to every process of the foreground group. */
function ctrlC(dev: Dev): void {
  process.kill(-dev.child.pid!, 'SIGINT');
}

function postgresRunningOn(dataDir: string): boolean {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return false;
  const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('npm start (svc dev)', () => {
  const dataDir = path.join(services().baseDir, `dev-${process.pid}`);
  const started: Dev[] = [];
  afterAll(async () => {
    for (const d of started) if (d.child.exitCode === null) d.child.kill('SIGKILL');
    await Promise.all(started.map((d) => d.exit));
  });

  it('R-EXE-01 R-MIG-17 starts everything, stops on Ctrl-C leaving nothing behind, and a second start on the same data changes nothing', async () => {
    const pgPort = await freePort();
    const baseEnv = async () => ({
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      SVC_DATA_DIR: dataDir,
      SVC_EMBEDDED_PG_PORT: String(pgPort),
      SVC_API_PORT: String(await freePort()),
      SVC_HEALTH_PORT: String(await freePort()),
      SVC_SQS_WAIT_SECONDS: '1',
      SVC_STOP_TIMEOUT_MS: '8000',
      LOG_LEVEL: 'warn',
    });

    // First run, against the run's Redis.
    const env1 = { ...(await baseEnv()), REDIS_URL: await freshRedisUrl() };
    const first = startDev(env1);
    started.push(first);
    await waitReady(`http://127.0.0.1:${env1.SVC_API_PORT}/ready`, first);
    await waitReady(`http://127.0.0.1:${env1.SVC_HEALTH_PORT}/readyz`, first);
    const pgData = path.join(dataDir, 'pg');
    expect(postgresRunningOn(pgData)).toBe(true);

    const url = `postgres://postgres@127.0.0.1:${pgPort}/svc`;
    const sql = createSql(url, { max: 1 });
    const snapshot = async (q: Sql) => {
      const [r] = await q`SELECT
        (SELECT count(*)::int FROM mikro_orm_migrations) AS migrations,
        (SELECT count(*)::int FROM permissions) AS permissions,
        (SELECT count(*)::int FROM financial_institutions) AS institutions,
        (SELECT count(*)::int FROM platform_grants) AS grants,
        (SELECT max(updated_at)::text FROM financial_institutions) AS catalog_updated`;
      return r!;
    };
    const before = await snapshot(sql);
    await sql.end();
    // Every migration of the build: the 17 of the baseline and the corrections after them.
    const journal = JSON.parse(fs.readFileSync(path.join(root, 'drizzle/meta/_journal.json'), 'utf8')) as { entries: unknown[] };
    expect(before.migrations).toBe(journal.entries.length);
    expect(before.grants).toBe(1);

    ctrlC(first);
    expect(await first.exit, first.output.join('')).toBe(0);
    expect(postgresRunningOn(pgData)).toBe(false);

    // Second run on the same data; nothing answers at REDIS_URL, so a private redis-server is started.
    const closed = await freePort();
    const env2 = { ...(await baseEnv()), REDIS_URL: `redis://127.0.0.1:${closed}` };
    const second = startDev(env2);
    started.push(second);
    await waitReady(`http://127.0.0.1:${env2.SVC_API_PORT}/ready`, second);
    expect(second.output.join('')).toMatch(/started a private redis-server/);
    const sql2 = createSql(url, { max: 1 });
    const after = await snapshot(sql2);
    await sql2.end();
    expect(after).toEqual(before);

    const privateRedis = /started a private redis-server on redis:\/\/127\.0\.0\.1:(\d+)/.exec(second.output.join(''));
    ctrlC(second);
    expect(await second.exit, second.output.join('')).toBe(0);
    // Nothing left behind: the private redis-server is gone too.
    const redisPort = Number(privateRedis![1]);
    const stillListening = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ port: redisPort, host: '127.0.0.1' }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    expect(stillListening).toBe(false);
    expect(postgresRunningOn(pgData)).toBe(false);
  }, 240_000);

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
});
