import { describe, expect, it } from 'vitest';
import { readCredential } from '../../src/auth/credentials.ts';
import { authenticate } from '../../src/auth/authenticate.ts';
import { FakeSessionResolver } from '../support/fake-session-resolver.ts';

const NAME = '__Host-svc_session';
const read = (authorization?: string, cookie?: string) => readCredential({ authorization, cookie }, NAME);

describe('token reading rules', () => {
  it('R-AUTH-08 reads the token from Bearer or from the session cookie', () => {
    expect(read('Bearer abc')).toEqual({ kind: 'token', source: 'bearer', token: 'abc' });
    expect(read(undefined, `${NAME}=abc`)).toEqual({ kind: 'token', source: 'cookie', token: 'abc' });
    expect(read(undefined, `theme=dark; ${NAME}=abc; lang=pt`)).toEqual({ kind: 'token', source: 'cookie', token: 'abc' });
    expect(read(undefined, `${NAME}="abc"`)).toEqual({ kind: 'token', source: 'cookie', token: 'abc' });
    expect(read()).toEqual({ kind: 'none' });
    expect(read(undefined, 'other=1')).toEqual({ kind: 'none' });
  });

  it('R-AUTH-08 Bearer wins: the same token in both counts as Bearer', () => {
    expect(read('Bearer abc', `${NAME}=abc`)).toEqual({ kind: 'token', source: 'bearer', token: 'abc' });
  });

  it('R-AUTH-09 the scheme word Bearer is matched case-insensitively', () => {
    for (const scheme of ['bearer', 'BEARER', 'BeArEr']) expect(read(`${scheme} abc`)).toMatchObject({ kind: 'token', token: 'abc' });
    expect(read('Bearer   abc  ')).toMatchObject({ kind: 'token', token: 'abc' });
  });

  it('R-AUTH-10 an empty token or more than one part is refused', () => {
    for (const value of ['Bearer', 'Bearer ', 'bearer    ', 'Bearer\t']) expect(read(value)).toEqual({ kind: 'refused', reason: 'empty_bearer' });
    for (const value of ['Bearer a b', 'Bearer a,b', 'Bearer a, b', 'Bearer a\tb']) {
      expect(read(value)).toEqual({ kind: 'refused', reason: 'multi_part_bearer' });
    }
    // A refused Bearer is not rescued by a valid cookie.
    expect(read('Bearer', `${NAME}=abc`)).toEqual({ kind: 'refused', reason: 'empty_bearer' });
  });

  it('R-AUTH-11 another scheme is ignored and the cookie still authenticates', () => {
    expect(read('Basic dXNlcjpwYXNz', `${NAME}=abc`)).toEqual({ kind: 'token', source: 'cookie', token: 'abc' });
    expect(read('Basic dXNlcjpwYXNz')).toEqual({ kind: 'none' });
    expect(read('Bearertoken', `${NAME}=abc`)).toEqual({ kind: 'token', source: 'cookie', token: 'abc' });
  });

  it('R-AUTH-12 Bearer and cookie with different tokens are refused', () => {
    expect(read('Bearer abc', `${NAME}=xyz`)).toEqual({ kind: 'refused', reason: 'bearer_cookie_mismatch' });
  });

  it('R-AUTH-13 a credential over 1024 bytes is refused (Bearer or cookie)', () => {
    const ok = 'a'.repeat(1024);
    const big = 'a'.repeat(1025);
    expect(read(`Bearer ${ok}`)).toMatchObject({ kind: 'token' });
    expect(read(`Bearer ${big}`)).toEqual({ kind: 'refused', reason: 'oversized_credential' });
    expect(read(undefined, `${NAME}=${ok}`)).toMatchObject({ kind: 'token' });
    expect(read(undefined, `${NAME}=${big}`)).toEqual({ kind: 'refused', reason: 'oversized_credential' });
    // Bytes, not characters: 342 three-byte characters are 1026 bytes.
    expect(read(`Bearer ${'€'.repeat(342)}`)).toEqual({ kind: 'refused', reason: 'oversized_credential' });
  });

  it('R-AUTH-14 a Cookie header carrying the session cookie name twice is refused, even with equal values', () => {
    expect(read(undefined, `${NAME}=abc; ${NAME}=abc`)).toEqual({ kind: 'refused', reason: 'duplicate_session_cookie' });
    expect(read(undefined, `${NAME}=abc; a=1; ${NAME}=xyz`)).toEqual({ kind: 'refused', reason: 'duplicate_session_cookie' });
    expect(readCredential({ cookie: [`${NAME}=abc`, `${NAME}=abc`] }, NAME)).toEqual({ kind: 'refused', reason: 'duplicate_session_cookie' });
    // Other cookies of a similar name are not the session cookie.
    expect(read(undefined, `__Secure-svc_session=x; ${NAME}=abc`)).toMatchObject({ kind: 'token', token: 'abc' });
    expect(read(undefined, `${NAME}=`)).toEqual({ kind: 'refused', reason: 'empty_session_cookie' });
  });
});

