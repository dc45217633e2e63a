// The opening of a group commit's effect transaction (group-execution.ts): ONE statement, sent in the
// same write as BEGIN (src/db/pipelined-begin.ts). It
// - applies the actor context and the unit's statement deadline (transaction-local settings);
// - takes every member's key advisory lock (transaction-scoped), in the members' order;
// - waits for a relay pass still holding a member's outbox row (KEY SHARE on the rows not marked sent,
//   as a registration does, src/work/runtime/store/run-store.ts startDelivery), so what the group records after
//   follows the relay's `sent`, and keeps a row still pending (a relay died mid-pass) from being sent
//   again while the group runs (such a member registers at once, group-execution.ts);
// - reads each member's run (not locked: nothing of the run row is held while the handlers run);
// - claims, fresh, the key of every member whose lock it took and whose run is still active.
//
// A member whose key it claimed fresh (and whose outbox row is marked sent) has its registration
// deferred to the group's finish: the run moves
// to `succeeded` with attempts + 1 and its `received`, `started` and `succeeded` rows in one statement
// and one commit, with the effect. Any other member (its key held elsewhere, already in the ledger, its
// run final or missing) registers on its own first, as a lone delivery does (registration.ts).
//
// Harmless outside a transaction, as the opening must be (pipelined-begin.ts): it claims only when the
// transaction was marked in the same write as BEGIN (IN_TRANSACTION_SETTING, beginPipelined's
// markTransaction), so if BEGIN failed it claims nothing, and its settings and locks end with it.
import type { PendingQuery, Row } from 'postgres';
import type { TxSql } from '../../../db/client.ts';
import { IN_TRANSACTION_SETTING } from '../../../db/pipelined-begin.ts';
import type { FreshClaim } from '../store/idempotency.ts';
import { ACTIVE_RUN_STATUSES, toRunRow, type ActorSettings, type RunRow } from '../store/run-store.ts';
import type { RunScope } from '../store/scope-tables.ts';

export interface GroupOpeningInput {
  scope: RunScope;
  tenantId: string | null;
  settings: ActorSettings;
  timeoutMs: number;
  leaseMs: number;
  members: ReadonlyArray<{ runId: string; /** advisoryKeyOf(key): a bigint as decimal text. */ advisoryKey: string; key: Buffer; fingerprint: Buffer }>;
}

export interface OpenedMember {
  /** This transaction holds the member's key advisory lock. */
  locked: boolean;
  /** The run as read (not locked); null when it does not exist. */
  run: RunRow | null;
  /** A platform run's scheduled moment, else null. */
  scheduledFor: string | null;
  /** The member's key, claimed fresh by the opening: its registration is deferred to the finish (unless `unsent`). */
  fresh: FreshClaim | null;
  /**
   * Its outbox row was still pending once the relay's pass holding it (if any) had committed: a relay
   * died between its send and its commit. Such a member registers at once, as a lone delivery does,
   * which marks the row sent for good (a deferred mark would go with a rollback, and a relay pass could
   * send the message again).
   */
  unsent: boolean;
}

export interface OpenedGroup {
  /** The session's values of KEPT_SETTINGS before any handler ran, in that order (restoreGroupSettings puts them back). */
  kept: string[];
  pid: number;
  xactStart: string;
  /** The database clock once the opening's waits were over: the deferred members' receive instant (text, to the microsecond). */
  receivedAt: string;
  /** The same instant in epoch milliseconds. */
  receivedAtMs: number;
  members: OpenedMember[];
}

