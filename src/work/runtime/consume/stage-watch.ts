// What a worker runtime knows of its deliveries' stage deadlines (src/db/stage-deadline.ts): each
// delivery gets bounds of its own, which the heartbeat reads (a delivery stuck past a deadline is not
// extended any more), and the runtime counts the misses still unexplained, which its readiness reads.
//
// A miss keeps the process not ready until a later wait answered by the database ends within its
// deadline (the database answers again), or, if no delivery proves that, for one more deadline after the
// miss: an idle worker then recovers on its own, and another miss while the database is still away
// makes it not ready again.
import type { StageBounds } from '../../../db/stage-deadline.ts';
import { recordStageTimeout } from '../../../observe/delivery-metrics.ts';

/** A delivery's stage bounds, as the consumer runs it. */
export interface DeliveryStages extends StageBounds {
  /** True once a wait of this delivery outlived its deadline: it gets no more visibility extensions. */
  readonly stuck: boolean;
  /** The stage that missed its deadline first, or null. */
  readonly missedStage: string | null;
}

/**
 * Waits whose success proves nothing of the database: the checks wait on Redis, and a reserve is
 * answered at once by a connection the pool already holds, however dead the server behind it.
 */
const NO_ANSWER_FROM_DATABASE = new Set(['checks', 'reserve']);

export class StageWatch {
  /** Deadline of each wait of a delivery, ms (SVC_STAGE_TIMEOUT_MS). */
  readonly ms: number;
  private readonly misses = new Map<number, NodeJS.Timeout>();
  private next = 0;

  constructor(ms: number) {
    this.ms = ms;
  }

  /** Misses not yet cleared by a wait met since (or by the passing of one more deadline). */
  get stuck(): number {
    return this.misses.size;
  }

  /** New bounds for one delivery. */
  forDelivery(): DeliveryStages {
    let missedStage: string | null = null;
    const miss = (stage: string) => this.miss(stage);
    const met = (stage: string) => {
      if (!NO_ANSWER_FROM_DATABASE.has(stage)) this.clear();
    };
    return {
      ms: this.ms,
      missed(stage: string) {
        missedStage ??= stage;
        miss(stage);
      },
      met,
      get stuck() {
        return missedStage !== null;
      },
      get missedStage() {
        return missedStage;
      },
    };
  }

  private miss(stage: string): void {
    recordStageTimeout(stage); // svc_delivery_stage_timeouts_total (src/observe)
    const id = this.next++;
    const timer = setTimeout(() => this.misses.delete(id), this.ms);
    timer.unref();
    this.misses.set(id, timer);
  }

  private clear(): void {
    if (this.misses.size === 0) return;
    for (const timer of this.misses.values()) clearTimeout(timer);
    this.misses.clear();
  }
}
