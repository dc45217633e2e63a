// Counts the times a Redis operation failed and the service carried on without it (Redis is never
// authoritative). One call where each fallback path is taken; the operation names are fixed.
import { redisFallbacks } from './metrics.ts';

/** What the service was doing on Redis when it fell back. */
export const REDIS_FALLBACK_OPERATIONS = [
  'gate_acquire',
  'gate_release',
  'gate_record',
  'run_status_read',
  'run_status_write',
  'run_status_evict',
  'outbox_wake_signal',
  'outbox_wake_wait',
  'rate_limit',
] as const;
export type RedisFallbackOperation = (typeof REDIS_FALLBACK_OPERATIONS)[number];

// Every operation's series exists from the start at 0: a rate over a series that appears only at the
// first fallback reads "no data" rather than 0, and misses that first increase.
for (const operation of REDIS_FALLBACK_OPERATIONS) redisFallbacks.inc({ operation }, 0);

export function redisFallback(operation: RedisFallbackOperation): void {
  redisFallbacks.inc({ operation });
}
