// The HTTP API against real PostgreSQL 18 and Redis: envelope and error codes, languages, public
// routes, the authentication reading rules, the origin check, CORS, tenant isolation and the run
// status cache.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import postgres from 'postgres';
import { runStatusKey } from '../../src/kv/keys.ts';
import { services } from '../support/services.ts';
import { evictRunStatus } from '../../src/kv/run-status-cache.ts';
import { bearer, cookie, fixtureApp, httpFixture, insertRun, LATEST, type HttpFixture } from './http-support.ts';

// fetch's Response.json() is typed unknown; the tests read fields freely.
const jsonOf = async (res: Response): Promise<any> => res.json();

let f: HttpFixture;
const ORIGIN = 'https://app.example.com';
const okSchema = { 200: { type: 'object', additionalProperties: true } };

beforeAll(async () => {
  f = await httpFixture({}, (app) => {
    // Extra routes only this test adds: a public JSON body route and a protected write route.
    app.post(
      '/test/echo',
      { config: { public: true }, schema: { body: { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } }, response: okSchema } },
      async (request) => ({ success: true, data: request.body, meta: {} }),
    );
    app.post('/test/write', { config: { permission: 'access.task_runs.read' }, schema: { response: okSchema } }, async (request) => ({
      success: true,
      data: { tenant: request.session!.tenantId === f.tenantA ? 'A' : 'other' },
      meta: {},
    }));
    app.get('/test/boom', { config: { public: true }, schema: { response: okSchema } }, async () => {
      throw new Error('internal detail postgres://u:pw@db/x');
    });
  });
});

afterAll(async () => {
  await f?.close();
});

const get = (url: string, headers: Record<string, string> = {}) => f.app.inject({ method: 'GET', url, headers });

