// The embedded PostgreSQL 18 launcher: lifecycle, stale lock files, reuse of a running cluster, and
// running as root from a directory the postgres user cannot enter.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded-postgres.ts';
import { createSql } from '../../src/db/client.ts';
import { freePort } from '../../src/kv/redis-server.ts';
import { services } from '../support/services.ts';
import { copyFixture, runSvc } from '../fixtures/migrations/fixture-root.ts';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A scratch directory the postgres user can enter (mkdtemp makes mode 700). */
function scratch(mode = 0o755): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-embedded-test-'));
  fs.chmodSync(dir, mode);
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function start(dataDir: string, lines: string[] = []): Promise<EmbeddedPostgres> {
  const pg = await startEmbeddedPostgres({ dataDir, port: await freePort(), fast: true, log: (l) => lines.push(l) });
  cleanups.push(() => pg.stop());
  return pg;
}

async function serverVersion(url: string): Promise<number> {
  const sql = createSql(url, { max: 1 });
  try {
    return (await sql`SELECT current_setting('server_version_num')::int AS v`)[0]!.v as number;
  } finally {
    await sql.end();
  }
}

function postmasterRunning(dataDir: string): boolean {
  return spawnSync('pgrep', ['-f', '--', `-D ${dataDir} `]).status === 0;
}

describe('embedded PostgreSQL', () => {
  it('R-EXE-05 starts a PostgreSQL 18 cluster in a fresh directory and stops it', async () => {
    const dataDir = path.join(scratch(), 'pg');
    const pg = await start(dataDir);
    expect(pg.reused).toBe(false);
    expect(pg.dataDir).toBe(dataDir);
    expect(Math.floor((await serverVersion(pg.url)) / 10000)).toBe(18);
    await pg.stop();
    expect(fs.existsSync(path.join(dataDir, 'postmaster.pid'))).toBe(false);
    expect(postmasterRunning(dataDir)).toBe(false);
  });

  it('removes a stale postmaster.pid left by a dead process and starts', async () => {
    const dataDir = path.join(scratch(), 'pg');
    await (await start(dataDir)).stop();
    const dead = spawnSync('true');
    expect(dead.status).toBe(0);
    fs.writeFileSync(path.join(dataDir, 'postmaster.pid'), `${dead.pid}\n${dataDir}\n1700000000\n5999\n\n`);
    const lines: string[] = [];
    const pg = await start(dataDir, lines);
    expect(pg.reused).toBe(false);
    expect(lines.some((l) => l.startsWith('removing stale') && l.includes(`pid ${dead.pid}`))).toBe(true);
    expect(Math.floor((await serverVersion(pg.url)) / 10000)).toBe(18);
  });

  it('treats a pid now held by another cluster\'s server as stale, never reusing that server', async () => {
    const dataDir = path.join(scratch(), 'pg');
    await (await start(dataDir)).stop();
    // The test run's shared cluster is a live postgres on another data directory.
    const other = fs.readFileSync(path.join(services().baseDir, 'pg', 'postmaster.pid'), 'utf8').split('\n');
    fs.writeFileSync(path.join(dataDir, 'postmaster.pid'), `${other[0]}\n${dataDir}\n1700000000\n${other[3]}\n\n`);
    const pg = await start(dataDir);
    expect(pg.reused).toBe(false);
    expect(pg.port).not.toBe(Number(other[3]));
    expect(Math.floor((await serverVersion(pg.url)) / 10000)).toBe(18);
  });

  it('reuses a server already running on the same data directory', async () => {
    const dataDir = path.join(scratch(), 'pg');
    const first = await start(dataDir);
    const second = await start(dataDir);
    expect(second.reused).toBe(true);
    expect(second.port).toBe(first.port);
    expect(Math.floor((await serverVersion(second.url)) / 10000)).toBe(18);
    // The reuser does not own the server: its stop leaves it running for the owner.
    await second.stop();
    expect(Math.floor((await serverVersion(first.url)) / 10000)).toBe(18);
    await first.stop();
    expect(postmasterRunning(dataDir)).toBe(false);
  });

  it.runIf(process.getuid?.() === 0)('as root, a data directory under a mode-700 directory falls back to a reachable one', async () => {
    const locked = scratch(0o700);
    const requested = path.join(locked, 'pg');
    const lines: string[] = [];
    const pg = await start(requested, lines);
    cleanups.push(() => fs.rmSync(pg.dataDir, { recursive: true, force: true }));
    expect(pg.dataDir).not.toBe(requested);
    expect(pg.dataDir.startsWith(os.tmpdir())).toBe(true);
    expect(fs.readFileSync(path.join(requested, 'LOCATION.txt'), 'utf8').trim()).toBe(pg.dataDir);
    expect(lines.some((l) => l.includes('not reachable by the postgres user'))).toBe(true);
    expect(Math.floor((await serverVersion(pg.url)) / 10000)).toBe(18);
    await pg.stop();
    // The next start on the same requested path finds the same data.
    const again = await start(requested);
    expect(again.dataDir).toBe(pg.dataDir);
  });

  it('R-EXE-05 the first user stopping leaves the server running for another; the last user stops it', async () => {
    const dataDir = path.join(scratch(), 'pg');
    const first = await start(dataDir);
    const second = await start(dataDir);
    expect(second.reused).toBe(true);
    await first.stop();
    expect(Math.floor((await serverVersion(second.url)) / 10000)).toBe(18);
    await second.stop();
    expect(postmasterRunning(dataDir)).toBe(false);
  });

  it('R-EXE-05 a server a killed process left running is reclaimed by the next start and stopped with it', async () => {
    const dataDir = path.join(scratch(), 'pg');
    const port = await freePort();
    // A real process starts the cluster and dies without stopping it (SIGKILL: no handler runs).
    const script = `import { startEmbeddedPostgres } from ${JSON.stringify(path.resolve('src/db/embedded-postgres.ts'))};
      await startEmbeddedPostgres({ dataDir: ${JSON.stringify(dataDir)}, port: ${port}, fast: true });
      console.log('started'); setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => child.stdout.on('data', (d: Buffer) => String(d).includes('started') && resolve()));
    const gone = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await gone;
    expect(postmasterRunning(dataDir)).toBe(true);
    const lines: string[] = [];
    const pg = await start(dataDir, lines);
    expect(lines.join('\n')).toMatch(/reclaiming the PostgreSQL server/);
    await pg.stop();
    expect(postmasterRunning(dataDir)).toBe(false);
  }, 60_000);

  it('R-EXE-05 five concurrent `migrator deploy` without DATABASE_URL on a fresh data directory all succeed', async () => {
    const dataDir = scratch();
    const r = copyFixture('migrated');
    cleanups.push(() => r.remove());
    const env = { SVC_MIGRATIONS_ROOT: r.root, SVC_DATA_DIR: dataDir, SVC_EMBEDDED_PG_PORT: String(await freePort()) };
    const results = await Promise.all(Array.from({ length: 5 }, () => runSvc(['migrator', 'deploy'], env, 180_000)));
    for (const res of results) expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    // Exactly one initialised the cluster; none stopped it under another (that would fail a deploy).
    expect(results.filter((res) => res.stdout.includes('initialising PostgreSQL cluster')).length).toBe(1);
    expect(postmasterRunning(path.join(dataDir, 'pg'))).toBe(false);
  }, 240_000);
});
