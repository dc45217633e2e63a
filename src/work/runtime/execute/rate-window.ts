// Rate limits while Redis is down: the database holds the unit's window, shared by every workers process
// (consume/rate-limit.ts decides which holds it; Redis does while it answers).
//
// The place is taken in the delivery's registration transaction, the one that records its `received`
// event and makes the run `running` (registration.ts), so a place and its record commit together:
// - the window's transaction-level advisory lock serialises the registrations of one window, across
//   processes, for the few statements of a registration (never while a handler runs);
// - the next statement (a fresh snapshot, taken once the lock is held) counts the window's `received`
//   events of the last `perSeconds` that carry the window, through the partial indexes of
//   sql/work/0025_rate-windows.sql: a sliding log, exact, on the database's clock;
// - with room, the registration records `received` with {"rate_window": ...} in its detail and commits,
//   releasing the lock; without, it writes nothing of the delivery, and the message goes back to the
//   queue until the oldest place leaves the window, keeping its receives (execution.ts).
// Deliveries admitted by Redis carry no window on their `received` events, so the two counts are separate:
// when Redis goes away or comes back, the switch can let up to one window's `max` more through.
import type { TxSql } from '../../../db/client.ts';
import { TRAIL_TABLE, type RunScope } from '../store/scope-tables.ts';

/** A rate window the database decides (the consumer found Redis unusable). */
export interface DatabaseRateWindow {
  /** The window's name on the trail: the unit, or `<unit>/<tenant id>` for scope `tenant`. */
  key: string;
  max: number;
  windowMs: number;
}

/** The `received` detail that records a place in `window`. */
export function ratePlaceDetail(window: DatabaseRateWindow): { rate_window: string } {
  return { rate_window: window.key };
}

/**
 * Takes the window's lock for the rest of `tx` and looks for room: null when the window has a place for
 * this delivery (the caller records its `received` with ratePlaceDetail in the same transaction), else
 * the ms until its oldest place leaves the window.
 */
export async function roomInRateWindow(tx: TxSql, scope: RunScope, window: DatabaseRateWindow): Promise<number | null> {
  await tx`SELECT pg_advisory_xact_lock(hashtext('svc.rate-window'), hashtext(${window.key}))`;
  // The max-th newest place still in the window: while there is one, the window is full until it leaves.
  const [full] = await tx<{ wait_ms: number }[]>`
    SELECT GREATEST(1, ceil(extract(epoch FROM e.occurred_at + make_interval(secs => ${window.windowMs / 1000}) - clock_timestamp()) * 1000))::int AS wait_ms
      FROM ${tx(TRAIL_TABLE[scope])} e
     WHERE e.event = 'received' AND e.detail ? 'rate_window' AND (e.detail ->> 'rate_window') = ${window.key}
       AND e.occurred_at > clock_timestamp() - make_interval(secs => ${window.windowMs / 1000})
     ORDER BY e.occurred_at DESC OFFSET ${window.max - 1} LIMIT 1`;
  return full ? full.wait_ms : null;
}

/** The longest delay SQS gives a message sent back (SendMessage DelaySeconds). */
export const RATE_LIMIT_MAX_DELAY_SECONDS = 900;

/**
 * Seconds a message over its limit waits in the queue: until the window has room, plus a jitter of up
 * to a tenth of that (at least 0.25 s) so the messages refused together do not all come back in the same
 * instant; whole seconds (the queue's unit), at least 1, at most SQS's longest delay.
 */
export function rateLimitDelaySeconds(waitMs: number, random: () => number = Math.random): number {
  const jitterMs = random() * Math.max(250, waitMs / 10);
  return Math.min(RATE_LIMIT_MAX_DELAY_SECONDS, Math.max(1, Math.ceil((waitMs + jitterMs) / 1000)));
}