describe('envelope and errors', () => {
  it('R-HTTP-01 R-HTTP-02 R-HTTP-05 GET /health is public and answers {success, data, meta} with latestMigration', async () => {
    const res = await get('/health');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.json()).toEqual({ success: true, data: { status: 'alive', latestMigration: LATEST }, meta: {} });
  });

  it('R-HTTP-03 unknown route: 404 error envelope with a stable code', async () => {
    const res = await get('/nope');
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ success: false, error: { code: 'ROUTE_NOT_FOUND', message: expect.any(String) } });
  });

  it('R-HTTP-03 wrong method on a known path: 405 with Allow', async () => {
    const res = await f.app.inject({ method: 'DELETE', url: '/health' });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toContain('GET');
    expect(res.json().error.code).toBe('METHOD_NOT_ALLOWED');
    const param = await f.app.inject({ method: 'PUT', url: '/task-runs/0b0e8a8e-0000-4000-8000-000000000000' });
    expect(param.statusCode).toBe(405);
  });

  it('R-HTTP-01 R-HTTP-03 non-JSON body: 415; malformed JSON: 400; oversized: 413; invalid body: 400', async () => {
    const text = await f.app.inject({ method: 'POST', url: '/test/echo', headers: { 'content-type': 'text/plain' }, payload: 'hi' });
    expect(text.statusCode).toBe(415);
    expect(text.json().error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    const malformed = await f.app.inject({ method: 'POST', url: '/test/echo', headers: { 'content-type': 'application/json' }, payload: '{"n":' });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().error.code).toBe('MALFORMED_JSON');
    expect(malformed.body).not.toContain('"n":');
    const empty = await f.app.inject({ method: 'POST', url: '/test/echo', headers: { 'content-type': 'application/json' }, payload: '' });
    expect(empty.json().error.code).toBe('MALFORMED_JSON');
    const big = await f.app.inject({
      method: 'POST',
      url: '/test/echo',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ n: 1, pad: 'x'.repeat(1_100_000) }),
    });
    expect(big.statusCode).toBe(413);
    expect(big.json().error.code).toBe('BODY_TOO_LARGE');
    const invalid = await f.app.inject({ method: 'POST', url: '/test/echo', payload: { n: 'seven-secret-value' } });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.json().error.code).toBe('VALIDATION_FAILED');
    expect(invalid.json().error.message).toContain('n');
    expect(invalid.body).not.toContain('seven-secret-value');
    const good = await f.app.inject({ method: 'POST', url: '/test/echo', payload: { n: 7 } });
    expect(good.json()).toEqual({ success: true, data: { n: 7 }, meta: {} });
  });

  it('R-HTTP-03 a malformed URL gets the error envelope too', async () => {
    const res = await get('/health/%zz');
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ success: false, error: { code: 'BAD_REQUEST', message: expect.any(String) } });
  });

  it('R-HTTP-03 an unexpected failure is a 500 envelope without internal text', async () => {
    const res = await get('/test/boom');
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ success: false, error: { code: 'INTERNAL_ERROR', message: expect.any(String) } });
    expect(res.body).not.toContain('postgres://');
  });

  it('R-HTTP-04 Accept-Language selects English by default and Portuguese for pt, pt-BR and by quality', async () => {
    const en = (await get('/nope')).json().error.message;
    expect((await get('/nope', { 'accept-language': 'fr' })).json().error.message).toBe(en);
    expect((await get('/nope', { 'accept-language': 'en-US,pt;q=0.5' })).json().error.message).toBe(en);
    for (const header of ['pt', 'pt-BR', 'PT-br', 'fr, pt;q=0.1', 'en;q=0.2, pt-BR;q=0.9']) {
      const res = await get('/nope', { 'accept-language': header });
      expect(res.json().error.message, header).not.toBe(en);
      expect(res.json().error.message).toMatch(/Nenhuma rota/);
      expect(res.headers['content-language']).toBe('pt');
    }
  });

  it('R-HTTP-04 every error code has a Portuguese message (401, 403, 405, 415, 400)', async () => {
    const pt = { 'accept-language': 'pt-BR' };
    const runUrl = '/task-runs/0b0e8a8e-0000-4000-8000-000000000000';
    const unauth = await get(runUrl, pt);
    expect(unauth.json().error.message).toMatch(/Autenticação necessária/);
    const forbidden = await get(runUrl, { ...pt, ...bearer('token-no-permission') });
    expect(forbidden.json().error.message).toMatch(/permissão/);
    const origin = await f.app.inject({ method: 'POST', url: '/test/write', headers: { ...pt, ...cookie('token-a') } });
    expect(origin.json().error.message).toMatch(/origem/);
    const method = await f.app.inject({ method: 'PATCH', url: '/health', headers: pt });
    expect(method.json().error.message).toMatch(/não aceita/);
    const media = await f.app.inject({ method: 'POST', url: '/test/echo', headers: { ...pt, 'content-type': 'text/plain' }, payload: 'x' });
    expect(media.json().error.message).toMatch(/não suportado/);
    const validation = await get('/task-runs/not-a-uuid', { ...pt, ...bearer('token-a') });
    expect(validation.json().error.message).toMatch(/inválido/);
    const missing = await get(runUrl, { ...pt, ...bearer('token-a') });
    expect(missing.json().error.message).toMatch(/Não existe/);
  });
});

