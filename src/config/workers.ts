// Configuration of the `workers` executable: one zod schema over process.env. Every timing the runtime
// uses is configuration with the spec's value as default, so tests run the same code in seconds.
import { z } from 'zod';
import { DEFAULT_REDIS_COMMAND_TIMEOUT_MS } from '../kv/client.ts';
import {
  DEFAULT_CAPPED_POLL_MS,
  DEFAULT_SQS_REQUEST_TIMEOUT_MS,
  DEFAULT_BACKOFF_BASE_MS,
  DEFAULT_BACKOFF_CAP_MS,
  DEFAULT_HEALTH_PORT,
  DEFAULT_HEARTBEAT_INTERVAL_MS,
  DEFAULT_STAGE_TIMEOUT_MS,
  DEFAULT_IDEMPOTENCY_CACHE_TTL_MS,
  DEFAULT_IDEMPOTENCY_LEASE_MARGIN_MS,
  DEFAULT_IDEMPOTENCY_RETENTION_MS,
  DEFAULT_LOCAL_SCHEDULER_TICK_MS,
  DEFAULT_OUTBOX_MAX_ATTEMPTS,
  DEFAULT_OUTBOX_RETENTION_MS,
  DEFAULT_RELAY_SWEEP_INTERVAL_MS,
  DEFAULT_RESCUE_INTERVAL_MS,
  DEFAULT_RESCUE_MARGIN_MS,
  DEFAULT_RESCUE_MAX,
  DEFAULT_RECEIVE_LINGER_MS,
  DEFAULT_ACK_LINGER_MS,
  DEFAULT_SCHEMA_POLL_INTERVAL_MS,
  DEFAULT_SQS_WAIT_SECONDS,
  DEFAULT_STOP_TIMEOUT_MS,
  DEFAULT_VISIBILITY_SECONDS,
  QUEUE_NAMES,
  SQS_WAIT_SECONDS_MAX,
  SQS_WAIT_SECONDS_MIN,
  STOP_BUDGET_RESERVE_MS,
  minimumPoolSize,
  type QueueName,
} from './limits.ts';
import {
  ConfigError,
  EVEN_WITH_OTHER_PROBLEMS,
  parsedOk,
  booleanFlag,
  databaseUrl,
  integer,
  logLevel,
  nodeEnv,
  parseEnv,
  redisUrl,
  type Env,
} from './parse.ts';

/**
 * Default SVC_TENANT_INFLIGHT_MAX: runs of one tenant sent and not final per queue, chosen with
 * bench/fairness.ts (2026-11-24, 20,000-run burst, 10 slots; victim p99 ms / throughput ratio): cap 30
 * 116–222 / 0.78–0.81 (the relay cannot refill a 20-message margin between 50 ms polls), cap 40
 * 123–134 / 0.93–1.11, cap 50 227–286 / 0.90–1.08.
 */
export const DEFAULT_TENANT_INFLIGHT_MAX = 40;

const QUEUES_RULE = `must be a comma-separated list of distinct queue names among ${QUEUE_NAMES.join(', ')}`;

/** `QUEUES`: required, comma-separated, only the four names, no duplicates. */
export const queues = z
  .string({ error: (issue) => (issue.input === undefined ? `is required; ${QUEUES_RULE}` : QUEUES_RULE) })
  .transform((raw, ctx) => {
    const names = raw.split(',').map((q) => q.trim());
    const known = new Set<string>(QUEUE_NAMES);
    if (names.some((q) => !known.has(q)) || new Set(names).size !== names.length) {
      ctx.addIssue({ code: 'custom', message: QUEUES_RULE });
      return z.NEVER;
    }
    return names as QueueName[];
  });

function httpUrl(rule: string) {
  return z.string().refine(
    (value) => {
      try {
        const url = new URL(value);
        return url.protocol === 'http:' || url.protocol === 'https:';
      } catch {
        return false;
      }
    },
    { error: rule },
  );
}

/** Milliseconds, at least 1. */
const ms = (fallback: number) => integer(1).default(fallback);
/** Seconds, at least 1 and at most 12 hours (the SQS visibility ceiling). */
const visibilitySeconds = (fallback: number) => integer(1, 43_200).default(fallback);

