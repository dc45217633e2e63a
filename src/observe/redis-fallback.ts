// Counts the times a Redis operation failed and the service carried on without it (Redis is never
// authoritative). One call where each fallback path is taken; the operation names are fixed.
import { redisFallbacks } from './metrics.ts';

/** What the service was doing on Redis when it fell back. */
export type RedisFallbackOperation =
  | 'gate_acquire'
  | 'gate_release'
  | 'gate_record'
  | 'run_status_read'
  | 'run_status_write'
  | 'run_status_evict'
  | 'outbox_wake_signal'
  | 'outbox_wake_wait';

export function redisFallback(operation: RedisFallbackOperation): void {
  redisFallbacks.inc({ operation });
}
