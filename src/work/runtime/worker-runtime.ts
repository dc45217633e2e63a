// The workers process, built from explicit dependencies (main/workers.ts reads the environment):
// one consumer set per queue in QUEUES, the outbox relay when asked, the local scheduler when asked,
// and the health endpoint. Nothing consumes until the database holds the build's newest migration.
//
// Shutdown (stop): stop fetching and report not ready, wait for in-flight work up to the drain window
// (SVC_STOP_TIMEOUT_MS minus 5 s), then release what is still running: its run goes back to `queued`
// with `released_on_shutdown` and its message becomes visible at once.
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Sql } from '../../db/client.ts';
import { DEFAULT_VISIBILITY_SECONDS, dlqUrl, queueUrl, type QueueName } from '../../queue/names.ts';
import { observeRegisteredUnits } from '../../observe/delivery-metrics.ts';
import { watchReceives } from '../../queue/receive-watch.ts';
import type { BackoffOptions } from './complete/backoff.ts';
import { createQueueConsumer, type QueueConsumer } from './consume/consumer.ts';
import { defaultInstanceLabel } from './produce/dispatch.ts';
import { startHealthServer, type HealthServer, type HealthState } from './health-server.ts';
import { watchRedis } from '../../kv/redis-health.ts';
import { startRelay, type Relay } from './produce/relay.ts';
import type { LoneRoom } from './produce/tenant-inflight.ts';
import { DEFAULT_RESCUE_MARGIN_MS, queueStartInstant, startRescuer, type Rescuer } from './maintain/rescuer.ts';
import { FinishCoalescer, GroupCommits, StartCoalescer, type RunnerDeps } from './consume/runner.ts';
import { startLocalScheduler, type LocalScheduler } from './maintain/scheduler.ts';
import { schemaHolds } from './schema-gate.ts';
import { databaseIdentityOf } from '../../kv/database-identity.ts';
import { SlotLimit } from './consume/slot-limit.ts';
import { listenForCancels } from './execute/cancel-notices.ts';
import { listenForSerialTurns } from './execute/serial-turn.ts';
import { StageWatch } from './consume/stage-watch.ts';
import { DEFAULT_STAGE_TIMEOUT_MS, STOP_BUDGET_RESERVE_MS, STOP_CLOSE_RESERVE_MS } from '../../config/limits.ts';
import { settledOrPast } from '../../db/stage-deadline.ts';
import { TenantSlots } from './consume/tenant-slots.ts';
import { RateLimits } from './consume/rate-limit.ts';
import { messagesPerUnit, type WorkUnit } from '../define/unit.ts';

