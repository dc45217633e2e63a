// Property: whatever Authorization and Cookie headers a client sends to a protected route, the API
// answers 200/401/403/404 (never a 500) and never echoes a token in the body, headers or logs.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpFixture, insertRun, type HttpFixture } from './http-support.ts';

let f: HttpFixture;
let runId: string;
const okSchema = { 200: { type: 'object', additionalProperties: true } };

beforeAll(async () => {
  f = await httpFixture({}, (app) => {
    app.post('/test/write', { config: { permission: 'access.task_runs.read' }, schema: { response: okSchema } }, async () => ({
      success: true,
      data: {},
      meta: {},
    }));
  });
  runId = await insertRun(f.db.sql, f.tenantA);
});
afterAll(async () => {
  await f?.close();
});

// Printable ASCII: what a header value can carry through Node's HTTP stack.
const printable = fc.constantFrom(...Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)));
const text = (maxLength: number) => fc.string({ unit: printable, maxLength });
// Every generated secret carries the marker, so any echo of one is detectable by searching for it.
const MARKER = 'SECRET';
const secret = fc.oneof(
  text(40).map((s) => `${MARKER}${s.replaceAll(';', '')}`),
  fc.integer({ min: 1015, max: 1040 }).map((n) => `${MARKER}${'z'.repeat(n)}`),
);
const token = fc.oneof({ weight: 1, arbitrary: fc.constantFrom('token-a', 'token-b', 'token-no-permission') }, { weight: 3, arbitrary: secret });
const authorization = fc.option(
  fc.oneof(
    token.map((t) => `Bearer ${t}`),
    fc
      .tuple(fc.constantFrom('Bearer', 'bearer', 'BEARER', 'Basic', 'Token', ''), fc.array(token, { maxLength: 3 }), fc.constantFrom(' ', '  ', ',', ', ', '\t'))
      .map(([scheme, parts, sep]) => `${scheme} ${parts.join(sep)}`),
    text(60),
  ),
  { nil: undefined },
);
const cookiePart = fc.oneof(
  token.map((t) => `__Host-svc_session=${t}`),
  token.map((t) => `__Secure-svc_session=${t}`),
  text(20).map((s) => `theme=${s.replaceAll(';', '')}`),
  text(30),
);
const cookie = fc.option(
  fc.array(cookiePart, { maxLength: 4 }).map((parts) => parts.join('; ')),
  { nil: undefined },
);
const request = fc.record({
  write: fc.boolean(),
  authorization,
  cookie,
  origin: fc.option(fc.constantFrom('https://app.example.com', 'https://evil.example', 'null'), { nil: undefined }),
  extra: fc.option(fc.record({ 'x-tenant-id': fc.constant('1'), 'x-system': fc.constant('true') }), { nil: undefined }),
});

describe('random credentials at a protected route', () => {
  it('R-AUTH-15 R-AUTH-03 never a 500 and never a token in the body, headers or logs', async () => {
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        const headers: Record<string, string> = { ...(r.extra ?? {}) };
        if (r.authorization !== undefined) headers.authorization = r.authorization;
        if (r.cookie !== undefined) headers.cookie = r.cookie;
        if (r.origin !== undefined) headers.origin = r.origin;
        const res = await f.app.inject({ method: r.write ? 'POST' : 'GET', url: r.write ? '/test/write' : `/task-runs/${runId}`, headers });
        expect([200, 401, 403, 404]).toContain(res.statusCode);
        expect(res.body).not.toContain(MARKER);
        expect(JSON.stringify(res.headers)).not.toContain(MARKER);
        if (res.statusCode !== 200) expect(res.json()).toMatchObject({ success: false, error: { code: expect.any(String), message: expect.any(String) } });
      }),
      { numRuns: 400 },
    );
    expect(f.logs.lines.length).toBeGreaterThan(400);
    const logs = f.logs.text();
    expect(logs).not.toContain(MARKER);
    expect(logs).not.toContain('token-a');
    expect(logs).not.toContain('token-no-permission');
  });
});
