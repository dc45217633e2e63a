// Fair share between tenants at the relay: at most `cap` runs of one group are sent and not yet final
// at any moment, per queue. A group is a tenant on one queue (tenant outbox) or a queue of the
// platform outbox (platform runs are one group of their own, never behind a tenant's rows).
//
// In-flight accounting without a counter: the relay stamps updated_at of a still-queued run when its
// message goes out (inFlightStamp), and every run insert (insertRun, the dispatcher's writeRuns) writes
// queued_at = updated_at from one clock reading, so the partial indexes of
// sql/work/0018_tenant-fairness.sql hold exactly the runs in flight (running, retrying, or queued and
// sent). A finish leaves the index in the UPDATE that finishes the run; the relay counts a group in
// O(its runs in flight), never O(its backlog), and no hot counter row serialises the finishes.
//
// The selection is ONE statement: each group's candidates are its `room` oldest due rows (room = cap -
// in flight, counted in the statement's snapshot), then locked FOR UPDATE SKIP LOCKED with
// `sent_at IS NULL` rechecked on the newest row version; within a group rows go out in the order they
// became due (available_at, then outbox id: dispatch order for rows without delay), groups take turns (round robin by rank, fewest in flight first). With several relays
// (a rolling deploy), two snapshots can disagree on which rows are a group's oldest (a dispatch
// transaction with smaller ids committing between them), and each would see the full room: so a
// fair pass first takes a transaction-level advisory lock per outbox (try, never wait; in the relay pass's opening statement, fairPassColumns). The relay
// holding it selects with a snapshot taken after the previous holder committed; another relay skips
// this pass and looks again shortly. Rows stay locked SKIP LOCKED-style against relays with
// fairness off.
//
// Work-conserving: a group no other group contends with on its queue may go past `cap`, up to its
// queue's lone room (`loneMax`), so a lone tenant's burst keeps every slot busy (a `groupCommit` slot
// holds up to 40 messages, and 40 in flight left its groups a few messages each: half the speed, twice
// the CPU per run). By default a queue's lone room is what the workers hold of it at once plus twice
// the cap (loneRoomsOf: a lone group's looks are LONE_REFILL_MS apart, twice a contended one's): no
// more than the slots can take between two looks, since every run in flight past that only waits in
// the queue, where a newcomer's first runs wait behind it, and each pass counts it (a default unit's
// burst under a room of 440 kept the newcomer waiting 179 ms at p99, under a room of 90, 52-82 ms,
// measured). SVC_TENANT_INFLIGHT_LONE_MAX sets one room for every queue instead. Contended means another group of the queue has rows pending or runs in flight (both
// read in the statement), or had a row sent by this relay within CONTENTION_MEMORY_MS (`recent`, kept in
// the relay's memory): a trickling tenant is seldom pending or in flight at the instant of a pass, and
// between two of its runs the lone room would queue hundreds of the burst's messages ahead of its next
// one. What a newcomer pays is bounded: its first runs wait behind what the burst has in flight when it
// arrives, and from its first pending row on the burst gets `cap` again. So the lone room is bounded
// twice: by the lone room, and in time: it applies only while the group's oldest run sent and still
// `queued` (not yet taken by a worker, or in a `groupCommit` group not yet committed) was sent less than
// LONE_ROOM_MAX_WAIT_MS ago. Past that, the workers are not keeping up and more in flight would only
// queue, so a newcomer's first runs wait about that long at most, however fast or loaded the workers.
import type { TxSql } from '../../../db/client.ts';
import { CONTENTION_MEMORY_MS, DEFAULT_CAPPED_POLL_MS, LONE_ROOM_MAX_WAIT_MS } from '../../../config/limits.ts';
import type { actorContextSelect } from '../../../db/unit-of-work.ts';
import { piece, scopeTables, type RunScope, type SqlPiece } from '../store/scope-tables.ts';
import { messagesPerUnit, type WorkUnit } from '../../define/unit.ts';

export { DEFAULT_CAPPED_POLL_MS };


/** The lone room: one number for every queue, or one per queue (a queue absent from it gets the cap only). */
export type LoneRoom = number | Readonly<Record<string, number>>;

