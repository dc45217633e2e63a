// `svc workers`: the workers executable. Reads the environment, discovers the units, refuses to boot
// when the pool is smaller than 2 x slots + 2 (or on any bad variable, including SVC_LOCAL_SCHEDULER
// in production), then consumes QUEUES once the database holds this build's newest migration. On
// SIGTERM/SIGINT it drains for SVC_STOP_TIMEOUT_MS minus 5 s and releases what is unfinished.
import os from 'node:os';
import path from 'node:path';
import { checkPoolSize, workersConfig } from '../config/workers.ts';
import { STOP_CLOSE_RESERVE_MS } from '../config/limits.ts';
import { readSchemaVersion } from '../config/schema-version.ts';
import { resolveDatabase } from '../db/connect.ts';
import { createSql } from '../db/client.ts';
import { createRedis } from '../kv/client.ts';
import { createLogger } from '../logging/logger.ts';
import { createSqsClient } from '../queue/client.ts';
import { sqsSettings } from '../queue/config.ts';
import { startTracing } from '../observe/tracing.ts';
import { loadUnits } from '../work/catalog.ts';
import { slotsForQueues, startWorkerRuntime } from '../work/runtime/worker-runtime.ts';
import { loneRoomsOf } from '../work/runtime/produce/tenant-inflight.ts';
import { stopSignal } from './stop-signal.ts';
import { missingWorkersNodeFlags } from './workers-node-flags.ts';

const PROJECT_ROOT = path.resolve(import.meta.dirname, '..', '..');

