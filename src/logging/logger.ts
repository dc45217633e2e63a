// The one logger factory: pino, JSON lines by default, pretty when writing to a terminal, level from
// LOG_LEVEL. Every path that can carry a credential is redacted before a line is written, so no session
// token, cookie, password or connection-string password ever reaches the logs.
import { Writable } from 'node:stream';
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

/** Keys whose whole value is a credential, wherever they appear (top level or one/two levels deep). */
const SECRET_KEYS = [
  'authorization',
  'cookie',
  'set-cookie',
  'password',
  'token',
  'sessionToken',
  'accessToken',
  'refreshToken',
  'secret',
  'secretAccessKey',
  'sessionCookie',
];

/** Keys holding connection URLs: only their password part is hidden, so the host stays visible. */
const URL_KEYS = ['DATABASE_URL', 'REDIS_URL', 'databaseUrl', 'redisUrl', 'connectionString'];

/** `key`, `*.key` and `*.*.key`, with bracket notation for keys that are not identifiers. */
function pathsFor(key: string): string[] {
  const segment = /^[A-Za-z_$][\w$]*$/.test(key) ? key : `["${key}"]`;
  const nested = segment.startsWith('[') ? segment : `.${segment}`;
  return [segment, `*${nested}`, `*.*${nested}`];
}

/** Every redacted path; exported so a test can prove each one. */
export const REDACTED_PATHS: string[] = [
  ...SECRET_KEYS.flatMap(pathsFor),
  ...URL_KEYS.flatMap(pathsFor),
  // Fastify request/response shapes, explicitly, in case a serializer includes headers.
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["set-cookie"]',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'headers.cookie',
  'headers["set-cookie"]',
];

export const REDACTED = '[REDACTED]';

/** Replaces the password of a URL-looking value; any other redacted value becomes `[REDACTED]`. */
function censor(value: unknown, path: string[]): unknown {
  const key = path.at(-1) ?? '';
  if (URL_KEYS.includes(key) && typeof value === 'string') {
    try {
      const url = new URL(value);
      if (!url.password && !url.username) return value;
      // The user name is kept for diagnosis; the password never leaves the process.
      return `${url.protocol}//${url.username ? `${decodeURIComponent(url.username)}:` : ''}${REDACTED}@${url.host}${url.pathname}`;
    } catch {
      return REDACTED;
    }
  }
  return REDACTED;
}

export interface LoggerSettings {
  /** fatal | error | warn | info | debug | trace | silent. Default info. */
  level?: string;
  /** Pretty lines for humans. Default: true when stdout is a terminal. */
  pretty?: boolean;
  /** Where lines go. Default stdout. Tests pass a capture stream. */
  destination?: DestinationStream;
  /** Bound on every line, e.g. { service: 'api' }. */
  base?: Record<string, unknown>;
}

export function loggerOptions(settings: LoggerSettings = {}): LoggerOptions {
  return {
    level: settings.level ?? 'info',
    base: settings.base ?? {},
    redact: { paths: REDACTED_PATHS, censor },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
}

export function createLogger(settings: LoggerSettings = {}): Logger {
  const usePretty = settings.pretty ?? Boolean(process.stdout.isTTY);
  const destination =
    settings.destination ??
    (usePretty ? pretty({ colorize: true, translateTime: 'SYS:standard', sync: true }) : pino.destination(1));
  return pino(loggerOptions(settings), destination);
}

/** A logger writing JSON lines into memory, for tests that search the logs (e.g. for tokens). */
export function captureLogger(level = 'trace'): { logger: Logger; lines: string[]; text(): string } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  const logger = pino(loggerOptions({ level }), stream);
  return { logger, lines, text: () => lines.join('\n') };
}