/**
 * The default lone room of each queue the units consume: the messages their slots hold at once (one a
 * slot, up to GROUP_COMMIT_MAX_RUNS a `groupCommit` slot: messagesPerUnit) plus twice `cap`, the margin
 * the relay needs between two looks: `cap` is sized for a contended group's looks (CAPPED_REFILL_MS
 * apart), and a lone group's come twice as far apart (LONE_REFILL_MS). One workers process's slots: with
 * several processes on a queue, set SVC_TENANT_INFLIGHT_LONE_MAX to their sum plus twice the cap
 * (docs/fairness.md).
 */
export function loneRoomsOf(units: Iterable<Pick<WorkUnit, 'queue' | 'concurrency' | 'groupCommit'>>, cap: number): Record<string, number> {
  const rooms: Record<string, number> = {};
  for (const unit of units) rooms[unit.queue] = (rooms[unit.queue] ?? 2 * cap) + messagesPerUnit(unit);
  return rooms;
}

/** The lone room as the selection's arguments: per queue (the room, at least the cap) and for any other queue. */
function loneArguments(room: LoneRoom, cap: number): { queues: string[]; rooms: number[]; other: number } {
  if (typeof room === 'number') return { queues: [], rooms: [], other: Math.max(cap, room) };
  const entries = Object.entries(room);
  return { queues: entries.map(([queue]) => queue), rooms: entries.map(([, n]) => Math.max(cap, n)), other: cap };
}

/** The MessageGroupId of platform runs (a tenant's messages carry the tenant's uid). */
export const PLATFORM_MESSAGE_GROUP = 'platform';

export interface FairRow {
  id: string;
  run_id: string;
  tenant_id?: string;
  /** The tenant's public uid (tenant scope), for MessageGroupId. */
  tenant_uid?: string;
  queue: string;
  envelope: unknown;
  attempts: number;
  /** Fair selection only: every group with rows pending (sent this pass or held back) had its lone room: the relay then looks again less often. */
  lone?: boolean;
  /** Fair selection only: some group has due rows its room kept out of this pass (rows are held back). */
  held?: boolean;
}

/** A group's key in RecentGroups: the tenant id as text, PLATFORM_MESSAGE_GROUP for platform runs. */
export function groupOf(row: { tenant_id?: string | undefined }): string {
  return row.tenant_id ?? PLATFORM_MESSAGE_GROUP;
}

/**
 * The groups this relay sent rows for lately, per queue (both outboxes): a group sent for within
 * `memoryMs` contends with every other group of its queue, so none of them gets the lone room.
 */
export class RecentGroups {
  private readonly seen = new Map<string, Map<string, number>>();
  private readonly memoryMs: number;
  constructor(memoryMs: number = CONTENTION_MEMORY_MS) {
    this.memoryMs = memoryMs;
  }

  record(rows: ReadonlyArray<{ queue: string; tenant_id?: string | undefined }>, now: number = performance.now()): void {
    for (const row of rows) {
      let groups = this.seen.get(row.queue);
      if (!groups) this.seen.set(row.queue, (groups = new Map()));
      groups.set(groupOf(row), now);
    }
  }

  /** The (queue, group) pairs sent for within the memory, as two arrays for the statement. */
  active(now: number = performance.now()): { queues: string[]; groups: string[] } {
    const queues: string[] = [];
    const groups: string[] = [];
    for (const [queue, byGroup] of this.seen) {
      for (const [group, at] of byGroup) {
        if (now - at > this.memoryMs) byGroup.delete(group);
        else {
          queues.push(queue);
          groups.push(group);
        }
      }
      if (byGroup.size === 0) this.seen.delete(queue);
    }
    return { queues, groups };
  }
}