describe('public documentation routes', () => {
  it('R-HTTP-12 R-AUTH-06 GET /docs renders the route reference without a session', async () => {
    const res = await get('/docs');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/html/);
    expect(res.body).toMatch(/swagger-ui/i);
    const init = await get('/docs/static/swagger-initializer.js');
    expect(init.statusCode).toBe(200);
  });

  it('R-HTTP-13 R-HTTP-14 R-AUTH-17 GET /openapi.json declares Bearer and SessionCookie (named from the cookie) on protected routes', async () => {
    const res = await get('/openapi.json');
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.components.securitySchemes.SessionCookie).toMatchObject({ type: 'apiKey', in: 'cookie', name: '__Host-svc_session' });
    expect(doc.components.securitySchemes.Bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    const op = doc.paths['/task-runs/{runId}'].get;
    expect(op.security).toEqual([{ Bearer: [] }, { SessionCookie: [] }]);
    expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '403', '404']));
    const data = op.responses['200'].content['application/json'].schema.properties.data;
    expect(Object.keys(data.properties)).toEqual(
      expect.arrayContaining(['runId', 'name', 'queue', 'status', 'progress', 'attempts', 'outcome', 'queuedAt', 'startedAt', 'finishedAt', 'updatedAt']),
    );
    expect(doc.paths['/health'].get.security).toBeUndefined();
    expect(doc.paths['/ready'].get.security).toBeUndefined();
  });

  it('R-AUTH-01 no route issues a session: no login, session or refresh endpoint exists', async () => {
    const doc = (await get('/openapi.json')).json();
    expect(Object.keys(doc.paths).filter((p) => /login|session|refresh|token/i.test(p))).toEqual([]);
    for (const url of ['/login', '/auth/login', '/sessions', '/auth/refresh', '/refresh']) {
      expect((await f.app.inject({ method: 'POST', url, payload: {} })).statusCode).toBe(404);
    }
  });
});

