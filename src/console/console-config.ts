// The console's environment (besides the database, Redis and SQS variables it shares with `svc runs`).
import { z } from 'zod';
import { corsOrigins } from '../config/api.ts';
import { integer, logLevel } from '../config/parse.ts';
import { CONSOLE_TOKEN_MIN_LENGTH } from './console-access.ts';

export const consoleSchema = z.object({
  /** Interface the console binds. Default 127.0.0.1 (loopback); any other needs SVC_CONSOLE_TOKEN. */
  SVC_CONSOLE_HOST: z.string().default('127.0.0.1'),
  /** Port of the console. Default 3001. */
  SVC_CONSOLE_PORT: integer(1, 65535).default(3001),
  /** Token of the login form (at least 32 characters); without it the console is read-only and loopback-only. Default unset. */
  SVC_CONSOLE_TOKEN: z.string().min(CONSOLE_TOKEN_MIN_LENGTH, { error: `must be at least ${CONSOLE_TOKEN_MIN_LENGTH} characters` }).optional(),
  /** Further exact origins the console is reached at (a TLS proxy in front of it), comma-separated. Default none. */
  SVC_CONSOLE_ORIGINS: corsOrigins,
  /** Who redrives and cancels from the console, as recorded on runs and trails. Default console. */
  SVC_CONSOLE_OPERATOR: z.string().min(1).max(100).default('console'),
  /** Log level. Default info. */
  LOG_LEVEL: logLevel,
});

export type ConsoleConfig = z.infer<typeof consoleSchema>;