/**
 * A fair pass's hold on its outboxes, as columns of a statement that runs before the selections (the
 * relay's opening, which goes out with BEGIN; `takeFairPasses` alone): per outbox a transaction-level
 * advisory lock, tried, never waited for (`fair_tenant`, `fair_platform`: false when another relay holds
 * that outbox's fair pass), and the planner settings of the selections, for the rest of the transaction.
 * The selections must be statements of their own, after this one: each then reads with a snapshot taken
 * once the lock is held, so after the previous holder committed what it sent (taken in the selection
 * itself, the snapshot could predate that commit, and two relays together could pass the cap). They may
 * go out in the same write as this one, before its answer: each reads whether this statement took its
 * outbox's lock from a transaction-local setting it leaves (fairPassSetting) and selects nothing when it
 * did not, so the relay's pass spends no round trip of its own on taking its locks.
 *
 * The settings: the in-flight count must walk its partial index with a plain index scan: every run leaves
 * dead entries there (its status updates cannot be HOT), a plain scan marks them dead as it passes so the
 * next pass skips them, and a bitmap scan (the planner's choice once the index has grown) never does, so
 * each pass re-read every dead entry since the last vacuum (530 entries for 18 runs in flight). No
 * sequential scan either: the statistics of task_runs never know how many runs are in flight (a burst is
 * analysed while all of it is queued), and on their word the planner read the whole table for the probes
 * of the other tenants in flight (12,700 rows, 7.5 of a pass's 10 ms, measured). Every table the
 * selection reads has the index it needs. And its generic plan, made once per connection: its LIMITs,
 * cap and rooms are parameters, so each custom plan looked cheaper than the generic one and the
 * statement was planned anew on every pass (0.10-0.17 ms, against its execution of about as much); with
 * sequential and bitmap scans off, the generic plan walks the same indexes a custom one does.
 * Harmless outside a transaction (an opening whose BEGIN failed): the locks and settings end with it, so
 * a selection behind it finds its setting unset and selects nothing.
 */
export function fairPassColumns(tx: TxSql, scopes: readonly RunScope[]) {
  const lock = (scope: RunScope) =>
    scopes.includes(scope)
      ? tx`set_config(${fairPassSetting(scope)}, pg_try_advisory_xact_lock(hashtextextended(${`svc.relay.fair.${scope}`}, 0))::text, true) = 'true'`
      : tx`false`;
  return tx`${lock('tenant')} AS fair_tenant, ${lock('platform')} AS fair_platform, ${selectionPlanSettings(tx)}`;
}

/**
 * The planner settings of a pass's selections, set by the statement before them in the same transaction:
 * the pending-row indexes' order (no sequential or bitmap scan of an outbox of sent rows), and the
 * generic plan, planned once per connection; a custom plan per pass costs more to plan (0.3 ms) than
 * the selection costs to run.
 */
export function selectionPlanSettings(tx: TxSql) {
  return tx`set_config('enable_bitmapscan', 'off', true) AS plan_bitmapscan, set_config('enable_seqscan', 'off', true) AS plan_seqscan,
            set_config('plan_cache_mode', 'force_generic_plan', true) AS plan_cache`;
}

/** The transaction-local setting in which fairPassColumns leaves whether it took the outbox's fair pass ('true' or 'false'). */
function fairPassSetting(scope: RunScope): string {
  return `svc.relay_fair_${scope}`;
}

/** The fair selection's gate: this transaction took the outbox's fair pass in an earlier statement (fairPassColumns). */
function fairPassHeld(scope: RunScope): string {
  return `current_setting('${fairPassSetting(scope)}', true) = 'true'`;
}

/** What fairPassColumns answered: per outbox, whether this transaction holds its fair pass. */
export interface FairPasses {
  fair_tenant: boolean;
  fair_platform: boolean;
}

/** fairPassColumns as a statement of its own (a fair selection outside the relay's pass). */
export async function takeFairPasses(tx: TxSql, scopes: readonly RunScope[]): Promise<FairPasses> {
  const [held] = await tx<FairPasses[]>`SELECT ${fairPassColumns(tx, scopes)}`;
  return held!;
}

/** What a fair selection needs to know of the lone room (see the header). */
export interface LoneOptions {
  loneMax: LoneRoom;
  /** The groups the relay sent for lately (RecentGroups.active). */
  recent?: { queues: string[]; groups: string[] } | undefined;
  maxWaitMs?: number | undefined;
}

/** fairRowsQuery, sent and answered. */
export async function selectFairRows(...args: Parameters<typeof fairRowsQuery>): Promise<FairRow[]> {
  return (await fairRowsQuery(...args)) as unknown as FairRow[];
}

/**
 * The relay's row selection with fairness on, as a statement not yet sent (the relay's pass sends it in
 * the write of its BEGIN and opening): locks at most `batchSize` due pending rows of `scope`, no group
 * beyond `cap` in flight, or beyond its queue's `loneMax` when nothing contends with it there (`recent`:
 * the groups the relay sent for lately; see the header). `context` is the relay's actor-context select,
 * applied first. It selects nothing unless an earlier statement of the transaction took the outbox's
 * fair pass (fairPassColumns).
 */
