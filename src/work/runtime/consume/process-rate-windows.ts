// The rate-limit windows one workers process keeps in memory, used while the shared windows in Redis
// cannot be (Redis down or slow, or the database identity that names their keys not read yet). The same
// sliding-window counter as the Redis script (src/kv/rate-limit.ts): the fixed window of `windowMs` now
// and the one before it, the earlier one's count weighted by how much of it the sliding window still
// covers; admitted while
//   previous × (windowMs − elapsed) / windowMs + current < max.
// Pure: the clock is passed in, nothing here does I/O, so the arithmetic is tested on its own.
//
// These windows are this process's alone: while Redis is down, each workers process admits up to `max`
// per window by itself, so N processes together can start up to N × max. That is the price of not
// needing a shared store when the shared one is gone; once Redis answers, its window applies again.
import type { RateDecision } from '../../../kv/rate-limit.ts';

interface WindowCount {
  /** Index of the current fixed window (time / windowMs). */
  index: number;
  /** Admitted in the window `index`. */
  current: number;
  /** Admitted in the window before it. */
  previous: number;
  windowMs: number;
}

/** How often, at most, windows no longer weighing on any decision are forgotten (ms). */
const SWEEP_EVERY_MS = 10_000;

export class ProcessRateWindows {
  readonly #windows = new Map<string, WindowCount>();
  #sweptAt = Number.NEGATIVE_INFINITY;

  /**
   * Admits one execution under `max` per `windowMs` in the window `key` (a unit, or a unit and tenant) at
   * the instant `nowMs`, or says how long until it has room (ms, at least 1). A window length that
   * changes under the same key starts afresh.
   */
  admit(key: string, max: number, windowMs: number, nowMs: number): RateDecision {
    this.#sweep(nowMs);
    let index = Math.floor(nowMs / windowMs);
    let elapsed = nowMs - index * windowMs;
    const seen = this.#windows.get(key);
    let current = 0;
    let previous = 0;
    if (seen !== undefined && seen.windowMs === windowMs) {
      if (seen.index >= index) {
        // A clock that went backwards keeps the newer window, as the Redis script does.
        if (seen.index > index) {
          index = seen.index;
          elapsed = 0;
        }
        current = seen.current;
        previous = seen.previous;
      } else if (seen.index === index - 1) {
        previous = seen.current;
      }
    }
    if (previous * (windowMs - elapsed) + current * windowMs < max * windowMs) {
      this.#windows.set(key, { index, current: current + 1, previous, windowMs });
      return { admitted: true };
    }
    return { admitted: false, waitMs: waitForRoom(max, windowMs, elapsed, previous, current) };
  }

  /** Windows held (for tests and for the bound on memory). */
  get size(): number {
    return this.#windows.size;
  }

  // A window whose current count is two windows old weighs nothing on any later decision; per-tenant
  // limits would otherwise keep one entry per tenant ever seen.
  #sweep(nowMs: number): void {
    if (nowMs - this.#sweptAt < SWEEP_EVERY_MS) return;
    this.#sweptAt = nowMs;
    for (const [key, w] of this.#windows) if (Math.floor(nowMs / w.windowMs) - w.index >= 2) this.#windows.delete(key);
  }
}

/**
 * The ms until previous × (windowMs − elapsed) / windowMs + current < max, from `elapsed` ms into the
 * current window (the Redis script's formula), at least 1.
 */
export function waitForRoom(max: number, windowMs: number, elapsed: number, previous: number, current: number): number {
  const left = windowMs - elapsed;
  const wait =
    current < max && previous > 0 ? left - (windowMs * (max - current)) / previous : left + windowMs - (windowMs * max) / Math.max(1, current);
  return Math.max(1, Math.floor(wait) + 1);
}
