// What waits: unsent outbox rows (both outboxes) and each queue's messages (visible, in flight,
// dead-letter) read from the SQS API. The relay samples both into gauges at most every 15 s; the
// console reads them on demand. Every wait is bounded.
import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { Logger } from 'pino';
import type { Sql } from '../db/client.ts';
import { inUnitOfWork, type Actor } from '../db/unit-of-work.ts';
import { dlqUrl, QUEUE_NAMES, queueUrl, type QueueName } from '../queue/names.ts';
import { exportRelayMetrics, outboxOldestPending, outboxPending, queueDepthReadErrors, queueMessages } from './metrics.ts';

/** Default pause between two samples of the relay: 15 s (the ceiling on SQS attribute calls). */
export const DEFAULT_BACKLOG_SAMPLE_INTERVAL_MS = 15_000;
/** The outbox is read as the relay reads it (app.process = relay). */
const RELAY_ACTOR: Actor = { kind: 'system', label: 'relay' };
/** Longest wait for one GetQueueAttributes call. */
const SQS_ATTRIBUTES_TIMEOUT_MS = 5_000;

export interface OutboxBacklog {
  pending: number;
  /** Seconds the oldest due unsent row of an active run has been due; 0 when none. */
  oldestPendingSeconds: number;
}

export interface QueueDepth {
  queue: QueueName;
  visible: number;
  inFlight: number;
  deadLetter: number;
}

/**
 * Unsent rows of both outboxes, and how long the oldest of them has been due (database clock). Only a
 * row that is due (available_at reached: a delayed dispatch is not late) and whose run is still active
 * (a cancelled run's row the cancel could not withdraw waits for nothing) is late; the age runs from
 * the instant it became due.
 */
export async function readOutboxBacklog(sql: Sql): Promise<OutboxBacklog> {
  return inUnitOfWork(sql, RELAY_ACTOR, async (tx) => {
    const [row] = await tx<{ pending: number; oldest: number | null }[]>`
      SELECT sum(n)::int AS pending, extract(epoch FROM clock_timestamp() - min(oldest))::float8 AS oldest
        FROM (SELECT count(*) AS n,
                     min(o.available_at) FILTER (WHERE o.available_at <= clock_timestamp() AND NOT EXISTS (
                       SELECT 1 FROM task_runs r WHERE r.run_id = o.run_id AND r.status IN ('succeeded', 'failed', 'skipped'))) AS oldest
                FROM outbox_messages o WHERE o.sent_at IS NULL
              UNION ALL
              SELECT count(*),
                     min(o.available_at) FILTER (WHERE o.available_at <= clock_timestamp() AND NOT EXISTS (
                       SELECT 1 FROM platform_task_runs r WHERE r.run_id = o.run_id AND r.status IN ('succeeded', 'failed', 'skipped')))
                FROM platform_outbox_messages o WHERE o.sent_at IS NULL) t`;
    return { pending: row?.pending ?? 0, oldestPendingSeconds: Math.max(0, row?.oldest ?? 0) };
  });
}

async function approximateCounts(sqs: SQSClient, url: string): Promise<{ visible: number; inFlight: number }> {
  const out = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }),
    { abortSignal: AbortSignal.timeout(SQS_ATTRIBUTES_TIMEOUT_MS) },
  );
  return {
    visible: Number(out.Attributes?.ApproximateNumberOfMessages ?? 0) || 0,
    inFlight: Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0) || 0,
  };
}

/** Each queue's visible and in-flight messages and its dead-letter queue's messages (visible + in flight). */
export async function readQueueDepths(sqs: SQSClient, queueUrlPrefix: string, queues: readonly QueueName[] = QUEUE_NAMES): Promise<QueueDepth[]> {
  return Promise.all(
    queues.map(async (queue) => {
      const [main, dlq] = await Promise.all([approximateCounts(sqs, queueUrl(queueUrlPrefix, queue)), approximateCounts(sqs, dlqUrl(queueUrlPrefix, queue))]);
      return { queue, visible: main.visible, inFlight: main.inFlight, deadLetter: dlq.visible + dlq.inFlight };
    }),
  );
}

export interface BacklogSamplerOptions {
  sql: Sql;
  sqs: SQSClient;
  queueUrlPrefix: string;
  /** Pause between samples; default 15000 ms (SQS attribute calls are rationed; tests shorten it). */
  intervalMs?: number;
  /** The queues sampled; default every queue. */
  queues?: readonly QueueName[];
  /** Where a failed read is reported: once at warn when a streak of failures begins, then at debug. Default: nowhere. */
  log?: Pick<Logger, 'warn' | 'debug' | 'info'>;
}

/**
 * Samples the backlog into the gauges now and then every interval until stopped. A queue whose depth
 * cannot be read loses its svc_queue_messages series (a frozen value would look current) and counts
 * in svc_queue_depth_read_errors_total until a read succeeds again.
 */
export function startBacklogSampler(o: BacklogSamplerOptions): { stop(): Promise<void> } {
  exportRelayMetrics();
  const intervalMs = o.intervalMs ?? DEFAULT_BACKLOG_SAMPLE_INTERVAL_MS;
  const queues = o.queues ?? QUEUE_NAMES;
  for (const queue of queues) queueDepthReadErrors.inc({ queue }, 0);
  let stopped = false;
  let current: Promise<void> = Promise.resolve();
  // What is failing now: a streak is reported at warn once, when it begins, and its end at info.
  const failing = new Set<string>();
  const failed = (what: string, error: unknown, message: string) => {
    if (failing.has(what)) return o.log?.debug({ err: error }, message);
    failing.add(what);
    o.log?.warn({ err: error }, `${message} (reported once until a read succeeds)`);
  };
  const succeeded = (what: string, message: string) => {
    if (failing.delete(what)) o.log?.info(message);
  };
  const sample = async () => {
    const [outbox, ...depths] = await Promise.allSettled([readOutboxBacklog(o.sql), ...queues.map((queue) => readQueueDepths(o.sqs, o.queueUrlPrefix, [queue]))]);
    if (outbox.status === 'fulfilled') {
      outboxPending.set(outbox.value.pending);
      outboxOldestPending.set(outbox.value.oldestPendingSeconds);
      succeeded('outbox', 'outbox backlog read again');
    } else failed('outbox', outbox.reason, 'outbox backlog sample failed: svc_outbox_* keep their last value');
    depths.forEach((result, i) => {
      const queue = queues[i]!;
      if (result.status === 'fulfilled') {
        for (const d of result.value) {
          queueMessages.set({ queue: d.queue, state: 'visible' }, d.visible);
          queueMessages.set({ queue: d.queue, state: 'in_flight' }, d.inFlight);
          queueMessages.set({ queue: d.queue, state: 'dead_letter' }, d.deadLetter);
        }
        succeeded(`queue:${queue}`, `queue ${queue} depth read again`);
        return;
      }
      queueDepthReadErrors.inc({ queue });
      for (const state of ['visible', 'in_flight', 'dead_letter']) queueMessages.remove({ queue, state });
      failed(`queue:${queue}`, result.reason, `queue ${queue} depth could not be read: its svc_queue_messages series are removed until a read succeeds`);
    });
  };
  const tick = () => {
    if (stopped) return;
    current = sample();
  };
  tick();
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await current;
    },
  };
}
