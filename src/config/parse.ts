// Parses process.env with one zod schema per executable. A bad or missing value stops the process with
// exit code 1 and ONE message naming every bad variable and its rule; values are never echoed, since
// any of them may be a secret.
import { z } from 'zod';

export class ConfigError extends Error {
  readonly code = 'CONFIG_INVALID';
  readonly problems: Array<{ variable: string; rule: string }>;
  constructor(executable: string, problems: Array<{ variable: string; rule: string }>) {
    super(
      `invalid configuration for ${executable}:\n` + problems.map((p) => `  ${p.variable}: ${p.rule}`).join('\n'),
    );
    this.problems = problems;
  }
}

export type Env = Record<string, string | undefined>;

/** Empty strings count as unset, as shells and compose files often export `VAR=`. */
function withoutEmpty(env: Env): Env {
  return Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
}

export function parseEnv<S extends z.ZodType>(executable: string, schema: S, env: Env): z.infer<S> {
  const result = schema.safeParse(withoutEmpty(env));
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => ({
    variable: issue.path.length ? issue.path.join('.') : '(environment)',
    // zod messages describe the rule ("expected number <= 20"); they do not contain the input value.
    rule: issue.message,
  }));
  throw new ConfigError(executable, problems);
}

/** `true`/`false` (also 1/0, yes/no), as environment variables carry them. */
export const booleanFlag = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { error: 'must be true or false' })
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

/**
 * Integer parsed strictly from a string of decimal digits (an optional leading minus), within bounds.
 * `Number()` would also accept `0x10`, `1e1`, ` 5` and `5.0`: a value that only looks like the number
 * meant is refused instead of silently read as something else.
 */
export function integer(min: number, max: number = Number.MAX_SAFE_INTEGER) {
  // One transform, not a pipe of checks: a failed pipe marks the whole environment aborted, which would
  // hide the cross-variable rules (EVEN_WITH_OTHER_PROBLEMS) behind this one problem.
  return z.string().transform((raw, ctx) => {
    const problem = !/^-?[0-9]+$/.test(raw)
      ? 'must be a whole number written in decimal digits'
      : Number(raw) < min
        ? `must be at least ${min}`
        : Number(raw) > max
          ? `must be at most ${max}`
          : undefined;
    if (problem) {
      ctx.addIssue({ code: 'custom', message: problem });
      return z.NEVER;
    }
    return Number(raw);
  });
}

/**
 * Params of an object-level `superRefine` holding cross-variable rules: it runs even when some variable
 * already failed its own rule, so one message names every problem. Each rule first asks `parsedOk`.
 */
export const EVEN_WITH_OTHER_PROBLEMS = { when: () => true } as const;

/** True when none of `variables` failed its own rule (their values are then parsed, never raw input). */
export function parsedOk(ctx: { issues: ReadonlyArray<{ path?: PropertyKey[] | undefined }> }, ...variables: string[]): boolean {
  return !ctx.issues.some((issue) => variables.includes(String(issue.path?.[0])));
}

export const logLevel = z
  .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
    error: 'must be one of fatal, error, warn, info, debug, trace, silent',
  })
  .default('info');

export const nodeEnv = z
  .enum(['development', 'test', 'production'], { error: 'must be development, test or production' })
  .default('development');

/**
 * A connection URL with the given schemes, checked in ONE transform: an aborting check would mark the
 * whole environment aborted and hide the cross-variable rules (EVEN_WITH_OTHER_PROBLEMS). It must parse
 * (an unbalanced `[`, an unencoded `@` or `#` in the password would otherwise fail at the first
 * connection with a confusing error), and its user, password and path must percent-decode: the clients
 * decode them, and a `%` not followed by two hex digits (or escapes that are not UTF-8) would stop every
 * executable with a bare `URI malformed` naming nothing. The value is never echoed.
 */
function connectionUrl(schemes: RegExp, schemeRule: string) {
  return z.string().transform((raw, ctx) => {
    const fail = (message: string) => {
      ctx.addIssue({ code: 'custom', message });
      return z.NEVER;
    };
    if (!schemes.test(raw)) return fail(schemeRule);
    if (!URL.canParse(raw)) return fail('must be a valid URL (percent-encode special characters in the user and password)');
    const url = new URL(raw);
    for (const [part, value] of [['user', url.username], ['password', url.password], ['path', url.pathname]] as const) {
      try {
        decodeURIComponent(value);
      } catch {
        return fail(`must be a valid URL: its ${part} has a % that does not start a percent-encoding of UTF-8 (two hex digits; write a literal % as %25)`);
      }
    }
    return raw;
  });
}

/** postgres:// URL; optional because an embedded PostgreSQL 18 is used when it is unset. */
export const databaseUrl = connectionUrl(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL').optional();

export const redisUrl = connectionUrl(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL').default('redis://127.0.0.1:6379');