describe('authentication of GET /task-runs/{runId}', () => {
  let runA: string;
  const url = () => `/task-runs/${runA}`;
  beforeAll(async () => {
    runA = await insertRun(f.db.sql, f.tenantA);
  });

  it('R-HTTP-08 R-AUTH-05 R-AUTH-08 a valid session by Bearer or by cookie reads the run', async () => {
    expect((await get(url(), bearer('token-a'))).statusCode).toBe(200);
    expect((await get(url(), cookie('token-a'))).statusCode).toBe(200);
    expect((await get(url(), { ...bearer('token-a'), ...cookie('token-a') })).statusCode).toBe(200);
  });

  it('R-AUTH-03 R-HTTP-11 no credential or an unknown token: 401', async () => {
    for (const headers of [{}, bearer('unknown'), cookie('unknown')]) {
      const res = await get(url(), headers);
      expect(res.statusCode).toBe(401);
      expect(res.json().error.code).toBe('UNAUTHENTICATED');
    }
    // The HEAD twin of the GET route is protected too.
    expect((await f.app.inject({ method: 'HEAD', url: url() })).statusCode).toBe(401);
    expect((await f.app.inject({ method: 'HEAD', url: url(), headers: bearer('token-a') })).statusCode).toBe(200);
  });

  it('R-AUTH-09 the scheme word Bearer is case-insensitive', async () => {
    for (const scheme of ['bearer', 'BEARER', 'bEaReR']) {
      expect((await get(url(), { authorization: `${scheme} token-a` })).statusCode).toBe(200);
    }
  });

  it('R-AUTH-10 empty or multi-part Bearer: 401 before any lookup', async () => {
    for (const authorization of ['Bearer', 'Bearer ', 'Bearer token-a extra', 'Bearer token-a,token-a']) {
      const before = f.resolver.lookups;
      const res = await get(url(), { authorization, ...cookie('token-a') });
      expect(res.statusCode, authorization).toBe(401);
      expect(f.resolver.lookups).toBe(before);
    }
  });

  it('R-AUTH-11 another scheme is ignored and the cookie still authenticates', async () => {
    expect((await get(url(), { authorization: 'Basic dXNlcjpwYXNz', ...cookie('token-a') })).statusCode).toBe(200);
    expect((await get(url(), { authorization: 'Basic dXNlcjpwYXNz' })).statusCode).toBe(401);
  });

  it('R-AUTH-12 different Bearer and cookie tokens: 401', async () => {
    const before = f.resolver.lookups;
    expect((await get(url(), { ...bearer('token-a'), ...cookie('token-b') })).statusCode).toBe(401);
    expect(f.resolver.lookups).toBe(before);
  });

  it('R-AUTH-13 an oversized credential: 401', async () => {
    f.resolver.add('x'.repeat(1025), { tenantId: f.tenantA });
    expect((await get(url(), bearer('x'.repeat(1025)))).statusCode).toBe(401);
    expect((await get(url(), cookie('x'.repeat(1025)))).statusCode).toBe(401);
  });

  it('R-AUTH-14 the session cookie name twice in Cookie: 401', async () => {
    const res = await get(url(), { cookie: '__Host-svc_session=token-a; __Host-svc_session=token-a' });
    expect(res.statusCode).toBe(401);
  });

  it('R-AUTH-07 x-tenant-id, x-user-id and x-system never establish identity or authority', async () => {
    const spoof = { 'x-tenant-id': f.tenantA, 'x-user-id': '10', 'x-system': 'true' };
    expect((await get(url(), spoof)).statusCode).toBe(401);
    // A session of tenant B claiming tenant A by header still only sees tenant B.
    expect((await get(url(), { ...spoof, ...bearer('token-b') })).statusCode).toBe(404);
  });

  it('R-HTTP-08 a session without access.task_runs.read: 403', async () => {
    const res = await get(url(), bearer('token-no-permission'));
    expect(res.statusCode).toBe(403);
    expect(res.json().error.code).toBe('PERMISSION_DENIED');
  });

  it('R-HTTP-08 runId must be a uuid: 400 validation, but only after authentication', async () => {
    expect((await get('/task-runs/not-a-uuid')).statusCode).toBe(401);
    for (const bad of ['not-a-uuid', '123', 'urn:uuid:0b0e8a8e-0000-4000-8000-000000000000', `${'0'.repeat(36)}`]) {
      const res = await get(`/task-runs/${encodeURIComponent(bad)}`, bearer('token-a'));
      expect(res.statusCode, bad).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_FAILED');
    }
  });

  it('R-AUTH-15 tokens never appear in responses or logs', async () => {
    const secret = 'tok-SECRET-9f8e7d';
    const responses = await Promise.all([
      get(url(), bearer(secret)),
      get(url(), cookie(secret)),
      get(url(), { ...bearer('token-a'), ...cookie(secret) }),
      get(url(), { authorization: `Bearer ${secret} ${secret}` }),
      get(url(), { cookie: `__Host-svc_session=${secret}; __Host-svc_session=${secret}` }),
      f.app.inject({ method: 'POST', url: '/test/write', headers: { ...cookie(secret), origin: 'https://evil.example' } }),
    ]);
    for (const res of responses) {
      expect(res.statusCode).toBeGreaterThanOrEqual(400);
      expect(res.body).not.toContain(secret);
      expect(JSON.stringify(res.headers)).not.toContain(secret);
    }
    expect(f.logs.lines.length).toBeGreaterThan(0);
    expect(f.logs.text()).not.toContain(secret);
    expect(f.logs.text()).not.toContain('token-a');
  });
});

