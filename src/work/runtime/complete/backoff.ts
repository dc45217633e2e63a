// Exponential backoff for transient failures, expressed as the message's new visibility timeout: the
// message stays in the queue (no slot held) and reappears when the delay is over. A unit may set its
// own policy (`retry` in its definition): fewer receives than the runtime's 5, its own base and cap.
// By default the delay is drawn with full jitter (uniform from 0 to the exponential bound), so runs
// that failed together (a dependency went down) do not all come back at the same second.
import { DEFAULT_BACKOFF_BASE_MS, DEFAULT_BACKOFF_CAP_MS, RUNTIME_MAX_RECEIVES, SQS_MAX_VISIBILITY_SECONDS } from '../../../config/limits.ts';
import type { RetryPolicy, WorkUnit } from '../../define/unit.ts';

export interface BackoffOptions {
  /** Delay after the first receive, in ms. Default 2000 (SVC_BACKOFF_BASE_MS). */
  baseMs?: number;
  /** Upper bound, in ms. Default 300000 (SVC_BACKOFF_CAP_MS). */
  capMs?: number;
  /** `full` (default): a random delay up to the bound; `none`: the bound itself. A unit's own policy overrides it. */
  jitter?: 'full' | 'none';
}

/**
 * Seconds kept back from what is left of those 12 hours: the queue's receipt came before the worker's
 * (the answer's way back), and the retry's trail row commits before the change goes out.
 */
export const RECEIPT_MARGIN_SECONDS = 60;

/** The exponential bound base x 2^(receiveCount - 1), capped, in ms (also the consumer's pause after failed receives). */
export function boundMs(receiveCount: number, options: BackoffOptions): number {
  const base = options.baseMs ?? DEFAULT_BACKOFF_BASE_MS;
  const cap = options.capMs ?? DEFAULT_BACKOFF_CAP_MS;
  const exponent = Math.max(0, Math.min(receiveCount - 1, 30));
  return Math.min(cap, base * 2 ** exponent);
}

function toVisibilitySeconds(ms: number): number {
  return Math.max(0, Math.min(SQS_MAX_VISIBILITY_SECONDS, Math.round(ms / 1000)));
}

/** base x 2^(receiveCount - 1), capped, in whole seconds (SQS visibility is whole seconds); no jitter. */
export function backoffSeconds(receiveCount: number, options: BackoffOptions = {}): number {
  return toVisibilitySeconds(boundMs(receiveCount, options));
}

/**
 * The delay before the next receive of a unit's failed delivery, in whole seconds: the unit's policy
 * over the workers' defaults (SVC_BACKOFF_*), full jitter unless the policy says `jitter: 'none'`.
 * `random` returns [0, 1) (injectable for tests).
 */
export function retryDelaySeconds(
  unit: Pick<WorkUnit, 'retry'> | undefined,
  receiveCount: number,
  defaults: BackoffOptions,
  random: () => number = Math.random,
): number {
  const policy = unit?.retry?.backoff;
  const options: BackoffOptions = { baseMs: policy?.baseMs ?? defaults.baseMs, capMs: policy?.capMs ?? defaults.capMs };
  const bound = boundMs(receiveCount, options);
  if ((policy?.jitter ?? defaults.jitter ?? 'full') === 'none') return toVisibilitySeconds(bound);
  return toVisibilitySeconds(random() * bound);
}

/**
 * The longest visibility change the queue accepts for a message this worker has held `heldMs` since it
 * received it, and `delaySeconds` clamped to it (never below 0): what a retry can really be scheduled
 * with. `heldMs` unknown (undefined): the delay as it is, bounded by 12 h only.
 */
export function clampToReceipt(delaySeconds: number, heldMs: number | undefined): number {
  if (heldMs === undefined) return Math.max(0, Math.min(delaySeconds, SQS_MAX_VISIBILITY_SECONDS));
  const left = SQS_MAX_VISIBILITY_SECONDS - Math.ceil(Math.max(0, heldMs) / 1000) - RECEIPT_MARGIN_SECONDS;
  return Math.max(0, Math.min(delaySeconds, left));
}

/** Receives the handler of `unit` may run on: its policy's maxReceives, never above the runtime's. */
export function maxReceivesOf(unit: { retry: RetryPolicy | null } | undefined, runtimeMax: number = RUNTIME_MAX_RECEIVES): number {
  const own = unit?.retry?.maxReceives;
  return own === undefined ? runtimeMax : Math.min(own, runtimeMax);
}
