// Queue names and URLs. A queue URL is always the configured prefix plus the queue name, so the same
// code reaches a cloud queue or the local server; tests put a unique token at the end of the prefix
// (`.../000000000000/q1a2b_`) and get their own set of queues on a shared server.

export const QUEUE_NAMES = ['critical', 'default', 'bulk', 'maintenance'] as const;
export type QueueName = (typeof QUEUE_NAMES)[number];

export function isQueueName(value: string): value is QueueName {
  return (QUEUE_NAMES as readonly string[]).includes(value);
}

/** Suffix of each queue's dead-letter queue. */
export const DLQ_SUFFIX = '-dlq';

/** Default visibility timeouts in seconds: critical 60, default 120, bulk 900 (15 min), maintenance 300 (5 min). */
export const DEFAULT_VISIBILITY_SECONDS: Readonly<Record<QueueName, number>> = {
  critical: 60,
  default: 120,
  bulk: 900,
  maintenance: 300,
};

/** Receives after which the queue itself moves a message to its dead-letter queue: 5 of the runtime + 2 margin. */
export const NATIVE_REDRIVE_MAX_RECEIVES = 7;

/** `https://sqs.eu-west-1.amazonaws.com/123456789012/` + `critical`. */
export function queueUrl(prefix: string, name: string): string {
  return prefix + name;
}

export function dlqUrl(prefix: string, name: QueueName): string {
  return prefix + name + DLQ_SUFFIX;
}

/**
 * The SQS queue name a URL stands for: its last path segment. With a prefix ending in a name token
 * (`.../000000000000/q1a2b_`) the queue name carries that token (`q1a2b_critical`).
 */
export function queueNameFromUrl(url: string): string {
  const path = new URL(url).pathname;
  const name = path.slice(path.lastIndexOf('/') + 1);
  if (!name) throw new Error(`queue URL ${url} has no queue name after its last slash`);
  return name;
}