/** The opening statement (one row per member, in the members' order); openedGroup reads its rows. */
export function groupOpening(tx: TxSql, g: GroupOpeningInput): PendingQuery<Row[]> {
  const ids = g.members.map((m) => m.runId);
  const keys = g.members.map((m) => m.advisoryKey);
  const hexKeys = g.members.map((m) => m.key.toString('hex'));
  const hexPrints = g.members.map((m) => m.fingerprint.toString('hex'));
  const lease = g.leaseMs / 1000;
  const active = ACTIVE_RUN_STATUSES as string[];
  const tenant = g.scope === 'tenant';
  // The uncorrelated EXISTS are init-plans: the runs are read, and keys claimed, only after ctx (the
  // locks, the relay wait) and the instant `at` are taken.
  const ctx = tx`ctx AS MATERIALIZED (
        SELECT set_config('app.tenant_id', ${g.settings.tenantId}, true) AS s_t, set_config('app.user_id', ${g.settings.userId}, true) AS s_u,
               set_config('app.process', ${g.settings.process}, true) AS s_p, set_config('statement_timeout', ${String(g.timeoutMs)}, true) AS s_st,
               array(SELECT pg_try_advisory_xact_lock(k) FROM unnest(${keys}::bigint[]) WITH ORDINALITY AS t(k, o) ORDER BY o) AS locked,
               array(SELECT run_id FROM (SELECT run_id FROM ${tx(tenant ? 'outbox_messages' : 'platform_outbox_messages')}
                                          WHERE run_id = ANY(${ids}::uuid[]) AND sent_at IS NULL FOR KEY SHARE) ob) AS unsent,
               pg_backend_pid() AS pid, (extract(epoch FROM now()) * 1000000)::int8::text AS xact_start,
               array(SELECT current_setting(n) FROM unnest(${[...KEPT_SETTINGS]}::text[]) WITH ORDINALITY AS b(n, o) ORDER BY o) AS kept,
               current_setting(${IN_TRANSACTION_SETTING}, true) IS NOT DISTINCT FROM 'on' AS in_tx),
      at AS MATERIALIZED (SELECT clock_timestamp() AS t FROM ctx),
      m AS MATERIALIZED (
        SELECT run_id, k, f, o FROM unnest(${ids}::uuid[], ${hexKeys}::text[], ${hexPrints}::text[]) WITH ORDINALITY AS u(run_id, k, f, o))`;
  const claimable = tx`ctx.in_tx AND ctx.locked[m.o] AND r.status = ANY(${active}::text[])`;
  const selected = tx`ctx.kept, ctx.locked[m.o] AS member_locked, m.run_id = ANY(ctx.unsent) AS member_unsent, ctx.pid, ctx.xact_start, (SELECT t FROM at)::text AS opened_at,
               (SELECT extract(epoch FROM t) * 1000 FROM at)::float8 AS opened_ms,
               claim.attempt AS claim_attempt, claim.claim_row`;
  // The two scopes differ in their tables, the tenant column and filter, and a platform run's scheduled moment.
  const runs = tenant ? tx`task_runs t WHERE t.run_id = ANY(${ids}::uuid[]) AND t.tenant_id = ${g.tenantId}` : tx`platform_task_runs t WHERE t.run_id = ANY(${ids}::uuid[])`;
  const scheduledFor = tenant
    ? tx`NULL::text`
    : tx`(SELECT to_char(o.scheduled_for AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
                FROM platform_task_run_schedule_origins o WHERE o.run_id = m.run_id)`;
  return tx`
      WITH ${ctx},
      r AS MATERIALIZED (SELECT t.* FROM ${runs} AND EXISTS (SELECT 1 FROM at)),
      claim AS (
        INSERT INTO ${tx(tenant ? 'idempotency_keys' : 'platform_idempotency_keys')} (${tenant ? tx`tenant_id,` : tx``} idempotency_key, request_fingerprint, expires_at)
        SELECT ${tenant ? tx`${g.tenantId},` : tx``} decode(m.k, 'hex'), decode(m.f, 'hex'), clock_timestamp() + make_interval(secs => ${lease})
          FROM m JOIN r USING (run_id) CROSS JOIN ctx
         WHERE ${claimable}
        ON CONFLICT DO NOTHING
        RETURNING encode(idempotency_key, 'hex') AS k, attempt, ctid::text AS claim_row)
      SELECT ${selected}, ${scheduledFor} AS scheduled_for_at, r.*
        FROM m CROSS JOIN ctx LEFT JOIN r USING (run_id) LEFT JOIN claim ON claim.k = m.k
       ORDER BY m.o`;
}

/** The opening's rows as the group's state. */
export function openedGroup(rows: readonly Row[]): OpenedGroup {
  const first = rows[0]!;
  const receivedAt = first.opened_at as string;
  return {
    kept: first.kept as string[],
    pid: first.pid as number,
    xactStart: first.xact_start as string,
    receivedAt,
    receivedAtMs: first.opened_ms as number,
    members: rows.map((r) => ({
      locked: r.member_locked === true,
      unsent: r.member_unsent === true,
      run: r.run_id ? toRunRow(r) : null,
      scheduledFor: (r.scheduled_for_at as string | null) ?? null,
      fresh: r.claim_row ? { attempt: r.claim_attempt as number, claimedAt: receivedAt, row: r.claim_row as string } : null,
    })),
  };
}

/**
 * Settings a handler may change for the rest of its transaction (SET LOCAL, set_config(…, true)) that
 * would change what a later member or the group's finish does: where names resolve, as whom, how long
 * a statement, a lock wait or the transaction may take, whether its COMMIT waits for the WAL, row
 * security, how times read as text. RELEASE SAVEPOINT keeps a member's settings (only a rollback undoes
 * them), so each member's are put back before its savepoint is released (restoreGroupSettings). The
 * opening's own settings (the actor context, the statement deadline) are put back too.
 */
export const KEPT_SETTINGS = [
  'search_path',
  'role',
  'lock_timeout',
  'idle_in_transaction_session_timeout',
  'transaction_timeout',
  'synchronous_commit',
  'row_security',
  'DateStyle',
  'IntervalStyle',
  'TimeZone',
] as const;

/**
 * Puts back, inside a member's savepoint before its release, the settings the group's later members and
 * its finish rely on: the opening's (actor context, statement deadline) and the session's KEPT_SETTINGS
 * as the opening read them. One statement, sent with the member's run-row check (no round trip of its
 * own). Everything in it is schema-qualified: the handler may have changed search_path.
 */
export function restoreGroupSettings(tx: TxSql, g: Pick<GroupOpeningInput, 'settings' | 'timeoutMs'>, kept: readonly string[]): PendingQuery<Row[]> {
  const names = ['app.tenant_id', 'app.user_id', 'app.process', 'statement_timeout', ...KEPT_SETTINGS];
  const values = [g.settings.tenantId, g.settings.userId, g.settings.process, String(g.timeoutMs), ...kept];
  return tx`SELECT pg_catalog.count(pg_catalog.set_config(b.n, b.v, true)) FROM ROWS FROM (pg_catalog.unnest(${names}::pg_catalog.text[]), pg_catalog.unnest(${values}::pg_catalog.text[])) AS b(n, v)`;
}
