// Exponential backoff for transient failures, expressed as the message's new visibility timeout: the
// message stays in the queue (no slot held) and reappears when the delay is over.

export interface BackoffOptions {
  /** Delay after the first receive, in ms. Default 2000 (SVC_BACKOFF_BASE_MS). */
  baseMs?: number;
  /** Upper bound, in ms. Default 300000 (SVC_BACKOFF_CAP_MS). */
  capMs?: number;
}

export const DEFAULT_BACKOFF_BASE_MS = 2_000;
export const DEFAULT_BACKOFF_CAP_MS = 300_000;
/** SQS refuses a visibility timeout above 12 hours. */
const SQS_MAX_VISIBILITY_SECONDS = 43_200;

/** base x 2^(receiveCount - 1), capped, in whole seconds (SQS visibility is whole seconds). */
export function backoffSeconds(receiveCount: number, options: BackoffOptions = {}): number {
  const base = options.baseMs ?? DEFAULT_BACKOFF_BASE_MS;
  const cap = options.capMs ?? DEFAULT_BACKOFF_CAP_MS;
  const exponent = Math.max(0, Math.min(receiveCount - 1, 30));
  const ms = Math.min(cap, base * 2 ** exponent);
  return Math.max(0, Math.min(SQS_MAX_VISIBILITY_SECONDS, Math.round(ms / 1000)));
}
