import { describe, expect, it } from 'vitest';
import { claimedOrigin, cookieWriteAllowed } from '../../src/auth/origin-check.ts';
import { DOMAIN_SESSION_COOKIE_NAME, HOST_SESSION_COOKIE_NAME, serializeSessionCookie, sessionCookie } from '../../src/auth/session-cookie.ts';

const allowed = new Set(['https://app.example.com']);

describe('origin check of cookie-authenticated writes', () => {
  it('R-AUTH-20 writes need Origin (or lacking it Referer) exactly in CORS_ORIGINS', () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'post']) {
      expect(cookieWriteAllowed(method, { origin: 'https://app.example.com' }, allowed)).toBe(true);
      expect(cookieWriteAllowed(method, {}, allowed)).toBe(false);
      expect(cookieWriteAllowed(method, { origin: 'https://app.example.com.evil.io' }, allowed)).toBe(false);
      expect(cookieWriteAllowed(method, { origin: 'http://app.example.com' }, allowed)).toBe(false);
      expect(cookieWriteAllowed(method, { origin: 'null' }, allowed)).toBe(false);
      expect(cookieWriteAllowed(method, { referer: 'https://app.example.com/page?x=1' }, allowed)).toBe(true);
      expect(cookieWriteAllowed(method, { referer: 'https://evil.example/page' }, allowed)).toBe(false);
      expect(cookieWriteAllowed(method, { referer: 'not a url' }, allowed)).toBe(false);
      // Origin present and wrong: the Referer does not rescue it.
      expect(cookieWriteAllowed(method, { origin: 'https://evil.example', referer: 'https://app.example.com/' }, allowed)).toBe(false);
    }
  });

  it('R-AUTH-21 GET, HEAD and OPTIONS skip the check', () => {
    for (const method of ['GET', 'HEAD', 'OPTIONS']) expect(cookieWriteAllowed(method, { origin: 'https://evil.example' }, allowed)).toBe(true);
  });

  it('R-AUTH-22 with CORS_ORIGINS empty every cookie write is refused', () => {
    expect(cookieWriteAllowed('POST', { origin: 'https://app.example.com' }, new Set())).toBe(false);
  });

  it('R-AUTH-20 the claimed origin of a Referer drops path, query and credentials', () => {
    expect(claimedOrigin({ referer: 'https://u:p@app.example.com:8443/a/b?c#d' })).toBe('https://app.example.com:8443');
    expect(claimedOrigin({ origin: '', referer: 'https://app.example.com/x' })).toBe('https://app.example.com');
    expect(claimedOrigin({ referer: 'data:text/plain,x' })).toBeUndefined();
  });
});

describe('session cookie definition', () => {
  it('R-AUTH-16 default: __Host-svc_session, HttpOnly; Secure; SameSite=Lax; Path=/, no Domain', () => {
    const c = sessionCookie();
    expect(c).toEqual({ name: HOST_SESSION_COOKIE_NAME, httpOnly: true, secure: true, sameSite: 'Lax', path: '/' });
    expect(c.name).toBe('__Host-svc_session');
    expect(serializeSessionCookie(c, 't')).toBe('__Host-svc_session=t; Path=/; HttpOnly; Secure; SameSite=Lax');
  });

  it('R-AUTH-18 with SESSION_COOKIE_DOMAIN: __Secure-svc_session with that Domain', () => {
    const c = sessionCookie('app.example.com');
    expect(c.name).toBe(DOMAIN_SESSION_COOKIE_NAME);
    expect(c.name).toBe('__Secure-svc_session');
    expect(serializeSessionCookie(c, 't')).toBe('__Secure-svc_session=t; Domain=app.example.com; Path=/; HttpOnly; Secure; SameSite=Lax');
  });
});
