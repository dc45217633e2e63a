// What waits: unsent outbox rows (both outboxes) and each queue's messages (visible, in flight,
// dead-letter) read from the SQS API. The relay samples both into gauges at most every 15 s; the
// console reads them on demand. Every wait is bounded.
import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { Sql } from '../db/client.ts';
import { inUnitOfWork, type Actor } from '../db/unit-of-work.ts';
import { dlqUrl, QUEUE_NAMES, queueUrl, type QueueName } from '../queue/names.ts';
import { outboxOldestPending, outboxPending, queueMessages } from './metrics.ts';

/** Default pause between two samples of the relay: 15 s (the ceiling on SQS attribute calls). */
export const DEFAULT_BACKLOG_SAMPLE_INTERVAL_MS = 15_000;
/** The outbox is read as the relay reads it (app.process = relay). */
const RELAY_ACTOR: Actor = { kind: 'system', label: 'relay' };
/** Longest wait for one GetQueueAttributes call. */
const SQS_ATTRIBUTES_TIMEOUT_MS = 5_000;

export interface OutboxBacklog {
  pending: number;
  /** Age of the oldest unsent row in seconds; 0 when none. */
  oldestPendingSeconds: number;
}

export interface QueueDepth {
  queue: QueueName;
  visible: number;
  inFlight: number;
  deadLetter: number;
}

/** Unsent rows of both outboxes, and the age of the oldest (database clock). */
export async function readOutboxBacklog(sql: Sql): Promise<OutboxBacklog> {
  return inUnitOfWork(sql, RELAY_ACTOR, async (tx) => {
    const [row] = await tx<{ pending: number; oldest: number | null }[]>`
      SELECT sum(n)::int AS pending, extract(epoch FROM clock_timestamp() - min(oldest))::float8 AS oldest
        FROM (SELECT count(*) AS n, min(created_at) AS oldest FROM outbox_messages WHERE sent_at IS NULL
              UNION ALL
              SELECT count(*), min(created_at) FROM platform_outbox_messages WHERE sent_at IS NULL) t`;
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
  onError?: (error: unknown) => void;
}

/** Samples the backlog into the gauges now and then every interval until stopped. */
export function startBacklogSampler(o: BacklogSamplerOptions): { stop(): Promise<void> } {
  const intervalMs = o.intervalMs ?? DEFAULT_BACKLOG_SAMPLE_INTERVAL_MS;
  let stopped = false;
  let current: Promise<void> = Promise.resolve();
  const sample = async () => {
    const [outbox, depths] = await Promise.allSettled([readOutboxBacklog(o.sql), readQueueDepths(o.sqs, o.queueUrlPrefix)]);
    if (outbox.status === 'fulfilled') {
      outboxPending.set(outbox.value.pending);
      outboxOldestPending.set(outbox.value.oldestPendingSeconds);
    } else o.onError?.(outbox.reason);
    if (depths.status === 'fulfilled') {
      for (const d of depths.value) {
        queueMessages.set({ queue: d.queue, state: 'visible' }, d.visible);
        queueMessages.set({ queue: d.queue, state: 'in_flight' }, d.inFlight);
        queueMessages.set({ queue: d.queue, state: 'dead_letter' }, d.deadLetter);
      }
    } else o.onError?.(depths.reason);
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
