// The `svc api` executable as a real process: configuration refusals (exit 1, one message naming
// each variable, no value echoed), the catalog and schema-version requirements, listening, the
// production session resolver (every protected route 401), readiness without applying migrations,
// JSON logs off a TTY, and a graceful stop on SIGTERM.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, waitForPort } from '../../src/kv/redis-server.ts';
import { freshDatabase, freshRedisUrl, type TestDatabase } from '../support/services.ts';
import { TEST_DB_PASSWORD } from '../support/backends/types.ts';

// fetch's Response.json() is typed unknown; the tests read fields freely.
const jsonOf = async (res: Response): Promise<any> => res.json();

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const CLI = path.join(ROOT, 'src', 'main', 'cli.ts');
const LATEST = 'api_process_latest';

let db: TestDatabase;
let dir: string;
let baseEnv: Record<string, string>;

beforeAll(async () => {
  db = await freshDatabase({ max: 2 });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-api-test-'));
  fs.writeFileSync(path.join(dir, 'tasks.json'), JSON.stringify({ version: 1, tasks: [], subscriptions: [] }));
  fs.writeFileSync(path.join(dir, 'schema-version.json'), JSON.stringify({ latestMigration: LATEST }));
  baseEnv = {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: db.url,
    REDIS_URL: await freshRedisUrl(),
    SVC_API_HOST: '127.0.0.1',
    SVC_API_METRICS_PORT: '0',
    SVC_TASKS_CATALOG: path.join(dir, 'tasks.json'),
    SVC_SCHEMA_VERSION: path.join(dir, 'schema-version.json'),
    LOG_LEVEL: 'info',
  };
});

afterAll(async () => {
  await db?.drop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
}

function start(args: string[], env: Record<string, string>): Run {
  const child = spawn(process.execPath, [CLI, ...args], { env, cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += String(d)));
  child.stderr.on('data', (d) => (err += String(d)));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, stdout: () => out, stderr: () => err, exit };
}

async function refusal(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const run = start(['api'], { ...baseEnv, SVC_API_PORT: String(await freePort()), ...env });
  const timer = setTimeout(() => run.child.kill('SIGKILL'), 30_000);
  const code = await run.exit;
  clearTimeout(timer);
  return { code, stderr: run.stderr() };
}