export const workersSchema = z
  .object({
    /** Queues this workers service consumes (required): comma-separated among critical, default, bulk, maintenance. */
    QUEUES: queues,
    /** `true` on exactly one workers service per environment: that one also runs the outbox relay. Default false. */
    SVC_RELAY: booleanFlag.default(false),
    /** `true` fires schedules in-process (development only; refused with NODE_ENV=production). Default false. */
    SVC_LOCAL_SCHEDULER: booleanFlag.default(false),
    /** SQS region. Default us-east-1. */
    SVC_SQS_REGION: z.string().default('us-east-1'),
    /** Queue URL prefix; the queue name is appended. Default: `<SVC_SQS_ENDPOINT>/000000000000/` when an endpoint is set, else required. */
    SVC_SQS_QUEUE_URL_PREFIX: httpUrl('must be an http(s) URL ending with /')
      .refine((v) => v.endsWith('/') || v.endsWith('_') || v.endsWith('-'), {
        error: 'must be an http(s) URL ending with / (or a name separator _ or -)',
      })
      .optional(),
    /** SQS endpoint for a local or non-AWS server, e.g. http://127.0.0.1:9324. Default: unset (AWS endpoint of the region). */
    SVC_SQS_ENDPOINT: httpUrl('must be an http(s) URL').optional(),
    /** `true` uses fixed local credentials instead of the cloud credential chain. Default false. */
    SVC_SQS_LOCAL_CREDENTIALS: booleanFlag.default(false),
    /** How long one SendMessageBatch, ReceiveMessage, DeleteMessageBatch or ChangeMessageVisibility waits for its answer past its long poll, ms, 100 to 600000. Default 10000. */
    SVC_SQS_REQUEST_TIMEOUT_MS: integer(100, 600_000).default(DEFAULT_SQS_REQUEST_TIMEOUT_MS),
    /** `false` sends every SQS call through the SDK instead of the direct fast path (src/queue/direct-calls.ts). Default true. */
    SVC_SQS_DIRECT_CALLS: booleanFlag.default(true),
    /** Long-polling wait in seconds, 1 to 20. Default 20. */
    SVC_SQS_WAIT_SECONDS: integer(SQS_WAIT_SECONDS_MIN, SQS_WAIT_SECONDS_MAX).default(DEFAULT_SQS_WAIT_SECONDS),
    /** Stop budget in ms; the drain gets this minus 5000 and must exceed the long-polling wait. Default 30000. */
    SVC_STOP_TIMEOUT_MS: integer(STOP_BUDGET_RESERVE_MS + 1).default(DEFAULT_STOP_TIMEOUT_MS),
    /** Port of GET /healthz. Default 8081. */
    SVC_HEALTH_PORT: integer(1, 65535).default(DEFAULT_HEALTH_PORT),
    /** Interface of the health port. Default 0.0.0.0 (all, as containers need); npm start sets 127.0.0.1. */
    SVC_HEALTH_HOST: z.string().default('0.0.0.0'),
    /** Database pool size; default and floor are 2 x slots + 2 (see checkPoolSize). Default: the floor. */
    DATABASE_POOL_SIZE: integer(1, 1000).optional(),
    /** PostgreSQL URL. Default: unset, an embedded PostgreSQL 18 under SVC_DATA_DIR is used. */
    DATABASE_URL: databaseUrl,
    /** Data directory of the embedded PostgreSQL (only without DATABASE_URL). Default .data */
    SVC_DATA_DIR: z.string().default('.data'),
    /** Port of the embedded PostgreSQL (only without DATABASE_URL). Default 54329. */
    SVC_EMBEDDED_PG_PORT: integer(1, 65535).default(54329),
    /** Redis URL. Default redis://127.0.0.1:6379 */
    REDIS_URL: redisUrl,
    /** Bound of every Redis command, ms: past it the workers take their database path (gate: ledger; cache: database; wake: sweep). Default 500. */
    SVC_REDIS_COMMAND_TIMEOUT_MS: integer(1, 60_000).default(DEFAULT_REDIS_COMMAND_TIMEOUT_MS),
    /** Path of the file holding this build's newest migration name. Default dist/schema-version.json */
    SVC_SCHEMA_VERSION: z.string().default('dist/schema-version.json'),
    /** Log level. Default info. */
    LOG_LEVEL: logLevel,
    /** development | test | production. Default development. */
    NODE_ENV: nodeEnv,
    /** Visibility timeout of the critical queue, seconds. Default 60. */
    SVC_VISIBILITY_CRITICAL_S: visibilitySeconds(DEFAULT_VISIBILITY_SECONDS.critical),
    /** Visibility timeout of the default queue, seconds. Default 120. */
    SVC_VISIBILITY_DEFAULT_S: visibilitySeconds(DEFAULT_VISIBILITY_SECONDS.default),
    /** Visibility timeout of the bulk queue, seconds. Default 900. */
    SVC_VISIBILITY_BULK_S: visibilitySeconds(DEFAULT_VISIBILITY_SECONDS.bulk),
    /** Visibility timeout of the maintenance queue, seconds. Default 300. */
    SVC_VISIBILITY_MAINTENANCE_S: visibilitySeconds(DEFAULT_VISIBILITY_SECONDS.maintenance),
    /** Interval of the heartbeat that extends visibility of a message in progress, ms. Default 20000. */
    SVC_HEARTBEAT_INTERVAL_MS: ms(DEFAULT_HEARTBEAT_INTERVAL_MS),
    /** `false` when LISTEN cannot hold (a transaction pooler): a running run then learns of its cancel at its heartbeat. Default true. */
    SVC_CANCEL_LISTEN: booleanFlag.default(true),
    /** Deadline of each wait of a delivery outside its handler (connection, BEGIN, checks, registration, COMMIT), ms: past it the message goes back. Default 15000. */
    SVC_STAGE_TIMEOUT_MS: ms(DEFAULT_STAGE_TIMEOUT_MS),
    /** Base of the exponential backoff of transient failures, ms. Default 2000. */
    SVC_BACKOFF_BASE_MS: ms(DEFAULT_BACKOFF_BASE_MS),
    /** Ceiling of that backoff, ms. Default 300000. */
    SVC_BACKOFF_CAP_MS: ms(DEFAULT_BACKOFF_CAP_MS),
    /** Relay outbox sweep interval when no wake signal arrives, ms. Default 5000. */
    SVC_RELAY_SWEEP_INTERVAL_MS: ms(DEFAULT_RELAY_SWEEP_INTERVAL_MS),
    /** Relay: failed sends after which a row the queue refuses itself ends its run failed (OUTBOX_SEND_FAILED); transport errors never do. Default 20. */
    SVC_OUTBOX_MAX_ATTEMPTS: integer(1, 10_000).default(DEFAULT_OUTBOX_MAX_ATTEMPTS),
    /** Idempotency lease = unit timeout + this margin, ms. Default 30000. */
    SVC_IDEMPOTENCY_LEASE_MARGIN_MS: ms(DEFAULT_IDEMPOTENCY_LEASE_MARGIN_MS),
    /** Retention of a finished idempotency result before purge, ms. Default 604800000 (7 days). */
    SVC_IDEMPOTENCY_RETENTION_MS: ms(DEFAULT_IDEMPOTENCY_RETENTION_MS),
    /** TTL of the Redis copy of a finished result (fast replay; the ledger answers after it), ms. Default 3600000 (1 hour). */
    SVC_IDEMPOTENCY_CACHE_TTL_MS: ms(DEFAULT_IDEMPOTENCY_CACHE_TTL_MS),
    /** Retention of sent outbox rows before purge, ms. Default 604800000 (7 days). */
    SVC_OUTBOX_RETENTION_MS: ms(DEFAULT_OUTBOX_RETENTION_MS),
    /** How often workers re-check that the schema holds their newest migration before consuming, ms. Default 5000. */
    SVC_SCHEMA_POLL_INTERVAL_MS: ms(DEFAULT_SCHEMA_POLL_INTERVAL_MS),
    /** Tick of the in-process scheduler (SVC_LOCAL_SCHEDULER=true), ms. Default 1000. */
    SVC_LOCAL_SCHEDULER_TICK_MS: ms(DEFAULT_LOCAL_SCHEDULER_TICK_MS),
    /** Fair share (relay): runs of one tenant sent and not final, per queue; 0 = off (first come, first served). Default 40. */
    SVC_TENANT_INFLIGHT_MAX: integer(0, 100_000).default(DEFAULT_TENANT_INFLIGHT_MAX),
    /**
     * Fair share (relay): a tenant's runs in flight on any queue while no other tenant contends for it; at
     * most SVC_TENANT_INFLIGHT_MAX: the cap holds always. Unset (the default): each queue's own, the
     * messages its units' slots hold at once plus twice SVC_TENANT_INFLIGHT_MAX (loneRoomsOf, docs/fairness.md).
     */
    SVC_TENANT_INFLIGHT_LONE_MAX: integer(0, 100_000).optional(),
    /** `true` sends MessageGroupId (the tenant's uid; `platform`) with each message, for SQS fair queues. Default true. */
    SVC_SQS_FAIR_GROUPS: booleanFlag.default(true),
    /** Fair share (relay): how soon it looks again while the cap holds rows back, ms. Default 50. */
    SVC_RELAY_CAPPED_POLL_MS: ms(DEFAULT_CAPPED_POLL_MS),
    /** Rescuer (beside the relay): pause between its passes, ms. Default 30000. */
    SVC_RESCUE_INTERVAL_MS: ms(DEFAULT_RESCUE_INTERVAL_MS),
    /** Rescuer: margin past a run's window (visibility + unit timeout, or the retry's due) before it is sent again, ms. Default 120000. */
    SVC_RESCUE_MARGIN_MS: ms(DEFAULT_RESCUE_MARGIN_MS),
    /** Rescuer: rescues of one run before it ends failed with RESCUE_LIMIT; 0 gives up at the first loss. Default 5. */
    SVC_RESCUE_MAX: integer(0, 1_000).default(DEFAULT_RESCUE_MAX),
    /** Rescuer: `true` when the queue server starts empty with the workers (npm start's in-memory queue): runs sent before are sent again at once. Default false. */
    SVC_RESCUE_QUEUE_STARTED_EMPTY: booleanFlag.default(false),
    /** How long a receive waits for half a queue's slots to be free, ms; 0 receives at the first free slot. Default 10. */
    SVC_RECEIVE_LINGER_MS: integer(0, 1_000).default(DEFAULT_RECEIVE_LINGER_MS),
    /** How long a settled message's delete waits for others to share its DeleteMessageBatch call, ms; 0: at once. Default 20. */
    SVC_ACK_LINGER_MS: integer(0, 1_000).default(DEFAULT_ACK_LINGER_MS),
  })
  .superRefine((c, ctx) => {
    if (parsedOk(ctx, 'SVC_LOCAL_SCHEDULER', 'NODE_ENV') && c.SVC_LOCAL_SCHEDULER && c.NODE_ENV === 'production') {
      ctx.addIssue({
        code: 'custom',
        path: ['SVC_LOCAL_SCHEDULER'],
        message: 'must not be true when NODE_ENV=production (development only; production has no in-process scheduler)',
      });
    }
    const drainMs = c.SVC_STOP_TIMEOUT_MS - STOP_BUDGET_RESERVE_MS;
    if (parsedOk(ctx, 'SVC_STOP_TIMEOUT_MS', 'SVC_SQS_WAIT_SECONDS') && drainMs <= c.SVC_SQS_WAIT_SECONDS * 1000) {
      ctx.addIssue({
        code: 'custom',
        path: ['SVC_STOP_TIMEOUT_MS'],
        message:
          `the drain window (SVC_STOP_TIMEOUT_MS minus ${STOP_BUDGET_RESERVE_MS} ms) must exceed the long-polling wait ` +
          '(SVC_SQS_WAIT_SECONDS x 1000 ms); raise SVC_STOP_TIMEOUT_MS or lower SVC_SQS_WAIT_SECONDS',
      });
    }
    if (parsedOk(ctx, 'SVC_BACKOFF_CAP_MS', 'SVC_BACKOFF_BASE_MS') && c.SVC_BACKOFF_CAP_MS < c.SVC_BACKOFF_BASE_MS) {
      ctx.addIssue({
        code: 'custom',
        path: ['SVC_BACKOFF_CAP_MS'],
        message: 'must be at least SVC_BACKOFF_BASE_MS',
      });
    }
    if (parsedOk(ctx, 'SVC_SQS_QUEUE_URL_PREFIX', 'SVC_SQS_ENDPOINT') && !c.SVC_SQS_QUEUE_URL_PREFIX && !c.SVC_SQS_ENDPOINT) {
      ctx.addIssue({
        code: 'custom',
        path: ['SVC_SQS_QUEUE_URL_PREFIX'],
        message: 'is required (the queue name is appended to it) unless SVC_SQS_ENDPOINT is set',
      });
    }
  }, EVEN_WITH_OTHER_PROBLEMS)
  .transform((c) => ({
    ...c,
    /** The prefix the queue names are appended to. */
    SVC_SQS_QUEUE_URL_PREFIX: c.SVC_SQS_QUEUE_URL_PREFIX ?? `${c.SVC_SQS_ENDPOINT!.replace(/\/+$/, '')}/000000000000/`,
    /** Drain window of a shutdown: the stop budget minus the reserve. */
    drainMs: c.SVC_STOP_TIMEOUT_MS - STOP_BUDGET_RESERVE_MS,
    /** Visibility timeout per queue, seconds. */
    visibilitySeconds: visibilityByQueue(c),
  }));

