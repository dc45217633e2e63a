// The database's count of a unit's rate-limit windows, used while Redis is down or slow (the shared
// windows live in Redis: src/kv/rate-limit.ts, whose arithmetic this repeats). One statement reads
// the previous window's count and counts this execution in the current window's row with an UPSERT
// whose condition is the limit, on the database clock, so concurrent workers serialize on the row and
// never admit past `max` together. A refusal answers the ms until the window has room.
//
// Rows of windows older than the one before are of no use: the worker that opens a window of a unit
// (its count comes back 1) deletes them, once per window and unit.
import type { Sql } from '../../../db/client.ts';
import type { RateDecision } from '../../../kv/rate-limit.ts';

export interface RateWindow {
  unit: string;
  /** '' for a limit of the whole unit, the tenant id for a per-tenant one. */
  scopeKey: string;
  max: number;
  windowMs: number;
}

/** Admits one execution under the window's limit, or says how long to wait (ms). Throws when the database fails. */
export async function admitInDatabase(sql: Sql, w: RateWindow): Promise<RateDecision> {
  const [row] = await sql<{ admitted: number | null; elapsed: string; previous: number; current: number }[]>`
    WITH clock AS (
      SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms),
    win AS (
      SELECT to_timestamp(((now_ms / ${w.windowMs}) * ${w.windowMs}) / 1000.0) AS start,
             to_timestamp(((now_ms / ${w.windowMs} - 1) * ${w.windowMs}) / 1000.0) AS previous_start,
             now_ms % ${w.windowMs} AS elapsed
        FROM clock),
    counts AS (
      SELECT coalesce((SELECT r.admitted FROM work_rate_windows r WHERE r.unit = ${w.unit} AND r.scope_key = ${w.scopeKey}
                         AND r.window_ms = ${w.windowMs} AND r.window_start = win.previous_start), 0) AS previous,
             coalesce((SELECT r.admitted FROM work_rate_windows r WHERE r.unit = ${w.unit} AND r.scope_key = ${w.scopeKey}
                         AND r.window_ms = ${w.windowMs} AND r.window_start = win.start), 0) AS current
        FROM win),
    counted AS (
      INSERT INTO work_rate_windows AS r (unit, scope_key, window_ms, window_start, admitted)
      SELECT ${w.unit}, ${w.scopeKey}, ${w.windowMs}, win.start, 1 FROM win, counts
       WHERE counts.previous * (${w.windowMs} - win.elapsed) < ${w.max}::bigint * ${w.windowMs}
      ON CONFLICT (unit, scope_key, window_ms, window_start) DO UPDATE SET admitted = r.admitted + 1
       WHERE (SELECT counts.previous * (${w.windowMs} - win.elapsed) FROM win, counts) + r.admitted::bigint * ${w.windowMs}
             < ${w.max}::bigint * ${w.windowMs}
      RETURNING r.admitted)
    SELECT (SELECT admitted FROM counted) AS admitted, win.elapsed::text AS elapsed, counts.previous, counts.current FROM win, counts`;
  const r = row!;
  if (r.admitted !== null) {
    if (r.admitted === 1) await forgetOldWindows(sql, w);
    return { admitted: true };
  }
  return { admitted: false, waitMs: waitForRoom(w, Number(r.elapsed), r.previous, r.current) };
}

/**
 * The ms until previous × (windowMs − elapsed) / windowMs + current < max, the current window's count
 * as read (the same formula as the Redis script's).
 */
export function waitForRoom(w: Pick<RateWindow, 'max' | 'windowMs'>, elapsed: number, previous: number, current: number): number {
  const left = w.windowMs - elapsed;
  const wait =
    current < w.max && previous > 0
      ? left - (w.windowMs * (w.max - current)) / previous
      : left + w.windowMs - (w.windowMs * w.max) / Math.max(1, current);
  return Math.max(1, Math.floor(wait) + 1);
}

async function forgetOldWindows(sql: Sql, w: RateWindow): Promise<void> {
  await sql`DELETE FROM work_rate_windows
             WHERE unit = ${w.unit} AND window_start < clock_timestamp() - make_interval(secs => ${(2 * w.windowMs) / 1000})`;
}
