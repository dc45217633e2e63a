// When the coalescers (start-coalescer.ts, finish-coalescer.ts) send a group's shared statement: at
// the end of the event-loop turn its first delivery came in, or, while the group's previous statement
// is out, once that one has come back, with everything that came meanwhile (up to `max`). So a quiet
// worker sends each delivery's statement at once, and a busy one sends fewer, larger statements. A
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
  /** Its next statement is due at the end of this event-loop turn. */
  scheduled: boolean;
}

export class SharedStatements<G, T> {
  /** The groups with deliveries waiting or a statement out (one is forgotten once idle). */
  private readonly groups = new Map<string, Group<G, T>>();

  private readonly max: number;

  /** Sends one statement for `items` and settles each of them; its rejection is ignored. */
  private readonly send: (context: G, items: T[]) => Promise<void>;

  constructor(max: number, send: (context: G, items: T[]) => Promise<void>) {
    this.max = max;
    this.send = send;
  }

  /** The deliveries waiting for the group's next statement (none when the group is idle). */
  waiting(key: string): readonly T[] {
    return this.groups.get(key)?.items ?? [];
  }

  /** Adds a delivery to the group `key` (created with `context()` when idle). */
  add(key: string, context: () => G, item: T): void {
    let g = this.groups.get(key);
    if (!g) this.groups.set(key, (g = { context: context(), items: [], busy: false, scheduled: false }));
    g.items.push(item);
    this.schedule(key, g);
  }

  /** The group's next statement goes at the end of this turn, unless one is out (it goes when that one is back). */
  private schedule(key: string, g: Group<G, T>): void {
    if (g.busy || g.scheduled || g.items.length === 0) return;
    g.scheduled = true;
    setImmediate(() => {
      g.scheduled = false;
      void this.next(key, g);
    });
  }

  private async next(key: string, g: Group<G, T>): Promise<void> {
    if (g.busy || g.items.length === 0) return;
    const items = g.items.splice(0, this.max);
    g.busy = true;
    await settledOrPast(this.send(g.context, items), stageBounds()?.ms);
    g.busy = false;
    if (g.items.length > 0) this.schedule(key, g);
    else if (this.groups.get(key) === g) this.groups.delete(key);
  }
}