export type WorkersConfig = z.infer<typeof workersSchema>;

/** The visibility timeout of each queue, seconds, from its SVC_VISIBILITY_*_S variable. */
export function visibilityByQueue(c: {
  SVC_VISIBILITY_CRITICAL_S: number;
  SVC_VISIBILITY_DEFAULT_S: number;
  SVC_VISIBILITY_BULK_S: number;
  SVC_VISIBILITY_MAINTENANCE_S: number;
}): Record<QueueName, number> {
  return { critical: c.SVC_VISIBILITY_CRITICAL_S, default: c.SVC_VISIBILITY_DEFAULT_S, bulk: c.SVC_VISIBILITY_BULK_S, maintenance: c.SVC_VISIBILITY_MAINTENANCE_S };
}

/** The variables `svc runs list --stuck` reads to judge runs as the rescuer does (visibility per queue, rescue margin). */
const overdueSchema = z.object({
  SVC_VISIBILITY_CRITICAL_S: visibilitySeconds(DEFAULT_VISIBILITY_SECONDS.critical),
  SVC_VISIBILITY_DEFAULT_S: visibilitySeconds(DEFAULT_VISIBILITY_SECONDS.default),
  SVC_VISIBILITY_BULK_S: visibilitySeconds(DEFAULT_VISIBILITY_SECONDS.bulk),
  SVC_VISIBILITY_MAINTENANCE_S: visibilitySeconds(DEFAULT_VISIBILITY_SECONDS.maintenance),
  SVC_RESCUE_MARGIN_MS: ms(DEFAULT_RESCUE_MARGIN_MS),
});

