// The console's access rules and bad input over real HTTP: the token is presented once and kept in
// an HttpOnly cookie; writes need that cookie AND an exact Origin; another Host is refused; a read-only
// console (no token) refuses writes; unknown routes, bad filters, bad run ids and bad tokens get a
// page with a stable code, never a 500 or a stack; the token never reaches the log.
import { spawn } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkConsoleAccess, consoleGate, isLoopbackHost, sameSecret } from '../../src/console/console-access.ts';
import { freePort, waitForPort } from '../../src/kv/redis-server.ts';
import { CONSOLE_TEST_TOKEN, startTestConsole, type TestConsole } from '../fixtures/console-server.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';

let h: WorkHarness;
let c: TestConsole;
let readOnly: TestConsole;
let failed: string;

beforeAll(async () => {
  h = await workHarness();
  c = await startTestConsole(h);
  readOnly = await startTestConsole(h, { token: null });
  await h.startWorkers({ queues: ['default'] });
  failed = (await h.dispatch('fixture.effect', { key: 'access-failed', fail: 'permanent' })).runId;
  await h.relay();
  await h.waitForStatus(failed, ['failed']);
});
afterAll(async () => {
  await c?.close();
  await readOnly?.close();
  await h?.close();
});

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();

async function login(console: TestConsole): Promise<string> {
  const response = await fetch(`${console.url}/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: console.url },
    body: form({ token: CONSOLE_TEST_TOKEN }),
  });
  expect(response.status).toBe(303);
  const cookie = response.headers.get('set-cookie') ?? '';
  expect(cookie).toMatch(/^svc_console=[0-9a-f]{64}; Path=\/; HttpOnly; SameSite=Strict$/);
  return cookie.split(';')[0]!;
}

async function expectRefusal(response: Response, status: number, code: string): Promise<void> {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toContain('text/html');
  const body = await response.text();
  expect(body).toContain(code);
  expect(body).not.toMatch(/\n\s+at /);
}

describe('console access', () => {
  it('without the cookie, pages redirect to the login form and writes are refused', async () => {
    const page = await fetch(`${c.url}/`, { redirect: 'manual' });
    expect(page.status).toBe(303);
    expect(page.headers.get('location')).toBe('/login');
    await expectRefusal(await fetch(`${c.url}/runs/${failed}/redrive`, { method: 'POST', headers: { origin: c.url } }), 401, 'CONSOLE_LOGIN_REQUIRED');
  });

  it('a wrong token is refused with a clear page; the right one earns an HttpOnly cookie that is not the token', async () => {
    const wrong = await fetch(`${c.url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: c.url },
      body: form({ token: CONSOLE_TEST_TOKEN.slice(0, -1) + '!' }),
    });
    await expectRefusal(wrong, 401, 'CONSOLE_TOKEN_INVALID');
    const cookie = await login(c);
    expect(cookie).not.toContain(CONSOLE_TEST_TOKEN);
    const list = await fetch(`${c.url}/`, { headers: { cookie } });
    expect(list.status).toBe(200);
    expect(await list.text()).toContain(failed);
    // A forged cookie value is not a session.
    expect((await fetch(`${c.url}/`, { redirect: 'manual', headers: { cookie: 'svc_console=' + '0'.repeat(64) } })).status).toBe(303);
  });

  it('every write needs an exact Origin; another Host is refused before anything is read', async () => {
    const cookie = await login(c);
    for (const origin of [undefined, 'http://evil.example', `${c.url}.evil.example`, `https://127.0.0.1:${c.port}`]) {
      const headers: Record<string, string> = { cookie };
      if (origin) headers.origin = origin;
      await expectRefusal(await fetch(`${c.url}/runs/${failed}/redrive`, { method: 'POST', headers }), 403, 'CONSOLE_ORIGIN_REFUSED');
    }
    const [row] = await h.sql`SELECT count(*)::int AS n FROM platform_task_runs WHERE causation_id = ${failed} AND trigger = 'redrive'`;
    expect(row!.n).toBe(0);
    // fetch cannot set Host: a plain request names another host, as a DNS-rebound page would.
    const rebound = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port: c.port, path: '/', headers: { cookie, host: `rebound.example:${c.port}` } }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
    });
    expect(rebound.status).toBe(421);
    expect(rebound.body).toContain('CONSOLE_HOST_REFUSED');
    expect((await fetch(`http://localhost:${c.port}/`, { headers: { cookie } })).status).toBe(200);
  });

  it('unknown routes, bad filters and bad run ids get their own codes, never a 500', async () => {
    const cookie = await login(c);
    await expectRefusal(await fetch(`${c.url}/no/such/page`, { headers: { cookie } }), 404, 'NOT_FOUND');
    await expectRefusal(await fetch(`${c.url}/?status=exploded`, { headers: { cookie } }), 400, 'RUN_FILTER_INVALID');
    await expectRefusal(await fetch(`${c.url}/?queue=nope`, { headers: { cookie } }), 400, 'RUN_FILTER_INVALID');
    await expectRefusal(await fetch(`${c.url}/?since=yesterday`, { headers: { cookie } }), 400, 'RUN_FILTER_INVALID');
    await expectRefusal(await fetch(`${c.url}/?tenant=a&tenant=b`, { headers: { cookie } }), 400, 'RUN_FILTER_INVALID');
    await expectRefusal(await fetch(`${c.url}/runs/not-a-uuid`, { headers: { cookie } }), 400, 'RUN_ID_INVALID');
    await expectRefusal(await fetch(`${c.url}/runs/00000000-0000-4000-8000-000000000009`, { headers: { cookie } }), 404, 'RUN_NOT_FOUND');
    await expectRefusal(
      await fetch(`${c.url}/runs/00000000-0000-4000-8000-000000000009/cancel`, { method: 'POST', headers: { cookie, origin: c.url } }),
      404,
      'RUN_NOT_FOUND',
    );
    await expectRefusal(
      await fetch(`${c.url}/login`, { method: 'POST', headers: { origin: c.url, 'content-type': 'application/xml' }, body: '<token/>' }),
      415,
      'FST_ERR_CTP_INVALID_MEDIA_TYPE',
    );
  });

  it('a console without a token is read-only: it lists runs but refuses writes', async () => {
    const list = await fetch(`${readOnly.url}/`);
    expect(list.status).toBe(200);
    expect(await list.text()).toContain('Read-only');
    const detail = await (await fetch(`${readOnly.url}/runs/${failed}`)).text();
    expect(detail).not.toContain('id="redrive"');
    await expectRefusal(await fetch(`${readOnly.url}/runs/${failed}/redrive`, { method: 'POST', headers: { origin: readOnly.url } }), 403, 'CONSOLE_READ_ONLY');
  });

  it('the token never appears in the log', async () => {
    await login(c);
    await fetch(`${c.url}/login`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: c.url }, body: form({ token: 'x'.repeat(40) }) });
    expect(c.logs().length).toBeGreaterThan(0);
    expect(c.logs()).not.toContain(CONSOLE_TEST_TOKEN);
  });
});

