// Deadlines on the waits of a queue delivery. While PostgreSQL is down or restarting, a wait on the
// driver can stay pending for ever (postgres.js: a reserve or a pipelined BEGIN that never settles),
// and a delivery waiting on it would hold its slot and, its heartbeat still extending the message,
// its run, until someone restarts the process. Each wait of a delivery is therefore raced with a
// deadline: past it the wait is abandoned (StageTimedOut), whatever it later brings is cleaned up
// (`onLate`: a reserved connection released, a transaction's session ended), and the delivery's
// bounds are told (`missed`) so that the consumer releases the message and stops its heartbeat.
//
// The bounds travel with the delivery through AsyncLocalStorage, so the database helpers a delivery
// calls (src/db/pipelined-begin.ts, every unit of work it opens) are bounded without each caller
// passing a deadline down. The relay's and the rescuer's passes run under bounds of their own
// (passBounds): a pass stuck on the driver would otherwise stop every send for good. The API and the
// migrator are not bounded here.
import { AsyncLocalStorage } from 'node:async_hooks';
import { CodedError } from '../errors/coded-error.ts';

/** A wait of a delivery outlived its deadline; the delivery is released, nothing of it committed by it. */
export class StageTimedOut extends CodedError<'DELIVERY_STAGE_TIMEOUT'> {
  readonly stage: string;
  constructor(stage: string, ms: number) {
    super('DELIVERY_STAGE_TIMEOUT', `the delivery's ${stage} did not finish within ${ms} ms: the delivery is released`);
    this.name = 'StageTimedOut';
    this.stage = stage;
  }
}

/** The deadline of one delivery's waits and who hears of a miss (src/work/runtime/consume/stage-watch.ts). */
export interface StageBounds {
  /** Deadline of each wait, ms. */
  readonly ms: number;
  /** A wait of `stage` outlived the deadline. */
  missed(stage: string): void;
  /** A wait of `stage` ended within the deadline (the database answers). */
  met(stage: string): void;
}

const current = new AsyncLocalStorage<StageBounds>();

/** Runs `work` with `bounds` as the deadline of every wait it makes through boundStage. */
export function withStageBounds<T>(bounds: StageBounds, work: () => T): T {
  return current.run(bounds, work);
}

/** Runs `work` with no stage bounds (a handler's own code: bounded by its unit's timeout, not by a stage's). */
export function withoutStageBounds<T>(work: () => T): T {
  return current.exit(work);
}

/** The bounds of the delivery running now, if any. */
export function stageBounds(): StageBounds | undefined {
  return current.getStore();
}

/**
 * `promise`, or StageTimedOut once the deadline of the current bounds passes first. A value that
 * arrives after the deadline goes to `onLate` (it must free what it holds); a late rejection is
 * swallowed. Without bounds (outside a delivery) it is `promise` itself.
 */
export function boundStage<T>(stage: string, promise: Promise<T>, onLate?: (value: T) => void, bounds = stageBounds()): Promise<T> {
  if (!bounds) return promise;
  return new Promise<T>((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      bounds.missed(stage);
      reject(new StageTimedOut(stage, bounds.ms));
    }, bounds.ms);
    promise.then(
      (value) => {
        if (!late) {
          clearTimeout(timer);
          bounds.met(stage);
          resolve(value);
          return;
        }
        try {
          onLate?.(value);
        } catch {
          // Cleanup of an abandoned wait is best effort: a connection it could not free is the pool's to reclaim.
        }
      },
      (error: unknown) => {
        if (late) return;
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/**
 * Resolves once `promise` settles or `ms` has passed, whichever is first; never rejects. For a shared
 * statement that later deliveries queue behind (the coalescers): one the driver never answers must
 * not hold them past their own deadline. Without `ms` (outside a delivery), once it settles.
 */
export function settledOrPast(promise: Promise<unknown>, ms: number | undefined): Promise<void> {
  const settled = promise.then(
    () => {},
    () => {},
  );
  if (ms === undefined) return settled;
  let timer: NodeJS.Timeout | undefined;
  const past = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  return Promise.race([settled, past]).finally(() => clearTimeout(timer));
}

export function isStageTimeout(error: unknown): error is StageTimedOut {
  return error instanceof StageTimedOut;
}

/**
 * Bounds for one pass of a background loop (the relay, the rescuer): a wait past `ms` abandons the pass
 * (StageTimedOut, which the loop logs) and the next pass starts on a fresh connection.
 */
export function passBounds(ms: number, onMissed: (stage: string) => void): StageBounds {
  return { ms, missed: onMissed, met: () => {} };
}