describe('origin check of cookie-authenticated writes', () => {
  const write = (headers: Record<string, string>, method: 'POST' | 'PUT' | 'PATCH' | 'DELETE' = 'POST') =>
    f.app.inject({ method, url: '/test/write', headers });

  it('R-AUTH-20 a cookie POST from the listed origin (Origin or Referer) passes', async () => {
    expect((await write({ ...cookie('token-a'), origin: ORIGIN })).json()).toEqual({ success: true, data: { tenant: 'A' }, meta: {} });
    expect((await write({ ...cookie('token-a'), referer: `${ORIGIN}/settings?tab=1` })).statusCode).toBe(200);
  });

  it('R-AUTH-20 a cookie POST with missing, unlisted or look-alike origin: 403 before the session is resolved', async () => {
    const cases: Array<Record<string, string>> = [
      {},
      { origin: 'https://evil.example' },
      { origin: 'http://app.example.com' },
      { origin: 'https://app.example.com:444' },
      { origin: 'https://app.example.com.evil.example' },
      { origin: 'null' },
      { referer: 'https://evil.example/x' },
      { origin: 'https://evil.example', referer: `${ORIGIN}/` },
    ];
    for (const extra of cases) {
      const before = f.resolver.lookups;
      const res = await write({ ...cookie('token-a'), ...extra });
      expect(res.statusCode, JSON.stringify(extra)).toBe(403);
      expect(res.json().error.code).toBe('ORIGIN_NOT_ALLOWED');
      expect(f.resolver.lookups).toBe(before);
    }
  });

  it('R-AUTH-21 Bearer writes skip the origin check; a cookie with an unknown token and a good origin is 401', async () => {
    expect((await write({ ...bearer('token-a'), origin: 'https://evil.example' })).statusCode).toBe(200);
    expect((await write({ ...bearer('token-a') })).statusCode).toBe(200);
    expect((await write({ ...cookie('unknown'), origin: ORIGIN })).statusCode).toBe(401);
  });

  it('R-AUTH-21 GET with a cookie and a foreign origin skips the check', async () => {
    const runId = await insertRun(f.db.sql, f.tenantA);
    expect((await get(`/task-runs/${runId}`, { ...cookie('token-a'), origin: 'https://evil.example' })).statusCode).toBe(200);
  });

  it('R-AUTH-22 with CORS_ORIGINS empty every cookie write is 403', async () => {
    const empty = await httpFixture({ corsOrigins: [], corsCredentials: false }, (app) => {
      app.delete('/test/write', { config: { permission: 'access.task_runs.read' }, schema: { response: okSchema } }, async () => ({
        success: true,
        data: {},
        meta: {},
      }));
    });
    try {
      for (const origin of [ORIGIN, 'http://localhost']) {
        const res = await empty.app.inject({ method: 'DELETE', url: '/test/write', headers: { ...cookie('token-a'), origin } });
        expect(res.statusCode).toBe(403);
      }
      expect((await empty.app.inject({ method: 'DELETE', url: '/test/write', headers: bearer('token-a') })).statusCode).toBe(200);
    } finally {
      await empty.close();
    }
  });
});

