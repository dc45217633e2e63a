// The console's environment (besides the database, Redis and SQS variables it shares with `svc runs`).
import { z } from 'zod';
import { corsOrigins } from '../config/api.ts';
import { integer, logLevel } from '../config/parse.ts';
import { CONSOLE_TOKEN_MIN_LENGTH } from './console-access.ts';
import { DEFAULT_LOGIN_MAX_FAILURES, DEFAULT_LOGIN_WINDOW_SECONDS } from './console-login-throttle.ts';
import { DEFAULT_SESSION_TTL_SECONDS } from './console-sessions.ts';

export const consoleSchema = z.object({
  /** Interface the console binds. Default 127.0.0.1 (loopback); any other needs SVC_CONSOLE_TOKEN. */
  SVC_CONSOLE_HOST: z.string().default('127.0.0.1'),
  /** Port of the console. Default 3001. */
  SVC_CONSOLE_PORT: integer(1, 65535).default(3001),
  /** Token of the login form (at least 32 characters); without it the console is read-only and loopback-only. Default unset. */
  SVC_CONSOLE_TOKEN: z.string().min(CONSOLE_TOKEN_MIN_LENGTH, { error: `must be at least ${CONSOLE_TOKEN_MIN_LENGTH} characters` }).optional(),
  /** Further exact origins the console is reached at (a TLS proxy in front of it), comma-separated. Default none. */
  SVC_CONSOLE_ORIGINS: corsOrigins,
  /** Prefix of the actor recorded on runs and trails: `<prefix>:<name given at login>`. Default console. */
  SVC_CONSOLE_OPERATOR: z.string().regex(/^[A-Za-z0-9._@-]{1,32}$/, { error: 'must be 1 to 32 letters, digits or . _ @ -' }).default('console'),
  /** Lifetime of a login session in seconds (the cookie's Max-Age; revoked earlier by logout). Default 28800 (8 h). */
  SVC_CONSOLE_SESSION_TTL_SECONDS: integer(1, 7 * 86400).default(DEFAULT_SESSION_TTL_SECONDS),
  /** Failed logins one client address may make within the window before it gets 429. Default 5. */
  SVC_CONSOLE_LOGIN_MAX_FAILURES: integer(1, 1000).default(DEFAULT_LOGIN_MAX_FAILURES),
  /** Window of the failed-login count, in seconds. Default 60. */
  SVC_CONSOLE_LOGIN_WINDOW_SECONDS: integer(1, 86400).default(DEFAULT_LOGIN_WINDOW_SECONDS),
  /** Log level. Default info. */
  LOG_LEVEL: logLevel,
});

export type ConsoleConfig = z.infer<typeof consoleSchema>;
