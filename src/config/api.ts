// Configuration of the `api` executable: one zod schema over process.env. src/main/api.ts is the only
// caller; everything else receives the parsed object. See parse.ts for how failures are reported.
import { z } from 'zod';
import { parse as parseHost } from 'tldts';
import { DEFAULT_API_PORT } from './limits.ts';
import {
  EVEN_WITH_OTHER_PROBLEMS,
  booleanFlag,
  databaseUrl,
  integer,
  logLevel,
  nodeEnv,
  parseEnv,
  parsedOk,
  redisUrl,
  type Env,
} from './parse.ts';

/**
 * True when `value` is exactly an origin as browsers send it in `Origin`: `scheme://host[:port]`, http or
 * https, lowercase host, no default port, no path, no trailing slash, no credentials, no wildcard.
 */
export function isExactOrigin(value: string): boolean {
  if (value.includes('*')) return false;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
  // URL normalizes case, default ports and adds '/' as path: any difference means the input was not exact.
  return url.origin === value;
}

const ORIGIN_RULE =
  'must be a comma-separated list of exact origins scheme://host[:port] (http or https, lowercase, no path, no trailing slash, no wildcard)';

/** `CORS_ORIGINS`: a comma-separated list of exact origins; empty (the default) means none. */
export const corsOrigins = z
  .string()
  .default('')
  .transform((raw, ctx) => {
    const origins = raw
      .split(',')
      .map((o) => o.trim())
      .filter((o) => o.length > 0);
    if (origins.some((o) => !isExactOrigin(o))) {
      ctx.addIssue({ code: 'custom', message: ORIGIN_RULE });
      return z.NEVER;
    }
    return [...new Set(origins)];
  });

const COOKIE_DOMAIN_RULE =
  'must be a plain lowercase host name with at least two labels (like app.example.org) that is not a public suffix';

/** Why `value` may not be the session cookie Domain, or undefined when it may. */
export function cookieDomainProblem(value: string): string | undefined {
  const label = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
  if (!new RegExp(`^${label}(?:\\.${label})+$`).test(value)) return COOKIE_DOMAIN_RULE;
  // No top-level domain is all digits: `1.2.3.4.5` is neither a host name nor an IP address.
  if (/^[0-9]+$/.test(value.slice(value.lastIndexOf('.') + 1))) return COOKIE_DOMAIN_RULE;
  // The public-suffix list (ICANN and private sections) decides, never a hand-written list.
  const host = parseHost(value, { allowPrivateDomains: true });
  if (host.isIp || host.domain === null || host.publicSuffix === value) return COOKIE_DOMAIN_RULE;
  return undefined;
}

/** `SESSION_COOKIE_DOMAIN`: optional Domain for the session cookie (then named `__Secure-svc_session`). */
export const sessionCookieDomain = z
  .string()
  .optional()
  .superRefine((value, ctx) => {
    if (value === undefined) return;
    const problem = cookieDomainProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

export const apiSchema = z
  .object({
    /** Port the API listens on. Default 3000. */
    SVC_API_PORT: integer(1, 65535).default(DEFAULT_API_PORT),
    /** Interface the API binds. Default 0.0.0.0 (all interfaces, as containers need). */
    SVC_API_HOST: z.string().default('0.0.0.0'),
    /** Port of the API's GET /metrics (never the public port), on SVC_API_HOST. 0 picks a free one. Default 9464. */
    SVC_API_METRICS_PORT: integer(0, 65535).default(9464),
    /** PostgreSQL URL. Default: unset, an embedded PostgreSQL 18 under SVC_DATA_DIR is used. */
    DATABASE_URL: databaseUrl,
    /** Pool size of the API's database connections. Default 10. */
    DATABASE_POOL_SIZE: integer(1, 1000).default(10),
    /** Data directory of the embedded PostgreSQL (only without DATABASE_URL). Default .data */
    SVC_DATA_DIR: z.string().default('.data'),
    /** Port of the embedded PostgreSQL (only without DATABASE_URL). Default 54329. */
    SVC_EMBEDDED_PG_PORT: integer(1, 65535).default(54329),
    /** Redis URL. Default redis://127.0.0.1:6379 */
    REDIS_URL: redisUrl,
    /** Path of the work-unit catalog the API loads; it does not start without it. Default dist/tasks.json */
    SVC_TASKS_CATALOG: z.string().default('dist/tasks.json'),
    /** Path of the file holding this build's newest migration name. Default dist/schema-version.json */
    SVC_SCHEMA_VERSION: z.string().default('dist/schema-version.json'),
    /** Exact origins allowed by CORS and by the cookie-write origin check. Default empty (none). */
    CORS_ORIGINS: corsOrigins,
    /** Send Access-Control-Allow-Credentials; needs CORS_ORIGINS. Default false. */
    CORS_CREDENTIALS: booleanFlag.default(false),
    /** Domain of the session cookie for a neighbouring host. Default unset (host-only `__Host-` cookie). */
    SESSION_COOKIE_DOMAIN: sessionCookieDomain,
    /** The whole request (headers and body) must arrive within this, else 408, ms. Default 30000. */
    SVC_HTTP_REQUEST_TIMEOUT_MS: integer(1).default(30_000),
    /** A connection silent this long (no byte either way) is closed, ms. Default 120000. */
    SVC_HTTP_IDLE_TIMEOUT_MS: integer(1).default(120_000),
    /** An idle kept-alive connection between requests is closed after this, ms. Default 72000. */
    SVC_HTTP_KEEP_ALIVE_TIMEOUT_MS: integer(1).default(72_000),
    /** Log level. Default info. */
    LOG_LEVEL: logLevel,
    /** development | test | production. Default development. */
    NODE_ENV: nodeEnv,
  })
  .superRefine((config, ctx) => {
    if (parsedOk(ctx, 'CORS_CREDENTIALS', 'CORS_ORIGINS') && config.CORS_CREDENTIALS && config.CORS_ORIGINS.length === 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['CORS_CREDENTIALS'],
        message: 'true needs at least one exact origin in CORS_ORIGINS; set CORS_ORIGINS or set CORS_CREDENTIALS=false',
      });
    }
  }, EVEN_WITH_OTHER_PROBLEMS);

export type ApiConfig = z.infer<typeof apiSchema>;

/** Parses the API's environment; throws ConfigError naming every bad variable. */
export function apiConfig(env: Env): ApiConfig {
  return parseEnv('api', apiSchema, env);
}