describe('console access rules', () => {
  it('loopback hosts; a non-loopback host needs a token of at least 32 characters', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]']) expect(isLoopbackHost(host)).toBe(true);
    for (const host of ['0.0.0.0', '10.0.0.1', '::', 'example.com']) expect(isLoopbackHost(host)).toBe(false);
    expect(() => checkConsoleAccess('0.0.0.0', undefined)).toThrow(expect.objectContaining({ code: 'CONSOLE_TOKEN_REQUIRED' }));
    expect(() => checkConsoleAccess('127.0.0.1', 'short')).toThrow(expect.objectContaining({ code: 'CONSOLE_TOKEN_TOO_SHORT' }));
    expect(() => checkConsoleAccess('0.0.0.0', 'a'.repeat(32))).not.toThrow();
    expect(() => checkConsoleAccess('127.0.0.1', undefined)).not.toThrow();
  });

  it('secrets compare by digest: any lengths, no throw', () => {
    expect(sameSecret('a'.repeat(32), 'a'.repeat(32))).toBe(true);
    expect(sameSecret('a'.repeat(32), 'a')).toBe(false);
    expect(sameSecret('', 'a'.repeat(100))).toBe(false);
    const gate = consoleGate({ token: 'b'.repeat(32), host: '127.0.0.1', port: 3001 });
    expect(gate.originAllowed('http://localhost:3001')).toBe(true);
    expect(gate.originAllowed('http://localhost:3002')).toBe(false);
    expect(gate.sessionMatches(gate.sessionValue())).toBe(true);
    expect(gate.sessionMatches('b'.repeat(32))).toBe(false);
  });

  it('svc console serves the runs as a process and stops on SIGTERM', async () => {
    const root = path.resolve(import.meta.dirname, '..', '..');
    const port = await freePort();
    const child = spawn(process.execPath, ['src/main/cli.ts', 'console'], {
      cwd: root,
      env: { PATH: process.env.PATH, SVC_CONSOLE_PORT: String(port), DATABASE_URL: h.db.url, REDIS_URL: h.redisUrl ?? '', SVC_CONSOLE_TOKEN: CONSOLE_TEST_TOKEN },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exit = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      await waitForPort(port, '127.0.0.1', 30_000);
      const url = `http://127.0.0.1:${port}`;
      const login = await fetch(`${url}/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: url },
        body: form({ token: CONSOLE_TEST_TOKEN }),
      });
      const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0]!;
      const list = await fetch(`${url}/?status=failed`, { headers: { cookie } });
      expect(list.status).toBe(200);
      expect(await list.text()).toContain(failed);
      child.kill('SIGTERM');
      expect(await exit).toBe(0);
      expect(output).toContain('console listening');
      expect(output).not.toContain(CONSOLE_TEST_TOKEN);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('svc console refuses a non-loopback host without a token: exit 1, one line, no stack', async () => {
    const root = path.resolve(import.meta.dirname, '..', '..');
    const child = spawn(process.execPath, ['src/main/cli.ts', 'console'], {
      cwd: root,
      env: { PATH: process.env.PATH, SVC_CONSOLE_HOST: '0.0.0.0', DATABASE_URL: h.db.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(1);
    expect(stderr).toMatch(/^svc: CONSOLE_TOKEN_REQUIRED: /);
    expect(stderr).not.toMatch(/\n\s+at /);
  });
});
