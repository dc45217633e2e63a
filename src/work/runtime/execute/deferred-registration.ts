// A delivery's registration deferred to its finish (execution.ts). The usual delivery (its key new to
// the ledger, its message's send recorded, its run `queued` or `retrying`, both its key's and its run's
// locks taken by the opening) sends no registration of its own before its handler: a statement behind
// the effect transaction's opening, in the same write, reads the run, the ledger and the outbox row,
// and the registration (run `running`, attempts + 1, its `received` row at the instant of that read)
// goes out right before the finish, in the same transaction and write (run-store.ts registerDeferred),
// so the run still moves `queued` → `running` → `succeeded`. A default unit's burn-down drained 9-11 %
// faster at the same CPU a run, the steady round's p50 0.2-0.4 ms lower
// (bench/results/fast-day-hops-2026-11-29.md): the registration's own round trip, before the handler,
// is gone; its statement is not (a finish that wrote it itself would move a run `queued` → `succeeded`
// in one change, which the spec's table of transitions has no row for).
//
// What a poller sees, as for a `groupCommit` run (docs/group-commit.md): the run stays `queued` (or
// `retrying`) until its effect commits, unless its handler runs longer than RUNNING_VISIBLE_AFTER_MS
// or reports progress, which register it on their own first (`running`, attempts + 1, `received` at
// the read's instant), as does any way out other than success before it settles. If the workers
// process dies before then, nothing of the attempt was written: the message comes back and the run
// executes under the same attempt number, its `received` showing the queue's count of receives.
import type { TxSql } from '../../../db/client.ts';
import { LEDGER_TABLE, OUTBOX_TABLE, RUN_TABLE } from '../store/scope-tables.ts';
import { evictRunStatus } from '../../../kv/run-status-cache.ts';
import { toRunRow, type DeferredRegistration, type RunRow, type RunStatus } from '../store/run-store.ts';
import { actorSettingsOf, type DeliveryContext } from './context.ts';
import type { Registration } from './registration.ts';
import type { Started } from './start-coalescer.ts';

/** The row of the statement that decides a deferral (deferralRead). */
export interface DeferralRow {
  /** The run row as JSON (null: no such run). */
  deferral_run?: Record<string, unknown> | null;
  /** The ledger holds the delivery's key. */
  deferral_keyed?: boolean | null;
  /** The run's outbox row is marked sent (null: no row). */
  deferral_sent?: boolean | null;
  /** The database clock at the read (ISO 8601, UTC): the deferred `received` instant. */
  deferral_at?: string | null;
  /** A platform run's scheduled instant (ISO text), as the registration reads it. */
  deferral_scheduled_for?: string | null;
}

/** A registration left to the finish: what it must find still true of the run (run-store.ts). */
export type Deferred = DeferredRegistration;

/**
 * The statement that decides a deferral: sent right behind the opening, in the same write, so it runs
 * once the opening has taken the key's and the run's locks and reads with a snapshot taken after them
 * (READ COMMITTED: one per statement). Read in the opening itself, it would see a run and a ledger as
 * they were before the locks: a delivery that held them and committed meanwhile (its run succeeded, its
 * key completed) would be missed, and the handler would run a second time. Harmless if BEGIN failed (a
 * read) and ignored unless the opening took both locks.
 */
export function deferralRead(tx: TxSql, c: DeliveryContext) {
  const runId = c.envelope.run_id;
  const tenant = (alias: string) => (c.scope === 'tenant' ? tx`AND ${tx(alias)}.tenant_id = ${c.tenantId}` : tx``);
  const scheduledFor =
    c.scope === 'platform'
      ? tx`(SELECT to_char(o.scheduled_for AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') FROM platform_task_run_schedule_origins o WHERE o.run_id = ${runId})`
      : tx`NULL::text`;
  return tx<DeferralRow[]>`
    SELECT (SELECT to_jsonb(r) FROM ${tx(RUN_TABLE[c.scope])} r WHERE r.run_id = ${runId} ${tenant('r')}) AS deferral_run,
           (SELECT true FROM ${tx(LEDGER_TABLE[c.scope])} l WHERE l.idempotency_key = ${c.key!} ${tenant('l')} LIMIT 1) IS NOT NULL AS deferral_keyed,
           (SELECT o.sent_at IS NOT NULL FROM ${tx(OUTBOX_TABLE[c.scope])} o WHERE o.run_id = ${runId}) AS deferral_sent,
           to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS deferral_at, ${scheduledFor} AS deferral_scheduled_for`;
}

/**
 * The registration the finish will write, when the opening allows it: both locks held, the run
 * `queued` or `retrying`, its key new to the ledger and its message's send recorded (a row still
 * pending is recorded sent by an ordinary registration, with `sent` before `received`). The run as it
 * will be once registered: `running`, attempts + 1, started at the opening if never before.
 */
export function deferredRegistrationOf(
  opened: { locked: boolean; run_locked: boolean },
  read: DeferralRow | undefined,
): { registration: Extract<Registration, { kind: 'execute' }>; deferred: Deferred } | null {
  const row = read?.deferral_run;
  const at = read?.deferral_at;
  if (!opened.locked || !opened.run_locked || !read || !row || !at || read.deferral_keyed !== false || read.deferral_sent !== true) return null;
  const status = row.status as RunStatus;
  if ((status !== 'queued' && status !== 'retrying') || typeof row.updated_at !== 'string') return null;
  // to_jsonb gives the instants as text.
  const date = (v: unknown) => (typeof v === 'string' ? new Date(v) : null);
  const stored = toRunRow(row);
  const attempt = stored.attempts + 1;
  const run: RunRow = {
    ...stored,
    // to_jsonb gives a bigint as a number.
    tenantId: row.tenant_id === null || row.tenant_id === undefined ? null : String(row.tenant_id),
    status: 'running',
    attempts: attempt,
    queuedAt: date(row.queued_at) ?? new Date(at),
    startedAt: date(row.started_at) ?? new Date(at),
    finishedAt: null,
    updatedAt: date(row.updated_at) ?? new Date(at),
  };
  return {
    registration: { kind: 'execute', run, attempt, scheduledFor: read.deferral_scheduled_for ?? null, receivedAt: at, keyed: false },
    deferred: { receivedAt: at, seenStatus: status, seenUpdatedAt: row.updated_at },
  };
}

/**
 * Registers a delivery whose registration was deferred (to its finish, or to its group's) on its own
 * (the start coalescer: run `running`, attempts + 1, `received` at `receivedAt`), and evicts its cached
 * status. Resolves to the run as started, or null when it was final or gone. The caller keeps the
 * promise: a delivery registers once.
 */
export function registerOnItsOwn(c: DeliveryContext, receivedAt: string): Promise<Started> {
  return c.deps.starts
    .start(c.scope, actorSettingsOf(c.actor), c.tenantId, c.deps.workerInstance, {
      runId: c.envelope.run_id,
      receiveCount: c.delivery.receiveCount,
      messageId: c.delivery.messageId,
      receivedAt,
    })
    .then(async (started) => {
      if (started) await evictRunStatus(c.deps.redis, [c.envelope.run_id]);
      return started;
    });
}
