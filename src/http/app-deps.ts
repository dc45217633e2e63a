// What buildApp is built from: the HTTP part of the API configuration and the dependencies the routes
// share. Apart from app.ts so a route module can name them without importing the app that registers it.
import type { Logger } from 'pino';
import type { Redis } from 'ioredis';
import type { SessionResolver } from '../auth/session-resolver.ts';
import type { ApiConfig } from '../config/api.ts';
import type { Sql } from '../db/client.ts';
import type { Catalog } from '../work/catalog.ts';
import type { Dispatcher } from '../work/runtime/produce/dispatch.ts';
import type { HttpTimeouts } from './http-server-options.ts';

/** The work-unit catalog (tasks.json) loaded from SVC_TASKS_CATALOG; the API finds subscribers through it. */
export type ApiCatalog = Catalog;

/** The HTTP-relevant part of the API configuration. */
export interface HttpSettings {
  /** CORS_ORIGINS: feeds CORS and the cookie-write origin check. */
  corsOrigins: readonly string[];
  /** CORS_CREDENTIALS. */
  corsCredentials: boolean;
  /** SESSION_COOKIE_DOMAIN, already validated. */
  sessionCookieDomain?: string | undefined;
  /** Bound of each readiness probe. Default READINESS_PROBE_TIMEOUT_MS. */
  readinessTimeoutMs?: number;
  /** Request, idle and keep-alive timeouts. Default DEFAULT_HTTP_TIMEOUTS. */
  timeouts?: Partial<HttpTimeouts>;
}

export function httpSettings(config: ApiConfig): HttpSettings {
  return {
    corsOrigins: config.CORS_ORIGINS,
    corsCredentials: config.CORS_CREDENTIALS,
    sessionCookieDomain: config.SESSION_COOKIE_DOMAIN,
    timeouts: {
      requestMs: config.SVC_HTTP_REQUEST_TIMEOUT_MS,
      idleMs: config.SVC_HTTP_IDLE_TIMEOUT_MS,
      keepAliveMs: config.SVC_HTTP_KEEP_ALIVE_TIMEOUT_MS,
    },
  };
}

export interface AppDeps {
  sql: Sql;
  redis: Redis;
  resolver: SessionResolver;
  catalog: ApiCatalog;
  /** The use cases' dispatcher; default `catalogDispatcher(catalog)`. */
  dispatcher?: Dispatcher;
  /** Newest migration name of this build (from SVC_SCHEMA_VERSION). */
  latestMigration: string;
  config: HttpSettings;
  /** A pino logger, or false for none. */
  logger: Logger | false;
}