export async function run(args: string[]): Promise<number> {
  if (args.length > 0) {
    console.error('usage: svc workers   (configured by environment variables: QUEUES, SVC_RELAY, SVC_SQS_*, ...)');
    return 2;
  }
  // Listen for SIGTERM/SIGINT before anything slow (unit discovery, database): a stop that arrives
  // while booting is honoured once the runtime is up, instead of killing the process mid-boot.
  const stopping = stopSignal();
  // A bad variable throws ConfigError: the CLI prints one message naming every variable and exits 1.
  const config = workersConfig(process.env);
  const logger = createLogger({ level: config.LOG_LEVEL, base: { service: 'workers' } });
  const missingFlags = missingWorkersNodeFlags(process.execArgv, process.env.NODE_OPTIONS);
  if (missingFlags.length > 0) {
    logger.warn({ missing: missingFlags }, 'the workers were started without their node flags (README, Deploying): longer GC pauses for the runs in flight');
  }
  // Spans go nowhere unless the OTEL_* variables name an exporter (src/observe/tracing.ts).
  const tracing = startTracing(process.env, { serviceName: 'svc-workers' });
  const latestMigration = readSchemaVersion(config.SVC_SCHEMA_VERSION);
  // SVC_UNITS_DIR lets tests and tools run other units; the image runs the build's units/.
  const units = await loadUnits(process.env.SVC_UNITS_ROOT ?? PROJECT_ROOT, { dir: process.env.SVC_UNITS_DIR ?? 'units' });
  const slots = slotsForQueues(units.values(), config.QUEUES);
  // Boot refusal: each slot may hold an effect and a registration transaction, plus relay and scheduler.
  const poolSize = checkPoolSize(config.DATABASE_POOL_SIZE, slots);

  const database = await resolveDatabase(
    { DATABASE_URL: config.DATABASE_URL, SVC_DATA_DIR: config.SVC_DATA_DIR, SVC_EMBEDDED_PG_PORT: String(config.SVC_EMBEDDED_PG_PORT) },
    (line) => logger.info(line),
  );
  const sql = createSql(database.url, { max: poolSize, applicationName: 'svc-workers' });
  // Auto-pipelined: the gates and cache evictions of one receive's deliveries go out in one write
  // (redis-server CPU per run −35 % in bench/results/hot-path-levers-2026-11-24.md). This
  // connection never blocks: the relay's wake wait duplicates it without auto-pipelining.
  const redis = createRedis(config.REDIS_URL, { name: 'svc-workers', autoPipelining: true, commandTimeoutMs: config.SVC_REDIS_COMMAND_TIMEOUT_MS });
  // Redis is never authoritative: while it is down the workers run on the database ledger alone.
  redis.on('error', (error: Error) => logger.warn({ reason: error.message }, 'redis unavailable'));
  const sqsConfig = sqsSettings(config);
  const sqs = createSqsClient(sqsConfig);

  // After a stop what is still waiting on the database was abandoned (the runtime's stop is bounded):
  // the pool ends within the close reserve of the stop budget, not the 5 s a failed boot allows.
  const closeConnections = async (endTimeoutSeconds = 5) => {
    sqs.destroy();
    await sql.end({ timeout: endTimeoutSeconds });
    redis.disconnect();
    await database.stop();
    await tracing.shutdown();
  };

  // A failed start (the health port taken, say) must still close the pool, Redis and the embedded
  // PostgreSQL: Redis' reconnect loop would otherwise keep the process alive after the error line.
  const runtime = await startWorkerRuntime({
    sql,
    redis,
    sqs,
    queueUrlPrefix: sqsConfig.queueUrlPrefix,
    queues: config.QUEUES,
    units,
    logger,
    workerInstance: `${os.hostname()}:${process.pid}`,
    visibilitySeconds: config.visibilitySeconds,
    heartbeatIntervalMs: config.SVC_HEARTBEAT_INTERVAL_MS,
    cancelListen: config.SVC_CANCEL_LISTEN,
    stageTimeoutMs: config.SVC_STAGE_TIMEOUT_MS,
    waitSeconds: config.SVC_SQS_WAIT_SECONDS,
    receiveLingerMs: config.SVC_RECEIVE_LINGER_MS,
    ackLingerMs: config.SVC_ACK_LINGER_MS,
    drainMs: config.drainMs,
    stopTimeoutMs: config.SVC_STOP_TIMEOUT_MS,
    leaseMarginMs: config.SVC_IDEMPOTENCY_LEASE_MARGIN_MS,
    retentionMs: config.SVC_IDEMPOTENCY_RETENTION_MS,
    cacheTtlMs: config.SVC_IDEMPOTENCY_CACHE_TTL_MS,
    // The relay may run in another process with the same setting: these workers wake it when it is capped.
    roomSignals: config.SVC_TENANT_INFLIGHT_MAX > 0,
    backoff: { baseMs: config.SVC_BACKOFF_BASE_MS, capMs: config.SVC_BACKOFF_CAP_MS },
    latestMigration,
    schemaPollIntervalMs: config.SVC_SCHEMA_POLL_INTERVAL_MS,
    healthHost: config.SVC_HEALTH_HOST,
    relay: config.SVC_RELAY
      ? {
          sweepIntervalMs: config.SVC_RELAY_SWEEP_INTERVAL_MS,
          tenantInflightMax: config.SVC_TENANT_INFLIGHT_MAX,
          // Unset: each queue's lone room from the units that consume it (docs/fairness.md).
          tenantInflightLoneMax: config.SVC_TENANT_INFLIGHT_LONE_MAX ?? loneRoomsOf(units.values(), config.SVC_TENANT_INFLIGHT_MAX),
          fairGroups: config.SVC_SQS_FAIR_GROUPS,
          cappedPollMs: config.SVC_RELAY_CAPPED_POLL_MS,
          maxAttempts: config.SVC_OUTBOX_MAX_ATTEMPTS,
          rescue: {
            intervalMs: config.SVC_RESCUE_INTERVAL_MS,
            marginMs: config.SVC_RESCUE_MARGIN_MS,
            maxRescues: config.SVC_RESCUE_MAX,
            queueStartedEmpty: config.SVC_RESCUE_QUEUE_STARTED_EMPTY,
          },
        }
      : null,
    localScheduler: config.SVC_LOCAL_SCHEDULER ? { tickMs: config.SVC_LOCAL_SCHEDULER_TICK_MS } : null,
    healthPort: config.SVC_HEALTH_PORT,
    redisTimeoutMs: config.SVC_REDIS_COMMAND_TIMEOUT_MS,
  }).catch(async (error: unknown) => {
    await closeConnections();
    throw error;
  });
  logger.info({ queues: config.QUEUES, slots, poolSize, healthPort: runtime.healthPort, latestMigration }, 'workers started');
  try {
    const signal = await stopping;
    logger.info({ signal, drainMs: config.drainMs }, 'stopping: no new messages, draining work in flight');
    await runtime.stop();
  } finally {
    await closeConnections(STOP_CLOSE_RESERVE_MS / 1000 / 4);
  }
  return 0;
}
