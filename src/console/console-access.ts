// Who may use the operator console. It reads runs across tenants, so:
// - on a host other than loopback it refuses to start without SVC_CONSOLE_TOKEN (at least 32 characters);
// - the token is presented once (login form, throttled per client address: console-login-throttle.ts)
//   and earns a session (console-sessions.ts): an HttpOnly, SameSite=Strict cookie holding a random
//   session id with an expiry, revoked server-side at logout, so the cookie store never holds the token;
// - every comparison is constant-time (fixed-length digests through timingSafeEqual);
// - every write (POST) needs the token (cookie) AND an Origin header equal to one of the console's own
//   origins; without a configured token the console is read-only;
// - every request must name one of the console's own hosts (Host header), so a DNS-rebinding page
//   cannot read it through the browser.
import { createHash, timingSafeEqual } from 'node:crypto';
import net from 'node:net';
import { CodedError } from '../errors/coded-error.ts';

/** Shortest token the console accepts. */
export const CONSOLE_TOKEN_MIN_LENGTH = 32;
/** Name of the console's session cookie. */
export const CONSOLE_COOKIE = 'svc_console';

export type ConsoleAccessCode = 'CONSOLE_TOKEN_REQUIRED' | 'CONSOLE_TOKEN_TOO_SHORT' | 'CONSOLE_OPERATOR_INVALID';
export class ConsoleAccessError extends CodedError<ConsoleAccessCode> {}

export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost') return true;
  const bare = host.replace(/^\[|\]$/g, '');
  if (net.isIPv4(bare)) return bare.startsWith('127.');
  if (net.isIPv6(bare)) return bare === '::1';
  return false;
}

/** Refuses a configuration that would expose the console: a non-loopback host without a token, a short token. */
export function checkConsoleAccess(host: string, token: string | undefined): void {
  if (token !== undefined && token.length < CONSOLE_TOKEN_MIN_LENGTH) {
    throw new ConsoleAccessError('CONSOLE_TOKEN_TOO_SHORT', `SVC_CONSOLE_TOKEN must be at least ${CONSOLE_TOKEN_MIN_LENGTH} characters (generate one with: openssl rand -hex 32)`);
  }
  if (token === undefined && !isLoopbackHost(host)) {
    throw new ConsoleAccessError(
      'CONSOLE_TOKEN_REQUIRED',
      `the console reads every tenant's runs: on SVC_CONSOLE_HOST=${host} (not loopback) it needs SVC_CONSOLE_TOKEN (at least ${CONSOLE_TOKEN_MIN_LENGTH} characters)`,
    );
  }
}

/** Longest operator name the login form accepts. */
export const CONSOLE_OPERATOR_MAX_LENGTH = 64;
const OPERATOR_NAME = /^[\p{L}\p{N}][\p{L}\p{N} ._@+'-]*$/u;

/**
 * The name an operator gives at login, recorded on every redrive and cancel: 1 to 64 letters, digits,
 * spaces and . _ @ + ' - (an email address fits), starting with a letter or digit; trimmed.
 */
export function checkOperatorName(raw: unknown): string {
  const name = typeof raw === 'string' ? raw.trim() : '';
  if (name.length === 0 || name.length > CONSOLE_OPERATOR_MAX_LENGTH || !OPERATOR_NAME.test(name)) {
    throw new ConsoleAccessError(
      'CONSOLE_OPERATOR_INVALID',
      `give your name (1 to ${CONSOLE_OPERATOR_MAX_LENGTH} letters, digits, spaces or . _ @ + ' -): it is recorded on every redrive and cancel`,
    );
  }
  return name;
}

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/** Constant-time equality of two strings of any length (their SHA-256 digests are compared). */
export function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

export interface ConsoleGate {
  /** False: the console is read-only (no token configured). */
  readonly writable: boolean;
  /** True when the presented token is the configured one (constant time). */
  tokenMatches(presented: string): boolean;
  /** True when the request's Host header names this console. */
  hostAllowed(hostHeader: string | undefined): boolean;
  /** True when a write's Origin header is exactly one of this console's origins. */
  originAllowed(origin: string | undefined): boolean;
}

/**
 * The console's access rules for a token (or none) and the addresses it is reached at: its bind
 * host and port, loopback names when bound to loopback, and `extraOrigins` (SVC_CONSOLE_ORIGINS, for a
 * TLS proxy in front of it).
 */
export function consoleGate(options: { token: string | undefined; host: string; port: number; extraOrigins?: readonly string[] }): ConsoleGate {
  const { token, port } = options;
  const names = new Set([options.host]);
  if (isLoopbackHost(options.host)) for (const n of ['127.0.0.1', 'localhost', '[::1]']) names.add(n);
  const hosts = new Set([...names].map((n) => `${n}:${port}`.toLowerCase()));
  const origins = new Set([...names].map((n) => `http://${n}:${port}`.toLowerCase()));
  for (const o of options.extraOrigins ?? []) {
    origins.add(o.toLowerCase());
    hosts.add(new URL(o).host.toLowerCase());
  }
  return {
    writable: token !== undefined,
    tokenMatches: (presented) => token !== undefined && sameSecret(presented, token),
    hostAllowed: (host) => host !== undefined && hosts.has(host.toLowerCase()),
    originAllowed: (origin) => origin !== undefined && origins.has(origin.toLowerCase()),
  };
}
