// Queue names and URLs. A queue URL is always the configured prefix plus the queue name, so the same
// code reaches a cloud queue or the local server; tests put a unique token at the end of the prefix
// (`.../000000000000/q1a2b_`) and get their own set of queues on a shared server.
import { QUEUE_NAMES, type QueueName } from '../config/limits.ts';

// The queue set and its limits are defined once, with the other limits; queue code imports them here.
export { DEFAULT_VISIBILITY_SECONDS, NATIVE_REDRIVE_MAX_RECEIVES, QUEUE_NAMES, type QueueName } from '../config/limits.ts';

export function isQueueName(value: string): value is QueueName {
  return (QUEUE_NAMES as readonly string[]).includes(value);
}

/** Suffix of each queue's dead-letter queue. */
export const DLQ_SUFFIX = '-dlq';

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
