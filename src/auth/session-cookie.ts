// The session cookie, defined in exactly one place: its name and attributes, and the OpenAPI
// `SessionCookie` scheme's name, all come from here.

/** Host-only cookie (default): the `__Host-` prefix makes browsers refuse a Domain, a non-secure origin and a path other than /. */
export const HOST_SESSION_COOKIE_NAME = '__Host-svc_session';
/** Cookie shared with a neighbouring host (SESSION_COOKIE_DOMAIN set): `__Secure-` allows a Domain. */
export const DOMAIN_SESSION_COOKIE_NAME = '__Secure-svc_session';

export interface SessionCookieDefinition {
  name: string;
  /** Set only when SESSION_COOKIE_DOMAIN is configured. */
  domain?: string;
  httpOnly: true;
  secure: true;
  sameSite: 'Lax';
  path: '/';
}

/** The cookie definition for a deployment; `domain` must already be validated (src/config/api.ts). */
export function sessionCookie(domain?: string): SessionCookieDefinition {
  const common = { httpOnly: true, secure: true, sameSite: 'Lax', path: '/' } as const;
  return domain ? { name: DOMAIN_SESSION_COOKIE_NAME, domain, ...common } : { name: HOST_SESSION_COOKIE_NAME, ...common };
}

/** The `Set-Cookie` header value that would carry `token` (login will use it; nothing issues sessions yet). */
export function serializeSessionCookie(definition: SessionCookieDefinition, token: string): string {
  const parts = [`${definition.name}=${token}`];
  if (definition.domain) parts.push(`Domain=${definition.domain}`);
  parts.push(`Path=${definition.path}`, 'HttpOnly', 'Secure', `SameSite=${definition.sameSite}`);
  return parts.join('; ');
}
