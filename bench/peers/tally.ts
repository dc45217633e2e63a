// Counts every handler execution of every job of one measured round, so losses and duplicates are
// found at the end of every run (enqueued = completed, each exactly once). Pure bookkeeping; the
// adapters feed it, the harness reads it.

export interface JobPayload {
  /** Round id: a job of an earlier round executing late is still attributed to its own round. */
  r: number;
  /** Sequence number of the job within its round, 0..n-1. */
  s: number;
  /** Enqueue instant in epoch milliseconds (fractional), taken just before the enqueue call. */
  t: number;
}

export interface Verdict {
  enqueued: number;
  /** Jobs executed at least once. */
  completed: number;
  /** Jobs never executed (or, where the system says so, never marked complete). */
  lost: number;
  /** Executions beyond the first, summed over jobs. */
  duplicated: number;
  /** Executions of a sequence number outside 0..n-1 (a job nobody enqueued in this round). */
  unexpected: number;
}

/**
 * The machine's wall clock (CLOCK_REALTIME, which PostgreSQL's clock_timestamp() reads too) in epoch
 * milliseconds, with a fraction: the monotonic clock plus its offset to the wall clock, taken again at
 * the start of every round (anchorWallClock). performance.timeOrigin alone is the wall clock as it was
 * at process start, and a VM's wall clock is slewed and stepped after that: in one full peers run the
 * database's instants of ours' steady round were 9 ms behind the harness's (a p50 of -2 ms), where a
 * system timed in-process (both instants from this clock) saw nothing.
 */
export function nowMs(): number {
  return performance.timeOrigin + performance.now() + wallOffsetMs;
}

let wallOffsetMs = 0;

/** Sets nowMs's offset to the wall clock as it is now (within a few microseconds; spins up to a millisecond). */
export function anchorWallClock(): void {
  wallOffsetMs = wallOffset(Date.now, () => performance.timeOrigin + performance.now());
}

/**
 * wall - mono at the instant the integer wall clock ticks (its reading is then exact to the spin's
 * step): reads mono, then wall, until wall has moved from its first reading.
 */
export function wallOffset(readWall: () => number, readMono: () => number, maxReads = 10_000_000): number {
  const first = readWall();
  for (let i = 0; i < maxReads; i++) {
    const mono = readMono();
    const wall = readWall();
    if (wall !== first) return wall - mono;
  }
  return readWall() - readMono();
}

export class RoundTally {
  readonly round: number;
  readonly size: number;
  /** Executions per sequence number. */
  readonly executions: Uint32Array;
  /** Enqueue-to-start latency in ms of the first execution of each job; NaN until started. */
  readonly latencyMs: Float64Array;
  /** Wall-clock instant of the first start of each job; NaN until started. */
  readonly startedAt: Float64Array;
  unexpected = 0;
  /** Jobs executed at least once (maintained incrementally for the per-interval lines). */
  started = 0;
  /** Handler executions that returned (for the drain condition of in-process workers). */
  finished = 0;
  lastFinishedAt = Number.NaN;

  constructor(round: number, size: number) {
    this.round = round;
    this.size = size;
    this.executions = new Uint32Array(size);
    this.latencyMs = new Float64Array(size).fill(Number.NaN);
    this.startedAt = new Float64Array(size).fill(Number.NaN);
  }

  /** Record a handler start at `at` (epoch ms) for the job whose payload is given. */
  start(payload: Pick<JobPayload, 's' | 't'>, at: number = nowMs()): void {
    const s = payload.s;
    if (!Number.isInteger(s) || s < 0 || s >= this.size) {
      this.unexpected += 1;
      return;
    }
    const before = this.executions[s] as number;
    this.executions[s] = before + 1;
    if (before === 0) {
      this.started += 1;
      this.latencyMs[s] = at - payload.t;
      this.startedAt[s] = at;
    }
  }

  /** Record a handler return. */
  finish(at: number = nowMs()): void {
    this.finished += 1;
    this.lastFinishedAt = at;
  }

  /**
   * The verdict. `notCompletedInStore` adds jobs the handler ran for but the system never marked
   * complete (counted as lost: from the user's point of view the job is not done).
   */
  verdict(notCompletedInStore = 0): Verdict {
    let completed = 0;
    let duplicated = 0;
    for (const count of this.executions) {
      if (count > 0) completed += 1;
      if (count > 1) duplicated += count - 1;
    }
    return {
      enqueued: this.size,
      completed,
      lost: this.size - completed + notCompletedInStore,
      duplicated,
      unexpected: this.unexpected,
    };
  }
}

/** All rounds of a harness invocation, so a late execution lands on the round it belongs to. */
export class TallyBook {
  readonly rounds = new Map<number, RoundTally>();
  /** Executions carrying a round id this invocation never opened. */
  strays = 0;
  private next = 1;

  open(size: number): RoundTally {
    const tally = new RoundTally(this.next++, size);
    this.rounds.set(tally.round, tally);
    return tally;
  }

  start(payload: JobPayload, at: number = nowMs()): void {
    const tally = this.rounds.get(payload.r);
    if (tally) tally.start(payload, at);
    else this.strays += 1;
  }

  finish(payload: Pick<JobPayload, 'r'>, at: number = nowMs()): void {
    this.rounds.get(payload.r)?.finish(at);
  }
}
