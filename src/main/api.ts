// `svc api`: the HTTP API executable. The only module of the API that reads process.env, listens and
// handles signals. It never applies migrations (the migrator does) and never talks to the queue.
import { apiConfig } from '../config/api.ts';
import { readSchemaVersion } from '../config/schema-version.ts';
import { resolveDatabase } from '../db/connect.ts';
import { createSql } from '../db/client.ts';
import { createRedis } from '../kv/client.ts';
import { createLogger } from '../logging/logger.ts';
import { noSessionResolver, type SessionResolver } from '../auth/session-resolver.ts';
import { buildApp, httpSettings } from '../http/app.ts';
import { startMetricsServer } from '../observe/metrics-server.ts';
import { startTracing } from '../observe/tracing.ts';
import { loadCatalog } from '../work/catalog.ts';
import { catalogDispatcher } from '../work/runtime/produce/catalog-dispatcher.ts';
import { stopSignal } from './stop-signal.ts';

export async function run(args: string[]): Promise<number> {
  if (args.length > 0) {
    console.error('usage: svc api   (configured by environment variables; see the README)');
    return 2;
  }
  // Login is being rebuilt: production resolves no session, so every protected route answers 401.
  return serveApi(process.env, noSessionResolver);
}

/**
 * Builds and serves the API until SIGTERM/SIGINT. The session resolver is a parameter so the
 * end-to-end test can run this same executable code with its test resolver (test/fixtures/).
 */
export async function serveApi(env: NodeJS.ProcessEnv, resolver: SessionResolver): Promise<number> {
  // Listen for SIGTERM/SIGINT first: a stop arriving while booting is honoured once the API is up.
  const stopping = stopSignal();
  // A bad or missing variable throws ConfigError here: the CLI prints one message and exits 1.
  const config = apiConfig(env);
  const logger = createLogger({ level: config.LOG_LEVEL, base: { service: 'api' } });
  // Spans go nowhere unless the OTEL_* variables name an exporter (src/observe/tracing.ts).
  const tracing = startTracing(env, { serviceName: 'svc-api' });
  const latestMigration = readSchemaVersion(config.SVC_SCHEMA_VERSION);
  // The API does not start without the work-unit catalog.
  const catalog = loadCatalog(config.SVC_TASKS_CATALOG);
  // Use cases dispatch and publish through the catalog: the API never imports unit code.
  const dispatcher = catalogDispatcher(catalog);

  const database = await resolveDatabase(
    { DATABASE_URL: config.DATABASE_URL, SVC_DATA_DIR: config.SVC_DATA_DIR, SVC_EMBEDDED_PG_PORT: String(config.SVC_EMBEDDED_PG_PORT) },
    (line) => logger.info(line),
  );
  const sql = createSql(database.url, { max: config.DATABASE_POOL_SIZE, applicationName: 'svc-api' });
  const redis = createRedis(config.REDIS_URL, { name: 'svc-api', autoPipelining: true });
  // Redis is not authoritative: while it is down the API answers from the database and /ready says so.
  redis.on('error', (error: Error) => logger.warn({ reason: error.message }, 'redis unavailable'));

  const app = await buildApp({
    sql,
    redis,
    resolver,
    catalog,
    dispatcher,
    latestMigration,
    config: httpSettings(config),
    logger,
  });
  // GET /metrics on its own port, so the public port never exposes it. A taken port fails the boot.
  const metrics = await startMetricsServer({ port: config.SVC_API_METRICS_PORT, host: config.SVC_API_HOST }).catch(async (error: unknown) => {
    await app.close();
    await sql.end({ timeout: 5 });
    redis.disconnect();
    await database.stop();
    throw error;
  });
  try {
    await app.listen({ port: config.SVC_API_PORT, host: config.SVC_API_HOST });
    logger.info({ latestMigration, port: config.SVC_API_PORT, metricsPort: metrics.port, traces: tracing.exporter }, 'api listening');
    const signal = await stopping;
    logger.info({ signal }, 'stopping: closing the listener and finishing requests in flight');
  } finally {
    // close() stops accepting connections and waits for requests in flight before resolving.
    await app.close();
    await metrics.close();
    await sql.end({ timeout: 5 });
    redis.disconnect();
    await database.stop();
    await tracing.shutdown();
  }
  logger.info('api stopped');
  return 0;
}
