// The console's access rules and bad input over real HTTP: the token is presented once and kept in
// an HttpOnly cookie; writes need that cookie AND an exact Origin; another Host is refused; a read-only
// console (no token) refuses writes; unknown routes, bad filters, bad run ids and bad tokens get a
// page with a stable code, never a 500 or a stack; the token never reaches the log. Failed logins are
// throttled per client address; a session expires and logout revokes it server-side; every action
// names the operator who logged in and needs a confirmation; every response says nosniff.
import { spawn } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkConsoleAccess, checkOperatorName, consoleGate, isLoopbackHost, sameSecret } from '../../src/console/console-access.ts';
import { loginThrottle } from '../../src/console/console-login-throttle.ts';
import { sessionStore } from '../../src/console/console-sessions.ts';
import { freePort, waitForPort } from '../../src/kv/redis-server.ts';
import { CONSOLE_TEST_TOKEN, startTestConsole, type TestConsole } from '../fixtures/console-server.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { waitFor } from '../support/wait-for.ts';

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

async function login(console: TestConsole, name = 'alice', maxAge = 28800): Promise<string> {
  const response = await fetch(`${console.url}/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: console.url },
    body: form({ token: CONSOLE_TEST_TOKEN, name }),
  });
  expect(response.status).toBe(303);
  const cookie = response.headers.get('set-cookie') ?? '';
  expect(cookie).toMatch(new RegExp(`^svc_console=[0-9a-f]{64}; Path=/; Max-Age=${maxAge}; HttpOnly; SameSite=Strict$`));
  return cookie.split(';')[0]!;
}

/** A request from another loopback address (the whole 127/8 is local on Linux): another client. */
function fromAddress(localAddress: string, url: string, init: { method: string; headers: Record<string, string>; body?: string }): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: init.method, headers: { ...init.headers, host: u.host }, localAddress }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(init.body);
  });
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
      body: form({ token: CONSOLE_TEST_TOKEN.slice(0, -1) + '!', name: 'alice' }),
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
      await fetch(`${c.url}/runs/00000000-0000-4000-8000-000000000009/cancel`, {
        method: 'POST',
        headers: { cookie, origin: c.url, 'content-type': 'application/x-www-form-urlencoded' },
        body: form({ confirm: 'yes' }),
      }),
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
    await fetch(`${c.url}/login`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: c.url }, body: form({ token: 'x'.repeat(40), name: 'alice' }) });
    expect(c.logs().length).toBeGreaterThan(0);
    expect(c.logs()).not.toContain(CONSOLE_TEST_TOKEN);
  });
});

describe('console login throttling, sessions and actions', () => {
  const loginForm = (token: string, name = 'alice') => ({ method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: '' }, body: form({ token, name }) });

  it('after 5 failed logins in the window an address gets 429 with Retry-After (en and pt), even with the right token; other addresses are not affected; failures are logged without the token', async () => {
    const t = await startTestConsole(h, { loginWindowSeconds: 3 });
    try {
      const post = (token: string, lang = 'en') =>
        fetch(`${t.url}/login`, { ...loginForm(token), headers: { 'content-type': 'application/x-www-form-urlencoded', origin: t.url, 'accept-language': lang } });
      const wrong = 'wrong-token-but-long-enough-0123456789-SECRETISH';
      for (let i = 0; i < 5; i++) expect((await post(wrong)).status).toBe(401);
      const throttled = await post(wrong);
      expect(throttled.status).toBe(429);
      expect(Number(throttled.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(throttled.headers.get('retry-after'))).toBeLessThanOrEqual(3);
      expect(await throttled.text()).toMatch(/CONSOLE_LOGIN_THROTTLED.*Too many failed logins/s);
      const pt = await post(wrong, 'pt-BR');
      expect(pt.status).toBe(429);
      expect(await pt.text()).toContain('Muitas tentativas de login');
      // The right token does not get through while throttled: guessing stays blocked, whatever the guess.
      expect((await post(CONSOLE_TEST_TOKEN)).status).toBe(429);
      // Another client address logs in at once.
      const other = await fromAddress('127.0.0.2', `${t.url}/login`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: t.url }, body: form({ token: CONSOLE_TEST_TOKEN, name: 'bob' }) });
      expect(other.status).toBe(303);
      // The window passes: the right token works again.
      await waitFor(async () => (await fetch(`${t.url}/login`, { ...loginForm(CONSOLE_TEST_TOKEN), redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: t.url } })).status === 303, 10_000, { stepMs: 250, what: 'throttle window over' });
      const logs = t.logs();
      expect(logs).toMatch(/"client":"127\.0\.0\.1".*"failures":5.*console login failed/);
      expect(logs).toContain('console login throttled');
      expect(logs).not.toContain(wrong);
      expect(logs).not.toContain(CONSOLE_TEST_TOKEN);
    } finally {
      await t.close();
    }
  });

  it('logout revokes the session server-side: the old cookie is refused afterwards', async () => {
    const cookie = await login(c);
    expect((await fetch(`${c.url}/`, { headers: { cookie } })).status).toBe(200);
    const out = await fetch(`${c.url}/logout`, { method: 'POST', redirect: 'manual', headers: { cookie, origin: c.url } });
    expect(out.status).toBe(303);
    const replay = await fetch(`${c.url}/`, { redirect: 'manual', headers: { cookie } });
    expect(replay.status).toBe(303);
    expect(replay.headers.get('location')).toBe('/login');
    await expectRefusal(await fetch(`${c.url}/runs/${failed}/redrive`, { method: 'POST', headers: { cookie, origin: c.url, 'content-type': 'application/x-www-form-urlencoded' }, body: form({ confirm: 'yes' }) }), 401, 'CONSOLE_LOGIN_REQUIRED');
  });

  it('a session expires after its lifetime (Max-Age on the cookie, and refused server-side)', async () => {
    const t = await startTestConsole(h, { sessionTtlSeconds: 1 });
    try {
      const cookie = await login(t, 'alice', 1);
      expect((await fetch(`${t.url}/`, { headers: { cookie } })).status).toBe(200);
      await waitFor(async () => (await fetch(`${t.url}/`, { redirect: 'manual', headers: { cookie } })).status === 303, 10_000, { stepMs: 200, what: 'session expired' });
      await expectRefusal(await fetch(`${t.url}/runs/${failed}/cancel`, { method: 'POST', headers: { cookie, origin: t.url, 'content-type': 'application/x-www-form-urlencoded' }, body: form({ confirm: 'yes' }) }), 401, 'CONSOLE_LOGIN_REQUIRED');
    } finally {
      await t.close();
    }
  });

  it('the operator name given at login is validated and recorded on cancel (with its reason) and redrive; both need a confirmation', async () => {
    for (const name of ['', '<script>', 'x'.repeat(65)]) {
      await expectRefusal(await fetch(`${c.url}/login`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: c.url }, body: form({ token: CONSOLE_TEST_TOKEN, name }) }), 400, 'CONSOLE_OPERATOR_INVALID');
    }
    const cookie = await login(c, 'Maria Silva');
    const write = (path: string, fields: Record<string, string>) =>
      fetch(`${c.url}${path}`, { method: 'POST', redirect: 'manual', headers: { cookie, origin: c.url, 'content-type': 'application/x-www-form-urlencoded' }, body: form(fields) });
    const queued = (await h.dispatch('fixture.effect', { key: 'access-cancel' })).runId;
    // One click is not enough: without the confirmation nothing is written.
    await expectRefusal(await write(`/runs/${queued}/cancel`, { reason: 'duplicate order' }), 400, 'CONSOLE_CONFIRMATION_REQUIRED');
    expect((await h.run(queued))!.status).toBe('queued');
    const confirmPage = await fetch(`${c.url}/runs/${queued}/cancel`, { headers: { cookie } });
    expect(confirmPage.status).toBe(200);
    expect(await confirmPage.text()).toMatch(/name="reason"[\s\S]*name="confirm" value="yes"/);
    expect((await write(`/runs/${queued}/cancel`, { reason: 'duplicate order', confirm: 'yes' })).status).toBe(303);
    const cancelled = (await h.trail(queued)).find((e) => e.event === 'failed')!;
    expect(cancelled.detail).toMatchObject({ cancelled_by: 'console:Maria Silva', reason: 'duplicate order' });
    await expectRefusal(await write(`/runs/${failed}/redrive`, {}), 400, 'CONSOLE_CONFIRMATION_REQUIRED');
    const redrive = await write(`/runs/${failed}/redrive`, { confirm: 'yes' });
    expect(redrive.status).toBe(303);
    const [row] = await h.sql<{ actor_label: string }[]>`SELECT actor_label FROM platform_task_runs WHERE causation_id = ${failed} AND trigger = 'redrive'`;
    expect(row!.actor_label).toBe('redrive:console:Maria Silva');
    // A reason longer than the cancel operation takes is refused with its code, nothing written.
    const another = (await h.dispatch('fixture.effect', { key: 'access-cancel-2' })).runId;
    await expectRefusal(await write(`/runs/${another}/cancel`, { reason: 'r'.repeat(501), confirm: 'yes' }), 400, 'RUN_FILTER_INVALID');
    expect((await h.run(another))!.status).toBe('queued');
  });

  it('every response says X-Content-Type-Options: nosniff (pages, redirects, refusals)', async () => {
    const cookie = await login(c);
    const responses = [
      await fetch(`${c.url}/`, { redirect: 'manual' }),
      await fetch(`${c.url}/`, { headers: { cookie } }),
      await fetch(`${c.url}/login`),
      await fetch(`${c.url}/nothing`, { headers: { cookie } }),
      await fetch(`${c.url}/runs/${failed}/redrive`, { method: 'POST', headers: { cookie } }),
      await fetch(`${c.url}/logout`, { method: 'POST', redirect: 'manual', headers: { cookie, origin: c.url } }),
      await fetch(`${readOnly.url}/`),
    ];
    expect(responses.map((r) => r.status)).toEqual([303, 200, 200, 404, 403, 303, 200]);
    for (const r of responses) expect(r.headers.get('x-content-type-options')).toBe('nosniff');
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
    expect(gate.tokenMatches('b'.repeat(32))).toBe(true);
    expect(gate.tokenMatches('b'.repeat(31))).toBe(false);
  });

  it('the throttle counts failures per address within a sliding window; sessions expire and revoke by clock', () => {
    let now = 1_000_000;
    const t = loginThrottle({ maxFailures: 3, windowSeconds: 60, now: () => now });
    for (let i = 1; i <= 3; i++) {
      expect(t.retryAfter('a')).toBe(0);
      expect(t.failed('a')).toBe(i);
      now += 10_000;
    }
    // Failures at 0, 10 and 20 s; now 30 s: the first leaves the window at 60 s.
    expect(t.retryAfter('a')).toBe(30);
    expect(t.retryAfter('b')).toBe(0);
    now += 30_000;
    expect(t.retryAfter('a')).toBe(0);
    t.failed('a');
    t.succeeded('a');
    expect(t.retryAfter('a')).toBe(0);

    const s = sessionStore({ ttlSeconds: 10, now: () => now });
    const id = s.create('alice');
    expect(id).toMatch(/^[0-9a-f]{64}$/);
    expect(s.find(id)).toMatchObject({ operator: 'alice' });
    expect(s.find(id.replace(/.$/, (ch) => (ch === '0' ? '1' : '0')))).toBeNull();
    now += 10_000;
    expect(s.find(id)).toBeNull();
    const other = s.create('bob');
    s.revoke(other);
    expect(s.find(other)).toBeNull();

    expect(checkOperatorName('  maria.silva@example.com ')).toBe('maria.silva@example.com');
    expect(checkOperatorName("João D'Ávila")).toBe("João D'Ávila");
    for (const bad of ['', ' ', '-lead', 'a\nb', 'x'.repeat(65), 42]) expect(() => checkOperatorName(bad)).toThrow(expect.objectContaining({ code: 'CONSOLE_OPERATOR_INVALID' }));
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
        body: form({ token: CONSOLE_TEST_TOKEN, name: 'ops' }),
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
