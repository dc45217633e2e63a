// The token reading rules of the authentication step (Bearer wins):
// - the scheme word `Bearer` is matched case-insensitively; an empty token or more than one part is refused;
// - an Authorization header with another scheme (Basic from a proxy, say) is ignored, so the cookie still counts;
// - Bearer and cookie with different tokens are refused; the same token in both counts as Bearer;
// - a credential over MAX_CREDENTIAL_BYTES is refused;
// - a Cookie header carrying the session cookie name more than once is refused.
// A refusal happens before any session lookup. Nothing here logs or returns the token in a message.
import { MAX_CREDENTIAL_BYTES } from '../config/limits.ts';

export type CredentialRefusal =
  | 'empty_bearer'
  | 'multi_part_bearer'
  | 'oversized_credential'
  | 'duplicate_session_cookie'
  | 'empty_session_cookie'
  | 'bearer_cookie_mismatch';

export type CredentialReading =
  | { kind: 'none' }
  | { kind: 'refused'; reason: CredentialRefusal }
  | { kind: 'token'; source: 'bearer' | 'cookie'; token: string };

export interface CredentialHeaders {
  authorization?: string | string[] | undefined;
  cookie?: string | string[] | undefined;
}

type Part = { token: string } | { refused: CredentialRefusal } | undefined;

function oversized(token: string): boolean {
  return Buffer.byteLength(token, 'utf8') > MAX_CREDENTIAL_BYTES;
}

function readBearer(header: string | string[] | undefined): Part {
  // Node keeps only the first Authorization header; an array only comes from HTTP/2 or a test.
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined) return undefined;
  const match = /^[ \t]*([^ \t]+)([\s\S]*)$/.exec(value);
  if (!match || match[1]!.toLowerCase() !== 'bearer') return undefined; // another scheme: ignored
  const parts = match[2]!.split(/[\s,]+/).filter((p) => p.length > 0);
  if (parts.length === 0) return { refused: 'empty_bearer' };
  if (parts.length > 1) return { refused: 'multi_part_bearer' };
  if (oversized(parts[0]!)) return { refused: 'oversized_credential' };
  return { token: parts[0]! };
}

function readCookie(header: string | string[] | undefined, cookieName: string): Part {
  if (header === undefined) return undefined;
  const text = Array.isArray(header) ? header.join('; ') : header;
  const values: string[] = [];
  for (const pair of text.split(';')) {
    const eq = pair.indexOf('=');
    if (eq < 0 || pair.slice(0, eq).trim() !== cookieName) continue;
    let value = pair.slice(eq + 1).trim();
    // RFC 6265 lets a cookie value be wrapped in double quotes.
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    values.push(value);
  }
  if (values.length === 0) return undefined;
  if (values.length > 1) return { refused: 'duplicate_session_cookie' };
  if (values[0] === '') return { refused: 'empty_session_cookie' };
  if (oversized(values[0]!)) return { refused: 'oversized_credential' };
  return { token: values[0]! };
}

/** Applies the reading rules to a request's headers. */
export function readCredential(headers: CredentialHeaders, cookieName: string): CredentialReading {
  const bearer = readBearer(headers.authorization);
  const cookie = readCookie(headers.cookie, cookieName);
  if (bearer && 'refused' in bearer) return { kind: 'refused', reason: bearer.refused };
  if (cookie && 'refused' in cookie) return { kind: 'refused', reason: cookie.refused };
  if (bearer && cookie && bearer.token !== cookie.token) return { kind: 'refused', reason: 'bearer_cookie_mismatch' };
  if (bearer) return { kind: 'token', source: 'bearer', token: bearer.token };
  if (cookie) return { kind: 'token', source: 'cookie', token: cookie.token };
  return { kind: 'none' };
}
