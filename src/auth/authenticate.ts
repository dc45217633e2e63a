// The one authentication step every protected route passes: read the token (reading rules), check the
// origin of cookie-authenticated writes (before any lookup), ask the session resolver, check the
// route's permission. Headers such as x-tenant-id, x-user-id or x-system are never read.
import { readCredential, type CredentialHeaders, type CredentialRefusal } from './credentials.ts';
import { cookieWriteAllowed, type OriginHeaders } from './origin-check.ts';
import type { Session, SessionResolver } from './session-resolver.ts';

export interface AuthSettings {
  resolver: SessionResolver;
  /** Name of the session cookie (from src/auth/session-cookie.ts). */
  cookieName: string;
  /** CORS_ORIGINS: the origins cookie-authenticated writes may come from. */
  allowedOrigins: ReadonlySet<string>;
}

export interface AuthRequest {
  method: string;
  headers: CredentialHeaders & OriginHeaders;
}

/** Why a request was refused; safe to log (never contains the token). */
export type AuthFailureReason = CredentialRefusal | 'no_credential' | 'origin_not_allowed' | 'no_session' | 'missing_permission';

export type AuthOutcome =
  | { ok: true; session: Session; source: 'bearer' | 'cookie' }
  | { ok: false; status: 401; code: 'UNAUTHENTICATED'; reason: AuthFailureReason }
  | { ok: false; status: 403; code: 'ORIGIN_NOT_ALLOWED' | 'PERMISSION_DENIED'; reason: AuthFailureReason };

export async function authenticate(request: AuthRequest, settings: AuthSettings, permission: string): Promise<AuthOutcome> {
  const credential = readCredential(request.headers, settings.cookieName);
  if (credential.kind === 'none') return { ok: false, status: 401, code: 'UNAUTHENTICATED', reason: 'no_credential' };
  if (credential.kind === 'refused') return { ok: false, status: 401, code: 'UNAUTHENTICATED', reason: credential.reason };
  if (credential.source === 'cookie' && !cookieWriteAllowed(request.method, request.headers, settings.allowedOrigins)) {
    return { ok: false, status: 403, code: 'ORIGIN_NOT_ALLOWED', reason: 'origin_not_allowed' };
  }
  const session = await settings.resolver.resolve(credential.token);
  if (!session) return { ok: false, status: 401, code: 'UNAUTHENTICATED', reason: 'no_session' };
  if (!session.permissions.has(permission)) {
    return { ok: false, status: 403, code: 'PERMISSION_DENIED', reason: 'missing_permission' };
  }
  return { ok: true, session, source: credential.source };
}