export interface WorkerRuntimeOptions {
  sql: Sql;
  /** Gate, cache and wake signal; the workers run without it (database only). */
  redis?: Redis | undefined;
  sqs: SQSClient;
  /** SVC_SQS_QUEUE_URL_PREFIX: queue URL = prefix + queue name. */
  queueUrlPrefix: string;
  /** QUEUES: the queues this process consumes. */
  queues: readonly QueueName[];
  /** Every unit of the build, by name. */
  units: ReadonlyMap<string, WorkUnit>;
  logger: Logger;
  /** Names this process in the trail. Default `<hostname>:<pid>`. */
  workerInstance?: string;
  /** Visibility timeout per queue, seconds. Default the spec's (60, 120, 900, 300). */
  visibilitySeconds?: Partial<Record<QueueName, number>>;
  /** Heartbeat interval, ms. Default 20000. */
  heartbeatIntervalMs?: number;
  /** Deadline of each wait of a delivery outside its handler, ms (SVC_STAGE_TIMEOUT_MS). Default 15000. */
  stageTimeoutMs?: number;
  /** Long-polling wait, seconds. Default 20. */
  waitSeconds?: number;
  /** How long a receive waits for half a queue's slots to be free, ms (SVC_RECEIVE_LINGER_MS). Default 10. */
  receiveLingerMs?: number;
  /** How long a settled message's delete waits for others to share its DeleteMessageBatch call, ms (SVC_ACK_LINGER_MS). Default 20. */
  ackLingerMs?: number;
  /** Drain window of a shutdown, ms (SVC_STOP_TIMEOUT_MS minus 5000). Default 25000. */
  drainMs?: number;
  /** The whole stop budget, ms (SVC_STOP_TIMEOUT_MS). Default the drain window plus 5000. */
  stopTimeoutMs?: number;
  /** Idempotency lease margin over the unit timeout, ms. Default 30000. */
  leaseMarginMs?: number;
  /** How long a handler runs before a registration deferred to its finish is written on its own, ms (tests). Default 100. */
  runningVisibleAfterMs?: number;
  /** Retention of finished idempotency keys, ms. Default 7 days. */
  retentionMs?: number;
  /** TTL of the Redis copy of a finished result, ms. Default 1 hour. */
  cacheTtlMs?: number;
  backoff?: BackoffOptions;
  /** Receives before the permanent path. Default 5. */
  maxReceives?: number;
  /** The build's newest migration; consuming waits until the database holds it. Null: no gate. */
  latestMigration?: string | null;
  /** How often the schema is re-checked while waiting, ms. Default 5000. */
  schemaPollIntervalMs?: number;
  /**
   * Each success wakes a relay whose fairness cap holds rows back (src/kv/wake.ts signalRoom): set when
   * SVC_TENANT_INFLIGHT_MAX > 0, wherever the relay runs. Default: whether this process's relay is fair.
   */
  roomSignals?: boolean;
  /** Runs the outbox relay in this process (SVC_RELAY=true). */
  relay?: { sweepIntervalMs?: number; tenantInflightMax?: number; tenantInflightLoneMax?: LoneRoom; fairGroups?: boolean; cappedPollMs?: number; maxAttempts?: number; rescue?: RescueSettings | null } | null;
  /** Fires schedules in-process (SVC_LOCAL_SCHEDULER=true). */
  localScheduler?: { tickMs: number } | null;
  /** Interval of the Redis probe that switches the workers to their database paths while Redis hangs or is down, ms. Default 1000. */
  redisProbeIntervalMs?: number;
  /** Bound of one Redis probe and of the relay's wake wait beyond its block time, ms (SVC_REDIS_COMMAND_TIMEOUT_MS). Default 500. */
  redisTimeoutMs?: number;
  /**
   * Listen for operators' cancels (LISTEN svc_run_cancelled, one connection outside the pool) so a
   * running handler is aborted at once; off (behind a transaction pooler, where LISTEN does not hold),
   * a cancel is seen at the next heartbeat poll. Default true.
   */
  cancelListen?: boolean;
  /** Port of /healthz and /readyz; 0 picks a free one; null serves none. Default null. */
  healthPort?: number | null;
  healthHost?: string;
}

/** The rescuer beside the relay (src/work/runtime/maintain/rescuer.ts); null turns it off. */
export interface RescueSettings {
  /** Pause between passes, ms (SVC_RESCUE_INTERVAL_MS). Default 30000. */
  intervalMs?: number;
  /** Margin added to every run's window, ms (SVC_RESCUE_MARGIN_MS). Default 120000. */
  marginMs?: number;
  /** Rescues of one run before it ends failed with RESCUE_LIMIT (SVC_RESCUE_MAX). Default 5. */
  maxRescues?: number;
  /** The queue server started empty with this process (SVC_RESCUE_QUEUE_STARTED_EMPTY, npm start): runs sent before are rescued at once. Default false. */
  queueStartedEmpty?: boolean;
}

export interface WorkerRuntime {
  state(): HealthState;
  /** The bound health port, when served. */
  readonly healthPort: number | null;
  /** Resolves once consumers run (the schema gate is passed). */
  readonly consuming: Promise<void>;
  /** Graceful stop: drain, release, close what this runtime opened (not sql/redis/sqs). */
  stop(): Promise<void>;
  /** Messages received and not yet settled, over all queues. */
  inFlight(): number;
  /** True while a receive (a long poll) is under way on some consumed queue. */
  polling(): boolean;
}

/**
 * The slots of the consumed queues: per queue the sum of the concurrency of its units, and at least 1
 * (a queue without units still takes one message at a time, so messages for unknown units are
 * dead-lettered). Every delivery that opens transactions runs in a slot (a `groupCommit` unit's
 * deliveries in the slots its groups take, src/work/runtime/execute/group-commit.ts), so a pool sized to the
 * pool rule's count of these can always give every slot its two transactions.
 */
export function slotsForQueues(units: Iterable<WorkUnit>, queues: readonly string[]): number {
  const list = [...units];
  let slots = 0;
  for (const queue of queues) slots += sumOverQueue(list, queue, (unit) => unit.concurrency);
  return slots;
}