describe('svc api refuses to start on bad configuration', () => {
  it('R-AUTH-24 CORS_CREDENTIALS=true with empty CORS_ORIGINS: exit 1 naming the variables', async () => {
    const r = await refusal({ CORS_CREDENTIALS: 'true' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('CONFIG_INVALID');
    expect(r.stderr).toContain('CORS_CREDENTIALS');
    expect(r.stderr).toContain('CORS_ORIGINS');
  });

  it('R-AUTH-19 R-AUTH-25 a public-suffix cookie domain and a wildcard origin: one message naming both, no value echoed', async () => {
    const r = await refusal({ SESSION_COOKIE_DOMAIN: 'github.io', CORS_ORIGINS: 'https://*.wild-card-value.example' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('SESSION_COOKIE_DOMAIN');
    expect(r.stderr).toContain('CORS_ORIGINS');
    expect(r.stderr).not.toContain('github.io');
    expect(r.stderr).not.toContain('wild-card-value');
    expect(r.stderr.trim().split('\n')[0]).toMatch(/^svc: CONFIG_INVALID: invalid configuration for api:$/);
  });

  it('R-EXE-10 R-CFG-08 the API does not start without the work-unit catalog', async () => {
    const r = await refusal({ SVC_TASKS_CATALOG: path.join(dir, 'missing-tasks.json') });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('TASKS_CATALOG_MISSING');
  });

  it('R-CFG-09 the API does not start without its build\'s schema version', async () => {
    const r = await refusal({ SVC_SCHEMA_VERSION: path.join(dir, 'missing-schema-version.json') });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('SVC_SCHEMA_VERSION');
  });
});

describe('svc api running', () => {
  it('R-EXE-02 R-EXE-08 R-EXE-09 R-AUTH-04 R-HTTP-11 listens, is not ready until the migration lands (never applying it), protected routes 401, stops on SIGTERM', async () => {
    const applied = async () => (await db.sql`SELECT name FROM mikro_orm_migrations ORDER BY id`).map((r) => r.name as string);
    const before = await applied();
    expect(before).not.toContain(LATEST);
    const port = await freePort();
    const run = start(['api'], { ...baseEnv, SVC_API_PORT: String(port) });
    try {
      await waitForPort(port, '127.0.0.1', 30_000);
      const base = `http://127.0.0.1:${port}`;
      const health = await fetch(`${base}/health`);
      expect(await jsonOf(health)).toEqual({ success: true, data: { status: 'alive', latestMigration: LATEST }, meta: {} });

      const pending = await fetch(`${base}/ready`);
      expect(pending.status).toBe(503);
      expect((await jsonOf(pending)).error.details.pendingMigration).toBe(LATEST);
      // The API applied nothing and created nothing.
      expect(await applied()).toEqual(before);

      await db.sql`INSERT INTO mikro_orm_migrations (name) VALUES (${LATEST})`;
      expect((await fetch(`${base}/ready`)).status).toBe(200);

      const runUrl = `${base}/task-runs/0b0e8a8e-0000-4000-8000-000000000000`;
      for (const headers of [{}, { authorization: 'Bearer prod-token-zz' }, { cookie: '__Host-svc_session=prod-token-zz' }]) {
        const res = await fetch(runUrl, { headers });
        expect(res.status).toBe(401);
        expect((await jsonOf(res)).error.code).toBe('UNAUTHENTICATED');
      }
      expect((await fetch(`${base}/docs`)).status).toBe(200);
      const doc = await fetch(`${base}/openapi.json`);
      expect(doc.status).toBe(200);
      // Without SESSION_COOKIE_DOMAIN: the host-only cookie.
      expect((await jsonOf(doc)).components.securitySchemes.SessionCookie.name).toBe('__Host-svc_session');

      run.child.kill('SIGTERM');
      expect(await run.exit).toBe(0);
      // Off a TTY the logs are JSON lines; the token never appears.
      const lines = run.stdout().trim().split('\n').filter(Boolean);
      expect(lines.length).toBeGreaterThan(3);
      for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
      expect(lines.some((l) => JSON.parse(l).msg === 'api stopped')).toBe(true);
      expect(run.stdout()).not.toContain('prod-token-zz');
      // The test database has a password (test/support/backends): its URL, given to the process, carries it.
      const password = new URL(db.url).password;
      expect(password).toBe(TEST_DB_PASSWORD);
      expect(run.stdout() + run.stderr()).not.toContain(password);
    } finally {
      if (run.child.exitCode === null) run.child.kill('SIGKILL');
    }
  });
});

describe('svc api with SESSION_COOKIE_DOMAIN', () => {
  it('R-AUTH-18 the running API names its session cookie __Secure-svc_session when SESSION_COOKIE_DOMAIN is set (the variable reaches the app)', async () => {
    const port = await freePort();
    const run = start(['api'], { ...baseEnv, SVC_API_PORT: String(port), SESSION_COOKIE_DOMAIN: 'app.example.com' });
    try {
      await waitForPort(port, '127.0.0.1', 30_000);
      const doc = await jsonOf(await fetch(`http://127.0.0.1:${port}/openapi.json`));
      expect(doc.components.securitySchemes.SessionCookie).toMatchObject({ type: 'apiKey', in: 'cookie', name: '__Secure-svc_session' });
      run.child.kill('SIGTERM');
      expect(await run.exit).toBe(0);
    } finally {
      if (run.child.exitCode === null) run.child.kill('SIGKILL');
    }
  });
});

describe('svc openapi emit', () => {
  it('R-EXE-12 R-EXE-13 R-HTTP-14 writes openapi.json with both schemes on the protected route', async () => {
    const out = path.join(dir, 'openapi.json');
    const run = start(['openapi', 'emit', '--out', out], { PATH: baseEnv.PATH! });
    expect(await run.exit).toBe(0);
    const doc = JSON.parse(fs.readFileSync(out, 'utf8'));
    expect(doc.paths['/task-runs/{runId}'].get.security).toEqual([{ Bearer: [] }, { SessionCookie: [] }]);
    expect(doc.components.securitySchemes.SessionCookie.name).toBe('__Host-svc_session');
  });
});