describe('authentication step', () => {
  const settings = (resolver: FakeSessionResolver, origins: string[] = []) => ({
    resolver,
    cookieName: NAME,
    allowedOrigins: new Set(origins),
  });

  it('R-AUTH-03 R-AUTH-10 refusals of the reading rules happen before any lookup', async () => {
    const resolver = new FakeSessionResolver().add('abc', { tenantId: '1' });
    for (const authorization of ['Bearer', 'Bearer a b', `Bearer ${'x'.repeat(2000)}`]) {
      const outcome = await authenticate({ method: 'GET', headers: { authorization } }, settings(resolver), 'access.task_runs.read');
      expect(outcome).toMatchObject({ ok: false, status: 401, code: 'UNAUTHENTICATED' });
    }
    await authenticate({ method: 'GET', headers: { cookie: `${NAME}=a; ${NAME}=a` } }, settings(resolver), 'access.task_runs.read');
    expect(resolver.lookups).toBe(0);
  });

  it('R-AUTH-03 no resolvable session is 401; a session without the permission is 403', async () => {
    const resolver = new FakeSessionResolver().add('abc', { tenantId: '1', permissions: [] });
    expect(await authenticate({ method: 'GET', headers: { authorization: 'Bearer nope' } }, settings(resolver), 'access.task_runs.read')).toMatchObject({
      ok: false,
      status: 401,
    });
    expect(await authenticate({ method: 'GET', headers: { authorization: 'Bearer abc' } }, settings(resolver), 'access.task_runs.read')).toMatchObject({
      ok: false,
      status: 403,
      code: 'PERMISSION_DENIED',
    });
  });

  it('R-AUTH-20 R-AUTH-21 a cookie write from an unlisted origin is 403 before the session is resolved', async () => {
    const resolver = new FakeSessionResolver().add('abc', { tenantId: '1' });
    const cookie = `${NAME}=abc`;
    const outcome = await authenticate(
      { method: 'POST', headers: { cookie, origin: 'https://evil.example' } },
      settings(resolver, ['https://app.example.com']),
      'access.task_runs.read',
    );
    expect(outcome).toMatchObject({ ok: false, status: 403, code: 'ORIGIN_NOT_ALLOWED' });
    expect(resolver.lookups).toBe(0);
    const bearer = await authenticate(
      { method: 'POST', headers: { authorization: 'Bearer abc', origin: 'https://evil.example' } },
      settings(resolver, []),
      'access.task_runs.read',
    );
    expect(bearer).toMatchObject({ ok: true, source: 'bearer' });
  });

  it('R-AUTH-07 x-tenant-id, x-user-id and x-system never establish identity', async () => {
    const resolver = new FakeSessionResolver().add('abc', { tenantId: '1' });
    const headers = { 'x-tenant-id': '2', 'x-user-id': '2', 'x-system': 'true' } as Record<string, string>;
    expect(await authenticate({ method: 'GET', headers }, settings(resolver), 'access.task_runs.read')).toMatchObject({ ok: false, status: 401 });
    const outcome = await authenticate({ method: 'GET', headers: { ...headers, authorization: 'Bearer abc' } }, settings(resolver), 'access.task_runs.read');
    expect(outcome.ok && outcome.session.tenantId).toBe('1');
  });
});