/** The sum of `amount` over the units of one queue, and at least 1: a queue without units still takes one message at a time. */
function sumOverQueue(units: Iterable<WorkUnit>, queue: string, amount: (unit: WorkUnit) => number): number {
  let sum = 0;
  for (const unit of units) if (unit.queue === queue) sum += amount(unit);
  return Math.max(1, sum);
}

/** Messages the consumer of one queue holds at once: the sum over its units (at least 1, as its slots). */
export function messagesForQueue(units: Iterable<WorkUnit>, queue: string): number {
  return sumOverQueue(units, queue, messagesPerUnit);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export async function startWorkerRuntime(o: WorkerRuntimeOptions): Promise<WorkerRuntime> {
  const log = o.logger;
  const workerInstance = (o.workerInstance ?? defaultInstanceLabel()).slice(0, 128);
  const release = new AbortController();
  // Aborted when the drain begins: a group still waiting for its unit's slot goes back to the queue.
  const stopping = new AbortController();
  const units = [...o.units.values()];
  const consumed = units.filter((u) => o.queues.includes(u.queue));
  // What the consumer takes per message (messagesPerUnit); a groupCommit unit's groups take its slots
  // in GroupCommits (a group runs its handlers one after another, in one slot).
  const unitSlots = new Map<string, SlotLimit>();
  for (const unit of consumed) unitSlots.set(unit.name, new SlotLimit(messagesPerUnit(unit)));
  // A tenant's share of a unit's slots (tenantConcurrency): over it, a message goes back delayed.
  const tenantSlots = TenantSlots.forUnits(consumed);

  // While Redis hangs or is down, the runner gets no client at all: its gate, cache and wake take
  // their database paths at once instead of paying the command timeout on every call.
  const redisHealth = o.redis ? watchRedis(o.redis, { intervalMs: o.redisProbeIntervalMs, timeoutMs: o.redisTimeoutMs, logger: log }) : undefined;
  const usableRedis = () => (redisHealth?.up ? o.redis : undefined);
  // Units' rate limits (rateLimit): shared windows in Redis while it answers, else in the database.
  const rateLimits = RateLimits.forUnits(consumed, { sql: o.sql, redis: usableRedis, logger: log });
  // Pushed cancels (src/work/runtime/execute/cancel-notices.ts); the heartbeat poll is the fallback.
  const cancelNotices = o.cancelListen === false ? undefined : listenForCancels(o.sql, log);
  // Turn notices of serial keys, on the same LISTEN connection: a run near the front of its key's line
  // waits here for them (src/work/runtime/execute/serial-turn.ts); without, it waits in the queue.
  const serialTurns =
    o.cancelListen === false || !consumed.some((unit) => unit.kind === 'task' && unit.serialKey) ? undefined : listenForSerialTurns(o.sql, log);
  const runner: RunnerDeps = {
    sql: o.sql,
    get redis() {
      return usableRedis();
    },
    units: o.units,
    workerInstance,
    logger: log,
    leaseMarginMs: o.leaseMarginMs ?? 30_000,
    runningVisibleAfterMs: o.runningVisibleAfterMs,
    retentionMs: o.retentionMs ?? 7 * 86_400_000,
    cacheTtlMs: o.cacheTtlMs,
    roomSignals: o.roomSignals ?? (o.relay?.tenantInflightMax ?? 0) > 0,
    backoff: o.backoff ?? {},
    maxReceives: o.maxReceives,
    releaseSignal: release.signal,
    // A cancel is pushed (cancelNotices), else seen within one heartbeat interval (src/work/runtime/execute/cancel-watch.ts).
    cancelNotices,
    cancelCheckIntervalMs: o.heartbeatIntervalMs,
    starts: new StartCoalescer(o.sql, log),
    finishes: new FinishCoalescer(o.sql, log),
    groups: GroupCommits.forUnits(consumed, AbortSignal.any([stopping.signal, release.signal])),
  };

  // The deadlines of the deliveries' waits: a miss makes the process not ready (state below) for a while.
  const stages = new StageWatch(o.stageTimeoutMs ?? DEFAULT_STAGE_TIMEOUT_MS);
  observeRegisteredUnits(o.units.keys()); // metric labels: other unit names are 'unregistered' (src/observe)
  // A consumed queue that does not exist makes the process not ready (src/queue/receive-watch.ts).
  const receiveWatches = new Map(o.queues.map((queue) => [queue, watchReceives(o.sqs)] as const));
  const missingQueues = () => o.queues.filter((queue) => receiveWatches.get(queue)!.missing);
  const consumers: QueueConsumer[] = o.queues.map((queue) =>
    createQueueConsumer({
      sqs: receiveWatches.get(queue)!.client,
      queue,
      queueUrl: queueUrl(o.queueUrlPrefix, queue),
      dlqUrl: dlqUrl(o.queueUrlPrefix, queue),
      visibilitySeconds: o.visibilitySeconds?.[queue] ?? DEFAULT_VISIBILITY_SECONDS[queue],
      heartbeatIntervalMs: o.heartbeatIntervalMs ?? 20_000,
      waitSeconds: o.waitSeconds ?? 20,
      receiveLingerMs: o.receiveLingerMs,
      ackLingerMs: o.ackLingerMs,
      // A queue without units still takes one message, so messages for unknown units are dead-lettered.
      slots: messagesForQueue(units, queue),
      unitSlots,
      tenantSlots,
      rateLimits,
      serialTurns,
      runner,
      logger: log,
      releaseSignal: release.signal,
      stages,
      // Released on shutdown: what still runs goes back to the queue, its messages are not kept.
      healthy: () => !release.signal.aborted,
    }),
  );

  let ready = false;
  let draining = false;
  let stopped = false;
  let reason: string | null = o.latestMigration ? `waiting for migration ${o.latestMigration}` : 'starting';
  let relay: Relay | undefined;
  let rescuer: Rescuer | undefined;
  let scheduler: LocalScheduler | undefined;

  const STUCK_REASON = 'a delivery stage did not finish within SVC_STAGE_TIMEOUT_MS: the database may be unreachable';
  const state = (): HealthState => {
    // A stage past its deadline (stage-watch.ts) makes the process not ready until the database answers
    // again; so does a consumed queue that does not exist (src/queue/receive-watch.ts).
    const missing = ready ? missingQueues() : [];
    const live = ready && stages.stuck === 0 && missing.length === 0;
    return {
      ready: live,
      draining,
      latestMigration: o.latestMigration ?? null,
      reason: live
        ? null
        : !ready
          ? reason
          : missing.length > 0
            ? `the queue does not exist: ${missing.join(', ')} (receive answered QueueDoesNotExist)`
            : STUCK_REASON,
      redis: redisHealth ? (redisHealth.up ? 'up' : 'down') : 'none',
    };
  };
  let health: HealthServer | undefined;
  if (o.healthPort !== undefined && o.healthPort !== null) {
    try {
      health = await startHealthServer({ port: o.healthPort, host: o.healthHost, state });
    } catch (error) {
      // A taken port stops the boot: the cancel listener's connection must not keep the process alive.
      await cancelNotices?.stop();
      await serialTurns?.stop();
      throw error;
    }
  }

  const consuming = (async () => {
    if (o.latestMigration) {
      for (;;) {
        if (stopped) return;
        try {
          if (await schemaHolds(o.sql, o.latestMigration)) break;
          reason = `the database does not hold migration ${o.latestMigration} yet: run the migrator of this version`;
        } catch (error) {
          // Fixed public words: the driver's message (host names, addresses) goes to the log only.
          reason = 'the database is unreachable';
          log.warn({ latestMigration: o.latestMigration, code: (error as { code?: unknown }).code, detail: (error as Error).message }, reason);
          await sleep(o.schemaPollIntervalMs ?? 5_000);
          continue;
        }
        log.warn({ latestMigration: o.latestMigration }, reason);
        await sleep(o.schemaPollIntervalMs ?? 5_000);
      }
    }
    if (stopped) return;
    // The Redis gate's keys name the database: its identity is read before the first receive, for at
    // most a stage deadline (a delivery before it is known takes no gate, src/kv/database-identity.ts).
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, o.stageTimeoutMs ?? DEFAULT_STAGE_TIMEOUT_MS);
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      databaseIdentityOf(o.sql).then(done, done);
    });
    if (stopped) return;
    for (const c of consumers) c.start();
    // The rescuer is on wherever the relay runs, unless turned off (rescue: null). With a queue server
    // that started empty, the instant before the relay's first send marks what was lost.
    if (o.relay && o.relay.rescue !== null) {
      const rescue = o.relay.rescue ?? {};
      const lostBefore = rescue.queueStartedEmpty
        ? await queueStartInstant(o.sql).catch((error: unknown) => {
            log.warn({ err: error }, 'the database clock could not be read: messages lost with the queue wait for their window');
            return null;
          })
        : null;
      // A stop that came while the clock was read (a database that stopped answering) must not find
      // the rescuer and the relay started after it looked for them: they would outlive the stop.
      if (stopped) return;
      rescuer = startRescuer({
        sql: o.sql,
        sqs: o.sqs,
        queueUrlPrefix: o.queueUrlPrefix,
        redis: o.redis,
        windows: {
          visibilitySeconds: { ...DEFAULT_VISIBILITY_SECONDS, ...o.visibilitySeconds },
          unitTimeoutSeconds: new Map([...o.units.values()].map((u) => [u.name, u.timeoutSeconds])),
          marginMs: rescue.marginMs ?? DEFAULT_RESCUE_MARGIN_MS,
          lostBefore,
        },
        intervalMs: rescue.intervalMs,
        maxRescues: rescue.maxRescues,
        instance: workerInstance,
        log,
      });
    }
    if (o.relay) {
      relay = startRelay({
        sql: o.sql,
        redis: o.redis,
        sqs: o.sqs,
        queueUrlPrefix: o.queueUrlPrefix,
        sweepIntervalMs: o.relay.sweepIntervalMs,
        wakeTimeoutMs: o.redisTimeoutMs,
        tenantInflightMax: o.relay.tenantInflightMax,
        tenantInflightLoneMax: o.relay.tenantInflightLoneMax,
        fairGroups: o.relay.fairGroups,
        cappedPollMs: o.relay.cappedPollMs,
        maxAttempts: o.relay.maxAttempts,
        instance: workerInstance,
        log,
      });
    }
    if (o.localScheduler) {
      scheduler = startLocalScheduler({ sql: o.sql, redis: o.redis, units: o.units, tickMs: o.localScheduler.tickMs, logger: log, instance: workerInstance });
    }
    ready = true;
    reason = null;
    log.info({ queues: o.queues, relay: Boolean(o.relay), localScheduler: Boolean(o.localScheduler) }, 'workers consuming');
  })();

  const inFlight = () => consumers.reduce((n, c) => n + c.inFlight, 0);

  return {
    state,
    healthPort: health?.port ?? null,
    consuming,
    inFlight,
    polling: () => consumers.some((c) => c.polling),
    async stop() {
      if (stopped) return;
      stopped = true;
      draining = true;
      ready = false;
      reason = 'draining: the process is shutting down';
      const drainMs = o.drainMs ?? 25_000;
      const deadline = Date.now() + drainMs;
      // Every step after the drain ends by this instant, whatever the database or Redis do: a relay pass
      // waiting on a database that stopped answering would otherwise hold the stop for its own deadline
      // (a minute), past the budget, and the process would be killed instead of closing its pools.
      const stopBy = Date.now() + (o.stopTimeoutMs ?? drainMs + STOP_BUDGET_RESERVE_MS) - STOP_CLOSE_RESERVE_MS;
      const stopWithinBudget = async (part: string, stopping: Promise<unknown> | undefined, by = stopBy) => {
        if (!stopping) return;
        let done = false;
        await settledOrPast(stopping.finally(() => (done = true)), Math.max(0, by - Date.now()));
        if (!done) log.warn({ part }, 'did not stop within the stop budget: what it waits on ends with the connections');
      };
      // Within the drain window: the receives stop only after it, and the drain must keep its time.
      await stopWithinBudget('scheduler', scheduler?.stop(), deadline);
      stopping.abort();
      for (const c of consumers) c.stopFetching();
      log.info({ drainMs, inFlight: inFlight() }, 'draining');
      while (Date.now() < deadline && (inFlight() > 0 || consumers.some((c) => c.polling))) await sleep(25);
      if (inFlight() > 0) {
        log.warn({ inFlight: inFlight() }, 'drain window over: releasing unfinished work to the queue');
        release.abort();
        // The release itself is quick (one transaction and a visibility change per message).
        const hardDeadline = Math.min(Date.now() + 4_500, stopBy);
        while (inFlight() > 0 && Date.now() < hardDeadline) await sleep(25);
      }
      await stopWithinBudget('boot', consuming);
      await stopWithinBudget('rescuer', rescuer?.stop());
      await stopWithinBudget('relay', relay?.stop());
      await stopWithinBudget('health server', health?.close());
      redisHealth?.stop();
      await stopWithinBudget('cancel listener', cancelNotices?.stop());
      await stopWithinBudget('serial turn listener', serialTurns?.stop());
      log.info('workers stopped');
    },
  };
}