export function fairRowsQuery(
  tx: TxSql,
  scope: RunScope,
  cap: number,
  batchSize: number,
  context: ReturnType<typeof actorContextSelect>,
  lone: LoneOptions = { loneMax: 0 },
) {
  const rooms = loneArguments(lone.loneMax, cap);
  // The group's lone room (lr.lone_max), by its queue.
  const loneRoom = tx`CROSS JOIN LATERAL (SELECT COALESCE((SELECT u.room FROM unnest((SELECT ${rooms.queues}::text[]), (SELECT ${rooms.rooms}::int[])) AS u(queue, room)
                                                            WHERE u.queue = g.queue), ${rooms.other}::int) AS lone_max) lr`;
  const recent = lone.recent ?? { queues: [], groups: [] };
  // A sent run still queued past this instant waits for the workers: the lone room stops there.
  const freshSince = tx`clock_timestamp() - ${lone.maxWaitMs ?? LONE_ROOM_MAX_WAIT_MS}::int * interval '1 millisecond'`;
  const held = tx.unsafe(fairPassHeld(scope));
  if (scope === 'tenant') {
    return tx`
      WITH RECURSIVE ctx AS MATERIALIZED (${context}),
      -- No group at all unless this transaction holds the outbox's fair pass (fairPassColumns).
      grp AS (
        (SELECT o.tenant_id, o.queue FROM outbox_messages o WHERE o.sent_at IS NULL AND ${held} ORDER BY o.tenant_id, o.queue LIMIT 1)
        UNION ALL
        SELECT n.tenant_id, n.queue FROM grp g CROSS JOIN LATERAL (
          SELECT o.tenant_id, o.queue FROM outbox_messages o
           WHERE o.sent_at IS NULL AND (o.tenant_id, o.queue) > (g.tenant_id, g.queue)
           ORDER BY o.tenant_id, o.queue LIMIT 1) n),
      -- The lone room: no other group of the queue pending (grp), sent for lately (recent) or in flight.
      -- The in-flight probe reads the other tenants' ranges of the index only, never the lone group's runs.
      room AS (
        SELECT g.tenant_id, g.queue, f.in_flight, lone.lone,
               CASE WHEN lone.lone THEN lr.lone_max ELSE ${cap}::int END - f.in_flight AS room
          FROM grp g CROSS JOIN LATERAL (
            -- The oldest sent, still queued run is read in the same walk of the group's runs in flight (by
            -- updated_at, the planner walked the whole backlog, whose runs are queued too: 3,400 rows a pass).
            SELECT count(*)::int AS in_flight, min(r.updated_at) FILTER (WHERE r.status = 'queued') AS oldest_sent FROM task_runs r
             WHERE r.tenant_id = g.tenant_id AND r.queue = g.queue
               AND (r.status IN ('running', 'retrying') OR (r.status = 'queued' AND r.updated_at > r.queued_at))
               -- A run executed without its message (its row still pending) is not in flight. A scalar
               -- subquery, not NOT EXISTS: an anti join lets the planner hash the whole backlog.
               AND (SELECT p.sent_at IS NULL FROM outbox_messages p WHERE p.run_id = r.run_id) IS NOT TRUE) f
          ${loneRoom}
          CROSS JOIN LATERAL (SELECT lr.lone_max > ${cap}::int
                     AND NOT EXISTS (SELECT 1 FROM grp x WHERE x.queue = g.queue AND x.tenant_id <> g.tenant_id)
                     AND NOT EXISTS (SELECT 1 FROM unnest((SELECT ${recent.queues}::text[]), (SELECT ${recent.groups}::text[])) AS rc(queue, grp)
                                      WHERE rc.queue = g.queue AND rc.grp <> g.tenant_id::text)
                     AND NOT EXISTS (SELECT 1 FROM task_runs r WHERE r.tenant_id < g.tenant_id AND r.queue = g.queue
                                        AND (r.status IN ('running', 'retrying') OR (r.status = 'queued' AND r.updated_at > r.queued_at)))
                     AND NOT EXISTS (SELECT 1 FROM task_runs r WHERE r.tenant_id > g.tenant_id AND r.queue = g.queue
                                        AND (r.status IN ('running', 'retrying') OR (r.status = 'queued' AND r.updated_at > r.queued_at)))
                     AND (f.oldest_sent > ${freshSince}) IS NOT FALSE AS lone) lone),
      -- The group's oldest due rows, in the order they became due (for rows dispatched without delay,
      -- dispatch order), read from the front of sql/work/0021's index: only the rows this pass takes,
      -- never the rows already sent (ordered by id alone, the planner walked the primary key past
      -- them) nor the delayed ones (they sort after every due row).
      cand AS (
        SELECT c.id, c.rank, rm.in_flight FROM room rm CROSS JOIN LATERAL (
          SELECT o.id, row_number() OVER (ORDER BY o.available_at, o.id) AS rank FROM outbox_messages o
           WHERE o.tenant_id = rm.tenant_id AND o.queue = rm.queue AND o.sent_at IS NULL AND o.available_at <= clock_timestamp()
           ORDER BY o.available_at, o.id LIMIT least(rm.room, ${batchSize}::int)) c
         WHERE rm.room > 0),
      pick AS MATERIALIZED (SELECT id, rank, in_flight FROM cand ORDER BY rank, in_flight, id LIMIT ${batchSize}::int),
      -- The chosen ids as one array: the rows are then fetched by primary key (never a hash of the backlog).
      chosen AS MATERIALIZED (SELECT array_agg(id ORDER BY rank, in_flight, id) AS ids FROM pick)
      SELECT o.id::text AS id, o.run_id, o.tenant_id::text AS tenant_id,
             (SELECT t.uid FROM tenants t WHERE t.id = o.tenant_id) AS tenant_uid, o.queue, o.envelope, o.attempts,
             -- Every group with rows pending had its lone room, those this pass held back at the cap too.
             (SELECT bool_and(rm.lone) FROM room rm) AS lone,
             -- Some group has due rows past what its room let this pass take: the group's row just past them
             -- in due order is due (read from the front of its due-order index, its room + 1 entries,
             -- never the delayed rows behind the due ones).
             (SELECT bool_or((SELECT d.available_at <= clock_timestamp() FROM outbox_messages d
                               WHERE d.tenant_id = rm.tenant_id AND d.queue = rm.queue AND d.sent_at IS NULL
                               ORDER BY d.available_at, d.id OFFSET greatest(least(rm.room, ${batchSize}::int), 0) LIMIT 1) IS TRUE)
                FROM room rm) AS held
        FROM outbox_messages o
       WHERE o.id = ANY ((SELECT ids FROM chosen)::bigint[]) AND o.sent_at IS NULL AND EXISTS (SELECT 1 FROM ctx)
       ORDER BY array_position((SELECT ids FROM chosen), o.id)
         FOR UPDATE OF o SKIP LOCKED`;
  }
  return tx`
    WITH RECURSIVE ctx AS MATERIALIZED (${context}),
    grp AS (
      (SELECT o.queue FROM platform_outbox_messages o WHERE o.sent_at IS NULL AND ${held} ORDER BY o.queue LIMIT 1)
      UNION ALL
      SELECT n.queue FROM grp g CROSS JOIN LATERAL (
        SELECT o.queue FROM platform_outbox_messages o WHERE o.sent_at IS NULL AND o.queue > g.queue ORDER BY o.queue LIMIT 1) n),
    -- The platform is one group per queue: lone unless a tenant was sent for on that queue lately.
    room AS (
      SELECT g.queue, f.in_flight, lone.lone,
             CASE WHEN lone.lone THEN lr.lone_max ELSE ${cap}::int END - f.in_flight AS room
        FROM grp g CROSS JOIN LATERAL (
          SELECT count(*)::int AS in_flight, min(r.updated_at) FILTER (WHERE r.status = 'queued') AS oldest_sent FROM platform_task_runs r
           WHERE r.queue = g.queue
             AND (r.status IN ('running', 'retrying') OR (r.status = 'queued' AND r.updated_at > r.queued_at))
             AND (SELECT p.sent_at IS NULL FROM platform_outbox_messages p WHERE p.run_id = r.run_id) IS NOT TRUE) f
        ${loneRoom}
        CROSS JOIN LATERAL (SELECT lr.lone_max > ${cap}::int
                   AND NOT EXISTS (SELECT 1 FROM unnest((SELECT ${recent.queues}::text[]), (SELECT ${recent.groups}::text[])) AS rc(queue, grp)
                                    WHERE rc.queue = g.queue AND rc.grp <> ${PLATFORM_MESSAGE_GROUP})
                   AND (f.oldest_sent > ${freshSince}) IS NOT FALSE AS lone) lone),
    cand AS (
      SELECT c.id, c.rank, rm.in_flight FROM room rm CROSS JOIN LATERAL (
        SELECT o.id, row_number() OVER (ORDER BY o.available_at, o.id) AS rank FROM platform_outbox_messages o
         WHERE o.queue = rm.queue AND o.sent_at IS NULL AND o.available_at <= clock_timestamp()
         ORDER BY o.available_at, o.id LIMIT least(rm.room, ${batchSize}::int)) c
       WHERE rm.room > 0),
    pick AS MATERIALIZED (SELECT id, rank, in_flight FROM cand ORDER BY rank, in_flight, id LIMIT ${batchSize}::int),
    chosen AS MATERIALIZED (SELECT array_agg(id ORDER BY rank, in_flight, id) AS ids FROM pick)
    SELECT o.id::text AS id, o.run_id, o.queue, o.envelope, o.attempts, (SELECT bool_and(rm.lone) FROM room rm) AS lone,
           (SELECT bool_or((SELECT d.available_at <= clock_timestamp() FROM platform_outbox_messages d
                             WHERE d.queue = rm.queue AND d.sent_at IS NULL
                             ORDER BY d.available_at, d.id OFFSET greatest(least(rm.room, ${batchSize}::int), 0) LIMIT 1) IS TRUE)
              FROM room rm) AS held
      FROM platform_outbox_messages o
     WHERE o.id = ANY ((SELECT ids FROM chosen)::bigint[]) AND o.sent_at IS NULL AND EXISTS (SELECT 1 FROM ctx)
     ORDER BY array_position((SELECT ids FROM chosen), o.id)
       FOR UPDATE OF o SKIP LOCKED`;
}

