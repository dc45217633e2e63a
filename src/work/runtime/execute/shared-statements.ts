// When the coalescers (start-coalescer.ts, finish-coalescer.ts) send a group's shared statement: at
// the end of the event-loop turn its first delivery came in, or, while the group's previous statement
// is out, once that one has come back, with everything that came meanwhile (up to `max`). So a quiet
// worker sends each delivery's statement at once, and a busy one sends fewer, larger statements. Busy
// means the coalescer's last statement carried more than one delivery: then the next one waits up to
// `lingerMs` for more, since on a busy worker a statement and its commit cost PostgreSQL more than the
// wait costs the runs (bench/results/deferred-commit-and-linger-2026-11-29.md). It waits only while
// fewer deliveries wait than the last statement carried: once as many have come (most often they came
// while that statement was out), the next goes at once, as large as the last, and the wait would only
// have lengthened every run's chain (bench/results/delivery-chain-waits-2026-11-29.md). A
// statement the driver never answers holds the group's next one no longer than a stage's deadline: it
// holds its own deliveries only, which their own deadlines release.
import { settledOrPast, stageBounds } from '../../../db/stage-deadline.ts';

/**
 * A failure that says nothing about the statement: a deadlock or serialization failure, a cancel, a
 * connection lost or refused (SQLSTATE classes 08 and 57P, postgres.js's CONNECTION_* codes). A
 * coalescer's shared statement that fails otherwise, while its deliveries go through alone, is broken in
 * itself, and the coalescer says so once.
 */
export function passingFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  return ['40P01', '40001', '57014', '25P02'].includes(code) || code.startsWith('08') || code.startsWith('57P') || code.startsWith('CONNECTION_');
}

interface Group<G, T> {
  /** What every delivery of the group shares (its scope, actor, tenant, ...). */
  context: G;
  /** Deliveries waiting for the group's next statement. */
  items: T[];
  /** A statement of this group is out. */
  busy: boolean;
  /** Its next statement is due (at the end of this event-loop turn, or after the linger). */
  scheduled: boolean;
  /** The linger's timer, while the next statement waits for more deliveries. */
  lingering: NodeJS.Timeout | undefined;
}

export class SharedStatements<G, T> {
  /** The groups with deliveries waiting or a statement out (one is forgotten once idle). */
  private readonly groups = new Map<string, Group<G, T>>();

  private readonly max: number;

  /** Sends one statement for `items` and settles each of them; its rejection is ignored. */
  private readonly send: (context: G, items: T[]) => Promise<void>;

  private readonly lingerMs: number;

  /** Deliveries the last statement carried: more than one, and the next statement lingers until as many wait. */
  private lastSize = 0;

  constructor(max: number, send: (context: G, items: T[]) => Promise<void>, lingerMs = 0) {
    this.max = max;
    this.send = send;
    this.lingerMs = lingerMs;
  }

  /** The deliveries waiting for the group's next statement (none when the group is idle). */
  waiting(key: string): readonly T[] {
    return this.groups.get(key)?.items ?? [];
  }

  /** Adds a delivery to the group `key` (created with `context()` when idle). */
  add(key: string, context: () => G, item: T): void {
    let g = this.groups.get(key);
    if (!g) this.groups.set(key, (g = { context: context(), items: [], busy: false, scheduled: false, lingering: undefined }));
    g.items.push(item);
    if (g.lingering !== undefined && g.items.length >= this.lastSize) {
      // As many are waiting as the last statement carried (never more than `max`): the linger is over.
      clearTimeout(g.lingering);
      g.lingering = undefined;
      g.scheduled = false;
    }
    this.schedule(key, g);
  }

  /**
   * The group's next statement goes at the end of this turn, or, when the last statement carried several
   * deliveries and fewer than that wait, after the linger (or once that many wait), unless one is out
   * (it is scheduled again when that one is back).
   */
  private schedule(key: string, g: Group<G, T>): void {
    if (g.busy || g.scheduled || g.items.length === 0) return;
    g.scheduled = true;
    const go = () => {
      g.scheduled = false;
      g.lingering = undefined;
      void this.next(key, g);
    };
    // At least one waits here, so fewer than the last statement carried means it carried several.
    if (this.lingerMs > 0 && g.items.length < this.lastSize) g.lingering = setTimeout(go, this.lingerMs);
    else setImmediate(go);
  }

  private async next(key: string, g: Group<G, T>): Promise<void> {
    if (g.busy || g.items.length === 0) return;
    const items = g.items.splice(0, this.max);
    this.lastSize = items.length;
    g.busy = true;
    await settledOrPast(this.send(g.context, items), stageBounds()?.ms);
    g.busy = false;
    if (g.items.length > 0) this.schedule(key, g);
    else if (this.groups.get(key) === g) this.groups.delete(key);
  }
}
