import { describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import type { Sql } from '../../src/db/client.ts';
import { noSessionResolver } from '../../src/auth/session-resolver.ts';
import { buildApp } from '../../src/http/app.ts';
import { RouteTable, classify, HttpError } from '../../src/http/errors.ts';
import { negotiateLanguage } from '../../src/http/language.ts';
import { MESSAGES, message } from '../../src/http/messages.ts';
import { openApiProblems } from '../../src/http/openapi.ts';
import { buildOpenApiDocument } from '../../src/main/openapi.ts';

const stubDeps = (sessionCookieDomain?: string) => ({
  sql: {} as Sql,
  redis: {} as Redis,
  resolver: noSessionResolver,
  catalog: { version: 1 as const, tasks: [], subscriptions: [] },
  latestMigration: 'x',
  config: { corsOrigins: [], corsCredentials: false, sessionCookieDomain },
  logger: false as const,
});
const ok200 = { response: { 200: { type: 'object' } } };

describe('languages and messages', () => {
  it('R-HTTP-04 English by default, Portuguese for pt and pt-* with quality values honoured', () => {
    expect(negotiateLanguage(undefined)).toBe('en');
    expect(negotiateLanguage('')).toBe('en');
    expect(negotiateLanguage('fr-FR')).toBe('en');
    expect(negotiateLanguage('*')).toBe('en');
    expect(negotiateLanguage('pt')).toBe('pt');
    expect(negotiateLanguage('pt-BR')).toBe('pt');
    expect(negotiateLanguage('pt-PT')).toBe('pt');
    expect(negotiateLanguage('en;q=0.4, pt-BR;q=0.8')).toBe('pt');
    expect(negotiateLanguage('pt;q=0.4, en;q=0.8')).toBe('en');
    expect(negotiateLanguage('garbage;;q=')).toBe('en');
  });

  it('R-HTTP-04 every code has a distinct, non-empty English and Portuguese message', () => {
    for (const code of Object.keys(MESSAGES) as Array<keyof typeof MESSAGES>) {
      const en = message(code, 'en', { allow: 'GET', limit: 1, location: 'body', fields: 'n', reasons: 'r' });
      const pt = message(code, 'pt', { allow: 'GET', limit: 1, location: 'body', fields: 'n', reasons: 'r' });
      expect(en.length, code).toBeGreaterThan(10);
      expect(pt.length, code).toBeGreaterThan(10);
      expect(pt, code).not.toBe(en);
    }
  });
});

describe('error classification', () => {
  it('R-HTTP-03 Fastify errors map to stable codes', () => {
    const fe = (code: string, statusCode = 400) => Object.assign(new Error('x'), { code, statusCode }) as never;
    expect(classify(fe('FST_ERR_CTP_INVALID_MEDIA_TYPE', 415)).code).toBe('UNSUPPORTED_MEDIA_TYPE');
    expect(classify(fe('FST_ERR_CTP_BODY_TOO_LARGE', 413))).toMatchObject({ status: 413, code: 'BODY_TOO_LARGE' });
    expect(classify(fe('FST_ERR_CTP_INVALID_JSON_BODY'))).toMatchObject({ status: 400, code: 'MALFORMED_JSON' });
    expect(classify(fe('FST_ERR_CTP_EMPTY_JSON_BODY'))).toMatchObject({ status: 400, code: 'MALFORMED_JSON' });
    expect(classify(fe('SOMETHING', 429))).toMatchObject({ status: 429, code: 'BAD_REQUEST' });
    expect(classify(new Error('boom') as never)).toMatchObject({ status: 500, code: 'INTERNAL_ERROR' });
    expect(classify(new HttpError(404, 'RUN_NOT_FOUND'))).toMatchObject({ status: 404, code: 'RUN_NOT_FOUND' });
    const validation = Object.assign(new Error('x'), {
      validation: [{ instancePath: '/runId' }, { instancePath: '', params: { missingProperty: 'name' } }, { instancePath: '/evil key' }],
      validationContext: 'params',
    });
    expect(classify(validation as never)).toMatchObject({ status: 400, code: 'VALIDATION_FAILED', params: { location: 'params', fields: 'runId, name' } });
  });

  it('R-HTTP-03 the route table tells a wrong method (405) from a missing path (404)', () => {
    const t = new RouteTable();
    t.add('/health', ['GET', 'HEAD']);
    t.add('/task-runs/:runId', 'GET');
    t.add('*', 'OPTIONS');
    expect(t.allowedMethods('/health')).toEqual(['GET', 'HEAD']);
    expect(t.allowedMethods('/task-runs/abc')).toEqual(['GET']);
    expect(t.allowedMethods('/task-runs/abc/x')).toEqual([]);
    expect(t.allowedMethods('/nope')).toEqual([]);
  });
});

describe('route rules (broken rules fail buildApp and so the openapi emit)', () => {
  it('R-EXE-13 a route declaring neither public nor a permission fails', async () => {
    const app = await buildApp(stubDeps());
    expect(() => app.get('/x', { schema: ok200 }, async () => ({}))).toThrow(/neither config.public nor config.permission/);
    await app.close();
  });

  it('R-EXE-13 a route declaring both, a bad permission code or no 200 response fails', async () => {
    const app = await buildApp(stubDeps());
    expect(() => app.get('/a', { config: { public: true, permission: 'access.task_runs.read' }, schema: ok200 }, async () => ({}))).toThrow(/both/);
    expect(() => app.get('/b', { config: { permission: 'Not A Code' }, schema: ok200 }, async () => ({}))).toThrow(/permission code/);
    expect(() => app.get('/c', { config: { public: true } }, async () => ({}))).toThrow(/200 response/);
    expect(() =>
      app.get('/d', { config: { public: true }, schema: { ...ok200, security: [{ Bearer: [] }] } as never }, async () => ({})),
    ).toThrow(/public route/);
    await app.close();
  });

  it('R-HTTP-14 R-AUTH-17 the emitted document passes its check; SessionCookie follows the cookie definition', async () => {
    const doc = await buildOpenApiDocument();
    expect(openApiProblems(doc as never, '__Host-svc_session')).toEqual([]);
    const app = await buildApp(stubDeps('app.example.com'));
    await app.ready();
    const withDomain = app.swagger() as unknown as { components: { securitySchemes: { SessionCookie: { name: string } } } };
    expect(withDomain.components.securitySchemes.SessionCookie.name).toBe('__Secure-svc_session');
    await app.close();
  });

  it('R-HTTP-14 the document check names a protected operation missing a scheme', () => {
    const doc = {
      components: { securitySchemes: { Bearer: {}, SessionCookie: { name: '__Host-svc_session' } } },
      paths: {
        '/x': { get: { security: [{ Bearer: [] }], responses: { 200: {}, 401: {}, 403: {} } } },
        '/y': { get: { responses: { 401: {} } } },
      },
    };
    const problems = openApiProblems(doc, '__Host-svc_session');
    expect(problems.some((p) => p.startsWith('GET /x') && p.includes('Bearer and SessionCookie'))).toBe(true);
    expect(problems.some((p) => p.startsWith('GET /y') && p.includes('200'))).toBe(true);
    expect(openApiProblems(doc, '__Secure-svc_session').some((p) => p.includes('SessionCookie scheme'))).toBe(true);
  });
});

describe('OPTIONS requests that are not CORS preflights', () => {
  const ORIGIN = 'https://app.example.com';
  const RUN_URL = '/task-runs/0b0e8a8e-0000-4000-8000-000000000000';
  const withCors = (corsOrigins: string[]) => buildApp({ ...stubDeps(), config: { corsOrigins, corsCredentials: true } });

  const expectEnvelope = (res: { statusCode: number; headers: Record<string, unknown>; body: string }, status: number, code: string) => {
    expect(res.statusCode).toBe(status);
    expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
    expect(JSON.parse(res.body)).toEqual({ success: false, error: { code, message: expect.any(String) } });
  };

  it('R-HTTP-01 R-HTTP-03 a bare OPTIONS (no Origin) gets the error envelope, never a plain-text 400', async () => {
    for (const origins of [[ORIGIN], []]) {
      const app = await withCors(origins);
      try {
        const known = await app.inject({ method: 'OPTIONS', url: RUN_URL });
        expectEnvelope(known, 405, 'METHOD_NOT_ALLOWED');
        expect(known.headers.allow).toBe('GET, HEAD');
        expectEnvelope(await app.inject({ method: 'OPTIONS', url: '/nope' }), 404, 'ROUTE_NOT_FOUND');
        // A method header without Origin is no preflight either.
        expectEnvelope(await app.inject({ method: 'OPTIONS', url: '/health', headers: { 'access-control-request-method': 'GET' } }), 405, 'METHOD_NOT_ALLOWED');
      } finally {
        await app.close();
      }
    }
  });

  it('R-HTTP-03 R-AUTH-23 an OPTIONS with Origin but no Access-Control-Request-Method gets the envelope; a real preflight still gets 204', async () => {
    const app = await withCors([ORIGIN]);
    try {
      for (const origin of [ORIGIN, 'https://evil.example']) {
        const res = await app.inject({ method: 'OPTIONS', url: RUN_URL, headers: { origin, 'accept-language': 'pt-BR' } });
        expectEnvelope(res, 405, 'METHOD_NOT_ALLOWED');
        expect(res.headers['content-language']).toBe('pt');
        expect(res.headers['access-control-allow-origin']).toBeUndefined();
      }
      const preflight = await app.inject({ method: 'OPTIONS', url: RUN_URL, headers: { origin: ORIGIN, 'access-control-request-method': 'GET' } });
      expect(preflight.statusCode).toBe(204);
      expect(preflight.headers['access-control-allow-origin']).toBe(ORIGIN);
    } finally {
      await app.close();
    }
  });
});
