// Which active runs have no live delivery any more: their message was lost (a queue restarted empty, a
// message deleted or expired) or their worker died while the queue lost the message too. Shared by the
// rescuer (src/work/runtime/maintain/rescuer.ts), its gauges and `svc runs list --stuck`.
//
// A run is overdue when nothing has happened to it for longer than any live delivery can take:
// - queued with its message sent, or running (received, started or not): its last progress (the
//   later of updated_at, the outbox row's sent_at and its last trail event) + the queue's visibility
//   timeout + the unit's timeoutSeconds + the margin. A message in the queue is received within its
//   visibility timeout once a worker is free; a delivery whose worker died comes back after it; a
//   handler is aborted at timeoutSeconds and its delivery settles;
// - retrying: the retry's due (its `retry_scheduled` instant + retryInSeconds) + the margin.
// A run whose outbox row is still pending is the relay's, never overdue. A run a healthy worker holds
// is never overdue either: its handler is aborted at timeoutSeconds and its delivery settles (the
// heartbeat extends the message's visibility, which the database does not see). A group member, and a
// default unit's usual run in its first 100 ms, executes before its registration is written
// (src/work/runtime/execute/group-execution.ts, deferred-registration.ts): one received long after its
// send, once a backlog drained, or held up past its window, can be rescued while it runs; the duplicate
// meets the ledger and replays, and a deferred registration's finish finds the run changed (a rescue
// stamps its updated_at) and is refused.
import type { Sql, TxSql } from '../../../db/client.ts';
import type { QueueName } from '../../../queue/names.ts';
import type { OverdueState } from '../../../observe/rescue-metrics.ts';
import type { RunStatus } from './run-store.ts';
import { OUTBOX_TABLE, RUN_TABLE, TRAIL_TABLE, type RunScope } from './scope-tables.ts';
import { DEFAULT_TIMEOUT_SECONDS } from '../../define/unit.ts';

/** How long a delivery may take before its run counts as overdue. */
export interface OverdueWindows {
  /** Visibility timeout per queue, seconds. */
  visibilitySeconds: Readonly<Record<QueueName, number>>;
  /** timeoutSeconds per unit name; a unit not listed takes DEFAULT_TIMEOUT_SECONDS (60). */
  unitTimeoutSeconds: ReadonlyMap<string, number>;
  /** Added to every window, ms. */
  marginMs: number;
  /**
   * Messages sent before this instant (timestamptz text) are known lost, whatever their window: the
   * in-memory queue server started empty then (npm start). Default none.
   */
  lostBefore?: string | null;
}

/** Why a run is overdue, as the rescue's trail detail and metric label say it. */
export type StrandedReason = 'sent_not_received' | 'running_without_lease' | 'retry_overdue' | 'queue_restarted' | 'payload_gone';

export interface StrandedRun {
  scope: RunScope;
  runId: string;
  /** Numeric tenant id (internal), null for a platform run. */
  tenantId: string | null;
  /** Tenant uid, null for a platform run. */
  tenant: string | null;
  unit: string;
  queue: QueueName;
  status: RunStatus;
  attempts: number;
  state: OverdueState;
  reason: StrandedReason;
  /** Whether the run still has its outbox row (its payload). */
  hasOutbox: boolean;
  /** Seconds since the run's last progress. */
  waitedSeconds: number;
  /** The run's last progress, ISO 8601 UTC. */
  since: string;
  /** Rescues so far: `queued` events of the rescuer on its trail (their detail has `rescue`). */
  rescues: number;
  /** A retrying run's retry due (timestamptz text), else null: a rescue does not send it before then. */
  retryDue: string | null;
}

export type StrandedSelection =
  /** The oldest active runs by last change, at most `limit` examined, after `after` (a keyset cursor). */
  | { scan: { limit: number; after?: { updatedAt: string; runId: string } | null } }
  /** Exactly these runs (the rescuer's recheck after locking them). */
  | { ids: readonly string[] };

export interface StrandedScan {
  runs: StrandedRun[];
  /** Runs examined (scan mode); `limit` of them: more may wait after `last`. */
  examined: number;
  /** The last run examined, for the next scan's cursor. */
  last: { updatedAt: string; runId: string } | null;
}

const STATE: Record<string, OverdueState> = { queued: 'sent', running: 'running', retrying: 'retrying' };

/**
 * The overdue runs of one scope. Scan mode walks sql/work/0022_rescue.sql's index of active runs by
 * updated_at (a run's last progress is never before its updated_at, so a run changed within the
 * margin is not read), at most `limit` rows, then looks up each one's outbox row (by run id) and last
 * trail event (by run id, newest first).
 */