/**
 * Marks the runs whose messages went out as in flight (updated_at of a still-queued run), in the
 * relay's transaction: they count against their group before another pass can see their rows sent. A
 * piece of the relay's statement that records a pass's sends (relay.ts recordSent), `RETURNING 1`.
 */
export function inFlightStamp(scope: RunScope, runIds: readonly string[]): SqlPiece {
  // The array through a scalar subquery: sized as a parameter's in every plan, so the generic plan is
  // kept (read straight from the parameter, each custom plan looked cheaper and was made anew per pass).
  return piece`UPDATE ${scopeTables(scope).runs} SET updated_at = clock_timestamp()
     WHERE run_id = ANY((SELECT ${runIds}::uuid[])::uuid[]) AND status = 'queued' RETURNING 1`;
}

/**
 * Whether due rows still wait (after a pass that filled no batch): with fairness on they wait for room,
 * which opens when runs finish, so the relay looks again within DEFAULT_CAPPED_POLL_MS.
 */
export async function dueRowsWaiting(tx: TxSql, scope: RunScope): Promise<boolean> {
  const table = scope === 'tenant' ? 'outbox_messages' : 'platform_outbox_messages';
  const rows = await tx`SELECT 1 FROM ${tx(table)} WHERE sent_at IS NULL AND available_at <= clock_timestamp() LIMIT 1`;
  return rows.length > 0;
}