/** Visibility per queue and the rescue margin from the environment (defaults as the workers'); throws ConfigError. */
export function overdueConfig(env: Env): { visibilitySeconds: Record<QueueName, number>; marginMs: number } {
  const c = parseEnv('runs', overdueSchema, env);
  return {
    visibilitySeconds: {
      critical: c.SVC_VISIBILITY_CRITICAL_S,
      default: c.SVC_VISIBILITY_DEFAULT_S,
      bulk: c.SVC_VISIBILITY_BULK_S,
      maintenance: c.SVC_VISIBILITY_MAINTENANCE_S,
    },
    marginMs: c.SVC_RESCUE_MARGIN_MS,
  };
}


/** Parses the workers' environment; throws ConfigError naming every bad variable. */
export function workersConfig(env: Env): WorkersConfig {
  return parseEnv('workers', workersSchema, env);
}

/**
 * The effective database pool size once the catalog is known: `slots` is the sum of `concurrency` of the
 * units on the consumed queues. Unset means the floor 2 x slots + 2; a smaller value refuses to boot.
 */
export function checkPoolSize(poolSize: number | undefined, slots: number): number {
  const floor = minimumPoolSize(slots);
  if (poolSize === undefined) return floor;
  if (poolSize < floor) {
    throw new ConfigError('workers', [
      {
        variable: 'DATABASE_POOL_SIZE',
        rule: `must be at least ${floor} (2 x ${slots} slots + 2: the sum of concurrency of the units on QUEUES); raise it or consume fewer queues`,
      },
    ]);
  }
  return poolSize;
}