export async function findStrandedRuns(tx: Sql | TxSql, scope: RunScope, windows: OverdueWindows, selection: StrandedSelection): Promise<StrandedScan> {
  const names = [...windows.unitTimeoutSeconds.keys()];
  const timeouts = names.map((n) => windows.unitTimeoutSeconds.get(n)!);
  const v = windows.visibilitySeconds;
  const margin = tx`make_interval(secs => ${windows.marginMs / 1000}::float8)`;
  const lostBefore = windows.lostBefore ?? null;
  const lost = tx`${lostBefore}::text::timestamptz`;
  const tenantColumns =
    scope === 'tenant'
      ? tx`r.tenant_id::text AS tenant_id, (SELECT t.uid FROM tenants t WHERE t.id = r.tenant_id) AS tenant`
      : tx`NULL::text AS tenant_id, NULL::text AS tenant`;
  const pick =
    'ids' in selection
      ? tx`AND r.run_id = ANY(${selection.ids as string[]}::uuid[])`
      : // now(), not clock_timestamp(): a stable bound is an index condition, a volatile one only a filter.
        tx`AND r.updated_at < greatest(now() - ${margin}, COALESCE(${lost}, '-infinity'::timestamptz))
           ${selection.scan.after ? tx`AND (r.updated_at, r.run_id) > (${selection.scan.after.updatedAt}::text::timestamptz, ${selection.scan.after.runId}::uuid)` : tx``}
           ORDER BY r.updated_at, r.run_id LIMIT ${selection.scan.limit}`;
  const rows = await tx<Record<string, unknown>[]>`
    WITH s AS MATERIALIZED (
      SELECT r.run_id, ${tenantColumns}, r.name, r.queue, r.status, r.attempts, r.updated_at
        FROM ${tx(RUN_TABLE[scope])} r
       WHERE r.status IN ('queued', 'running', 'retrying') ${pick}),
    f AS (
      SELECT s.*, o.id IS NOT NULL AS has_outbox,
             greatest(s.updated_at, o.sent_at, l.occurred_at) AS since,
             CASE WHEN s.status = 'retrying' AND l.event = 'retry_scheduled'
                  THEN l.occurred_at + make_interval(secs => COALESCE((l.detail->>'retryInSeconds')::float8, 0)) END AS retry_due,
             COALESCE((SELECT u.t FROM unnest(${names}::text[], ${timeouts}::int[]) AS u(n, t) WHERE u.n = s.name LIMIT 1), ${DEFAULT_TIMEOUT_SECONDS}::int) AS timeout_s,
             CASE s.queue WHEN 'critical' THEN ${v.critical}::int WHEN 'default' THEN ${v.default}::int
                          WHEN 'bulk' THEN ${v.bulk}::int ELSE ${v.maintenance}::int END AS visibility_s
        FROM s
        LEFT JOIN ${tx(OUTBOX_TABLE[scope])} o ON o.run_id = s.run_id
        LEFT JOIN LATERAL (SELECT e.event, e.occurred_at, e.detail FROM ${tx(TRAIL_TABLE[scope])} e
                            WHERE e.run_id = s.run_id ORDER BY e.id DESC LIMIT 1) l ON true
       -- A pending outbox row is the relay's to send.
       WHERE o.id IS NULL OR o.sent_at IS NOT NULL),
    j AS (
      SELECT f.*, (${lost} IS NOT NULL AND f.since < ${lost}) AS lost,
             COALESCE(f.retry_due, f.since + make_interval(secs => f.visibility_s + f.timeout_s)) + ${margin} AS due_by
        FROM f),
    -- One row of scan figures (how many examined, the last one: the next scan's cursor), joined to
    -- the overdue runs (none: one row of figures alone).
    st AS (
      SELECT (SELECT count(*)::int FROM s) AS examined, l.updated_at AS last_at, l.run_id AS last_id
        FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT to_char(s.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS updated_at, s.run_id::text AS run_id
                                                 FROM s ORDER BY s.updated_at DESC, s.run_id DESC LIMIT 1) l ON true)
    SELECT st.examined, st.last_at, st.last_id, o.* FROM st LEFT JOIN (
      SELECT j.run_id::text AS run_id, j.tenant_id, j.tenant, j.name, j.queue, j.status, j.attempts, j.has_outbox, j.lost, j.since,
             extract(epoch FROM clock_timestamp() - j.since)::float8 AS waited_s,
             to_char(j.since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS since_text, j.retry_due::text AS retry_due,
             (SELECT count(*)::int FROM ${tx(TRAIL_TABLE[scope])} e WHERE e.run_id = j.run_id AND e.event = 'queued' AND e.detail ? 'rescue') AS rescues
        FROM j
       WHERE j.due_by < clock_timestamp() OR j.lost) o ON true
     ORDER BY o.since, o.run_id`;
  const figures = rows[0];
  const runs = rows.filter((r) => r.run_id !== null).map((r): StrandedRun => {
    const status = r.status as RunStatus;
    const state = STATE[status] ?? 'sent';
    const reason: StrandedReason = !r.has_outbox
      ? 'payload_gone'
      : r.lost
        ? 'queue_restarted'
        : state === 'sent'
          ? 'sent_not_received'
          : state === 'running'
            ? 'running_without_lease'
            : 'retry_overdue';
    return {
      scope,
      runId: r.run_id as string,
      tenantId: (r.tenant_id as string | null) ?? null,
      tenant: (r.tenant as string | null) ?? null,
      unit: r.name as string,
      queue: r.queue as QueueName,
      status,
      attempts: r.attempts as number,
      state,
      reason,
      hasOutbox: r.has_outbox as boolean,
      waitedSeconds: Math.max(0, r.waited_s as number),
      since: r.since_text as string,
      rescues: r.rescues as number,
      retryDue: (r.retry_due as string | null) ?? null,
    };
  });
  const examined = (figures?.examined as number | undefined) ?? 0;
  const last = figures?.last_id ? { updatedAt: figures.last_at as string, runId: figures.last_id as string } : null;
  return { runs, examined, last };
}