/** Per-group in-flight counts (the relay's own definition), for tests, benchmarks and operators. */
export async function inFlightByGroup(tx: TxSql, scope: RunScope): Promise<Array<{ group: string; queue: string; inFlight: number }>> {
  const rows =
    scope === 'tenant'
      ? await tx`SELECT r.tenant_id::text AS grp, r.queue, count(*)::int AS n FROM task_runs r
          WHERE (r.status IN ('running', 'retrying') OR (r.status = 'queued' AND r.updated_at > r.queued_at))
            AND (SELECT p.sent_at IS NULL FROM outbox_messages p WHERE p.run_id = r.run_id) IS NOT TRUE
          GROUP BY 1, 2 ORDER BY 1, 2`
      : await tx`SELECT 'platform' AS grp, r.queue, count(*)::int AS n FROM platform_task_runs r
          WHERE (r.status IN ('running', 'retrying') OR (r.status = 'queued' AND r.updated_at > r.queued_at))
            AND (SELECT p.sent_at IS NULL FROM platform_outbox_messages p WHERE p.run_id = r.run_id) IS NOT TRUE
          GROUP BY 1, 2 ORDER BY 1, 2`;
  return rows.map((r) => ({ group: r.grp as string, queue: r.queue as string, inFlight: r.n as number }));
}
