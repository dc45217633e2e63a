// A counting semaphore: at most `limit` holders at once, waiters served in arrival order. Bounds the
// simultaneous executions of one unit in this process (the unit's `concurrency`), and the messages the
// consumer holds for a unit (define/unit.ts messagesPerUnit).
export class SlotLimit {
  readonly limit: number;
  #held = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(limit: number) {
    this.limit = limit;
  }

  get held(): number {
    return this.#held;
  }

  /** Holders waiting for a slot. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Resolves true once a slot is held; false if `signal` aborts first (nothing is then held). */
  async acquire(signal?: AbortSignal): Promise<boolean> {
    if (signal?.aborted) return false;
    if (this.#held < this.limit) {
      this.#held++;
      return true;
    }
    return new Promise<boolean>((resolve) => {
      const grant = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve(true);
      };
      const onAbort = () => {
        const i = this.#waiting.indexOf(grant);
        if (i >= 0) this.#waiting.splice(i, 1);
        resolve(false);
      };
      this.#waiting.push(grant);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Hands the slot to the next waiter, or frees it. */
  release(): void {
    const next = this.#waiting.shift();
    if (next) next();
    else this.#held--;
  }
}