describe('CORS', () => {
  it('R-AUTH-23 preflight from a listed origin is allowed with credentials; an unlisted one gets no CORS headers', async () => {
    const ok = await f.app.inject({
      method: 'OPTIONS',
      url: '/task-runs/0b0e8a8e-0000-4000-8000-000000000000',
      headers: { origin: ORIGIN, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
    });
    expect(ok.statusCode).toBe(204);
    expect(ok.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(ok.headers['access-control-allow-credentials']).toBe('true');
    expect(String(ok.headers['access-control-allow-methods'])).toContain('GET');
    const bad = await f.app.inject({
      method: 'OPTIONS',
      url: '/task-runs/0b0e8a8e-0000-4000-8000-000000000000',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'GET' },
    });
    // Without Access-Control-Allow-Origin the browser refuses the response, whatever else is sent.
    expect(bad.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('R-AUTH-23 simple requests carry Access-Control-Allow-Origin only for a listed origin', async () => {
    expect((await get('/health', { origin: ORIGIN })).headers['access-control-allow-origin']).toBe(ORIGIN);
    expect((await get('/health', { origin: 'https://evil.example' })).headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('run status', () => {
  it('R-HTTP-08 returns the documented fields, instants in ISO 8601 UTC with Z, no numeric ids', async () => {
    const runId = await insertRun(f.db.sql, f.tenantA, { status: 'succeeded', progress: 100, outcome: { rows: 3 }, name: 'reports.build', queue: 'bulk' });
    const res = await get(`/task-runs/${runId}`, bearer('token-a'));
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toEqual({
      success: true,
      data: {
        runId,
        name: 'reports.build',
        queue: 'bulk',
        status: 'succeeded',
        progress: 100,
        attempts: 1,
        outcome: { rows: 3 },
        queuedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        startedAt: expect.stringMatching(/Z$/),
        finishedAt: expect.stringMatching(/Z$/),
        updatedAt: expect.stringMatching(/Z$/),
      },
      meta: {},
    });
    expect(res.body).not.toContain(`"tenant`);
    // Upper-case ids address the same run.
    expect((await get(`/task-runs/${runId.toUpperCase()}`, bearer('token-a'))).json().data.runId).toBe(runId);
  });

  it('R-HTTP-08 tenant isolation: another tenant\'s run is a 404 indistinguishable from a missing one, cached or not', async () => {
    const runA = await insertRun(f.db.sql, f.tenantA);
    const missing = await get('/task-runs/0b0e8a8e-0000-4000-8000-000000000001', bearer('token-b'));
    const uncached = await get(`/task-runs/${runA}`, bearer('token-b'));
    expect(uncached.statusCode).toBe(404);
    expect(uncached.json()).toEqual(missing.json());
    expect(await f.redis.exists(runStatusKey(runA))).toBe(0);
    expect((await get(`/task-runs/${runA}`, bearer('token-a'))).statusCode).toBe(200); // now cached for A
    expect(await f.redis.exists(runStatusKey(runA))).toBe(1);
    const cached = await get(`/task-runs/${runA}`, bearer('token-b'));
    expect(cached.statusCode).toBe(404);
    expect(cached.json()).toEqual(missing.json());
  });

  it('R-HTTP-09 a run in progress is cached 5 s, a finished run 1 day', async () => {
    const running = await insertRun(f.db.sql, f.tenantA, { status: 'running' });
    const done = await insertRun(f.db.sql, f.tenantA, { status: 'failed' });
    expect(await f.redis.exists(runStatusKey(running))).toBe(0);
    await get(`/task-runs/${running}`, bearer('token-a'));
    await get(`/task-runs/${done}`, bearer('token-a'));
    const ttlRunning = await f.redis.pttl(runStatusKey(running));
    const ttlDone = await f.redis.pttl(runStatusKey(done));
    expect(ttlRunning).toBeGreaterThan(3_000);
    expect(ttlRunning).toBeLessThanOrEqual(5_000);
    expect(ttlDone).toBeGreaterThan(86_400_000 - 10_000);
    expect(ttlDone).toBeLessThanOrEqual(86_400_000);
  });

  it('R-HTTP-09 reads Redis first (a hit hides a database change) until an eviction (the worker evictions: http-run-status-eviction-worker)', async () => {
    const runId = await insertRun(f.db.sql, f.tenantA, { status: 'running', progress: 10 });
    expect((await get(`/task-runs/${runId}`, bearer('token-a'))).json().data.progress).toBe(10); // miss → DB → cache
    await f.db.sql`UPDATE task_runs SET progress = 60, updated_at = clock_timestamp() WHERE run_id = ${runId}`;
    expect((await get(`/task-runs/${runId}`, bearer('token-a'))).json().data.progress).toBe(10); // hit
    await evictRunStatus(f.redis, runId); // what every committed transition does
    expect((await get(`/task-runs/${runId}`, bearer('token-a'))).json().data.progress).toBe(60); // miss → DB
  });

  it('R-EXE-11 the read runs in a unit of work carrying the caller\'s tenant as actor context', async () => {
    const own = await httpFixture();
    const role = `api_rls_${Math.random().toString(36).slice(2, 10)}`;
    // The API connects as a role row security applies to (superusers bypass it).
    const asRole = postgres(own.db.url, { max: 2, connection: { role }, onnotice: () => {} });
    try {
      const runId = await insertRun(own.db.sql, own.tenantA, { status: 'running' });
      // Row security that only admits rows of app.tenant_id: the API reads the run only if it applied the
      // actor context inside the same transaction as its query.
      await own.db.sql.unsafe(`
        CREATE ROLE ${role} NOLOGIN;
        GRANT SELECT ON task_runs TO ${role};
        ALTER TABLE task_runs ENABLE ROW LEVEL SECURITY;
        CREATE POLICY by_actor_tenant ON task_runs TO ${role} USING (tenant_id::text = current_setting('app.tenant_id', true));`);
      expect((await asRole`SELECT count(*)::int AS n FROM task_runs`)[0]!.n).toBe(0);
      const app = await fixtureApp(own, { sql: asRole });
      try {
        const res = await app.inject({ method: 'GET', url: `/task-runs/${runId}`, headers: bearer('token-a') });
        expect(res.statusCode).toBe(200);
        expect(res.json().data.runId).toBe(runId);
        await own.redis.flushdb();
        expect((await app.inject({ method: 'GET', url: `/task-runs/${runId}`, headers: bearer('token-b') })).statusCode).toBe(404);
      } finally {
        await app.close();
      }
    } finally {
      await asRole.end({ timeout: 2 });
      await own.close();
      const { createSql } = await import('../../src/db/client.ts');
      const admin = createSql(services().pgAdminUrl, { max: 1 });
      await admin.unsafe(`DROP ROLE IF EXISTS ${role}`).finally(() => admin.end());
    }
  });

  it('R-EXE-06 R-HTTP-09 with Redis down the database still answers', async () => {
    const { freePort } = await import('../../src/kv/redis-server.ts');
    const down = await httpFixture({}, () => {});
    const { createRedis } = await import('../../src/kv/client.ts');
    const deadRedis = createRedis(`redis://127.0.0.1:${await freePort()}`, { name: 'dead', autoPipelining: true });
    deadRedis.on('error', () => {});
    const app = await fixtureApp(down, { redis: deadRedis });
    try {
      const runId = await insertRun(down.db.sql, down.tenantA, { status: 'queued' });
      const res = await app.inject({ method: 'GET', url: `/task-runs/${runId}`, headers: bearer('token-a') });
      expect(res.statusCode).toBe(200);
      expect(res.json().data).toMatchObject({ runId, status: 'queued', startedAt: null, finishedAt: null });
    } finally {
      await app.close();
      deadRedis.disconnect();
      await down.close();
    }
  });
});

describe('through a listening socket with a real HTTP client', () => {
  it('R-HTTP-01 R-AUTH-08 R-AUTH-23 fetch against app.listen: health, a run by cookie, preflight, 401', async () => {
    const address = await f.app.listen({ port: 0, host: '127.0.0.1' });
    const runId = await insertRun(f.db.sql, f.tenantA, { status: 'queued' });
    const health = await fetch(`${address}/health`);
    expect(health.status).toBe(200);
    expect(await jsonOf(health)).toMatchObject({ success: true, data: { latestMigration: LATEST } });
    const byCookie = await fetch(`${address}/task-runs/${runId}`, { headers: { cookie: `__Host-svc_session=token-a`, 'accept-language': 'pt-BR' } });
    expect(byCookie.status).toBe(200);
    expect((await jsonOf(byCookie)).data.status).toBe('queued');
    const preflight = await fetch(`${address}/task-runs/${runId}`, {
      method: 'OPTIONS',
      headers: { origin: ORIGIN, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    const anonymous = await fetch(`${address}/task-runs/${runId}`, { headers: { 'accept-language': 'pt' } });
    expect(anonymous.status).toBe(401);
    expect((await jsonOf(anonymous)).error.message).toMatch(/Autenticação/);
    const malformed = await fetch(`${address}/test/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' });
    expect(malformed.status).toBe(400);
    expect((await jsonOf(malformed)).error.code).toBe('MALFORMED_JSON');
  });
});
