// Writes of run rows and trail events, shared by dispatch/publish, the relay and the worker. Every
// function takes the caller's transaction first: a transition and its trail event commit together.
// Each statement is written once for both scopes (scope-tables.ts); the trail rows go in through the
// trail's one writer (trail.ts), as a CTE of the transition's statement where they are one.
// Evicting the cached run status after commit is the caller's job (src/kv/run-status-cache.ts).
import type { Sql, TxSql } from '../../../db/client.ts';
import { inPipelinedTransaction } from '../../../db/pipelined-begin.ts';
import { COMMIT_WITHOUT_FLUSH } from '../../../db/commit-without-flush.ts';
import type { QueueName } from '../../../queue/names.ts';
import { checkTenant, OUTBOX_TABLE, piece, RUN_TABLE, scoped, scopeTables, sqlText, SqlPiece, SqlText, tenantOnly, tenantText, type RunScope } from './scope-tables.ts';
import { insertTrailEvents, trailRows } from './trail.ts';

export type RunStatus = 'queued' | 'running' | 'retrying' | 'succeeded' | 'failed' | 'skipped';
export type RunTrigger = 'dispatch' | 'event' | 'redrive' | 'schedule';
export type RunActorKind = 'user' | 'system' | 'scheduler';

export const FINAL_RUN_STATUSES: ReadonlySet<RunStatus> = new Set(['succeeded', 'failed', 'skipped']);
/** Statuses of a run that is still active (an overlapping scheduled run would be skipped). */
export const ACTIVE_RUN_STATUSES: readonly RunStatus[] = ['queued', 'running', 'retrying'];

export interface NewRun {
  runId: string;
  /** Required for scope tenant, absent/null for platform. */
  tenantId?: string | null;
  name: string;
  queue: QueueName;
  trigger: RunTrigger;
  actorKind: RunActorKind;
  /** 1..128 characters, e.g. `user:42` or `maintenance-scheduler`. */
  actorLabel: string;
  correlationId: string;
  causationId: string;
}

/** Inserts the run as `queued`. A user run also needs insertUserActor, a scheduler run insertScheduleOrigin (checked at COMMIT). */
export async function insertRun(tx: TxSql, scope: RunScope, run: NewRun): Promise<void> {
  const tenantId = checkTenant(scope, run.tenantId);
  // queued_at and updated_at take ONE reading of the clock (two column defaults would read it twice):
  // a queued run whose updated_at is later than queued_at is one the relay has sent (the in-flight
  // index of sql/work/0018_tenant-fairness.sql).
  await tx`INSERT INTO ${tx(RUN_TABLE[scope])} (run_id, ${tenantId === null ? tx`` : tx`tenant_id,`} name, queue, trigger,
      actor_kind, actor_label, correlation_id, causation_id, queued_at, updated_at)
    SELECT ${run.runId}::uuid, ${tenantId === null ? tx`` : tx`${tenantId}::bigint,`} ${run.name}, ${run.queue}, ${run.trigger},
      ${run.actorKind}, ${run.actorLabel}, ${run.correlationId}::uuid, ${run.causationId}::uuid, c.at, c.at
      FROM (SELECT clock_timestamp() AS at) AS c`;
}

export interface UserActorRow {
  runId: string;
  tenantId: string;
  userId: string;
  membershipId: string;
}

export async function insertUserActor(tx: TxSql, actor: UserActorRow): Promise<void> {
  await tx`INSERT INTO task_run_user_actors (run_id, tenant_id, user_id, membership_id)
           VALUES (${actor.runId}, ${actor.tenantId}, ${actor.userId}, ${actor.membershipId})`;
}

export interface ScheduleOriginRow {
  runId: string;
  scheduleName: string;
  /** 1..128 characters identifying the firing (e.g. the scheduler's execution id). */
  executionId: string;
  scheduledFor: Date | string;
}

/**
 * Records which scheduled moment a scheduler run stands for. Returns false when that moment already has
 * a run (one moment yields one run); the caller must then roll back, or the orphan run fails at COMMIT.
 */
export async function insertScheduleOrigin(tx: TxSql, origin: ScheduleOriginRow): Promise<boolean> {
  const scheduledFor = origin.scheduledFor instanceof Date ? origin.scheduledFor.toISOString() : origin.scheduledFor;
  const rows = await tx`INSERT INTO platform_task_run_schedule_origins (run_id, schedule_name, execution_id, scheduled_for)
    VALUES (${origin.runId}, ${origin.scheduleName}, ${origin.executionId}, ${scheduledFor})
    ON CONFLICT (schedule_name, scheduled_for) DO NOTHING RETURNING run_id`;
  return rows.length === 1;
}

export interface RunRow {
  runId: string;
  /** null for platform runs. */
  tenantId: string | null;
  name: string;
  queue: QueueName;
  trigger: RunTrigger;
  actorKind: RunActorKind;
  actorLabel: string;
  correlationId: string;
  causationId: string;
  status: RunStatus;
  attempts: number;
  progress: number;
  outcome: Record<string, unknown>;
  queuedAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  updatedAt: Date;
}

type RawRun = Record<string, unknown>;

/** A run row as postgres.js returns it (snake_case columns) as a RunRow. */
export function toRunRow(r: RawRun): RunRow {
  return {
    runId: r.run_id as string,
    tenantId: (r.tenant_id as string | undefined) ?? null,
    name: r.name as string,
    queue: r.queue as QueueName,
    trigger: r.trigger as RunTrigger,
    actorKind: r.actor_kind as RunActorKind,
    actorLabel: r.actor_label as string,
    correlationId: r.correlation_id as string,
    causationId: r.causation_id as string,
    status: r.status as RunStatus,
    attempts: r.attempts as number,
    progress: r.progress as number,
    outcome: r.outcome as Record<string, unknown>,
    queuedAt: r.queued_at as Date,
    startedAt: (r.started_at as Date | null) ?? null,
    finishedAt: (r.finished_at as Date | null) ?? null,
    updatedAt: r.updated_at as Date,
  };
}

export interface RunKey {
  runId: string;
  /** Required for scope tenant (the read is confined to that tenant), absent/null for platform. */
  tenantId?: string | null;
}

/** Reads one run; `forUpdate` locks the row until the transaction ends. */
export async function readRun(tx: TxSql, scope: RunScope, key: RunKey, options: { forUpdate?: boolean } = {}): Promise<RunRow | null> {
  const tenantId = checkTenant(scope, key.tenantId);
  const rows = await tx`SELECT * FROM ${tx(RUN_TABLE[scope])} WHERE run_id = ${key.runId}
    ${tenantId ? tx`AND tenant_id = ${tenantId}` : tx``} ${options.forUpdate ? tx`FOR UPDATE` : tx``}`;
  return rows[0] ? toRunRow(rows[0]) : null;
}

export interface RunTransition extends RunKey {
  to: RunStatus;
  /** Only transition when the current status is one of these; otherwise nothing changes and null is returned. */
  from?: readonly RunStatus[];
  /** New attempts value, or 'increment'. Unchanged when omitted. */
  attempts?: number | 'increment';
  /** 0..100. Unchanged when omitted. */
  progress?: number;
  /** JSON object of at most 2048 bytes. Unchanged when omitted. */
  outcome?: Record<string, unknown>;
}

/**
 * Moves a run to `to`, stamping the database clock: updated_at always; started_at on the first move to
 * running; finished_at when `to` is final (cleared otherwise, as the table requires). Returns the new
 * row, or null when the run does not exist or its status is not in `from`.
 */
export async function transitionRun(tx: TxSql, scope: RunScope, t: RunTransition): Promise<RunRow | null> {
  const tenantId = checkTenant(scope, t.tenantId);
  const final = FINAL_RUN_STATUSES.has(t.to);
  const attempts =
    t.attempts === undefined ? tx`attempts` : t.attempts === 'increment' ? tx`attempts + 1` : tx`${t.attempts}::int`;
  const rows = await tx`
    UPDATE ${tx(RUN_TABLE[scope])} SET
      status = ${t.to},
      attempts = ${attempts},
      progress = ${t.progress === undefined ? tx`progress` : tx`${t.progress}::smallint`},
      outcome = ${t.outcome === undefined ? tx`outcome` : tx`${tx.json(t.outcome as never)}`},
      started_at = ${t.to === 'running' ? tx`COALESCE(started_at, clock_timestamp())` : tx`started_at`},
      finished_at = ${final ? tx`clock_timestamp()` : tx`NULL`},
      updated_at = clock_timestamp()
    WHERE run_id = ${t.runId}
      ${tenantId ? tx`AND tenant_id = ${tenantId}` : tx``}
      ${t.from ? tx`AND status = ANY(${t.from as string[]}::text[])` : tx``}
    RETURNING *`;
  return rows[0] ? toRunRow(rows[0]) : null;
}

/**
 * Counts an attempt of a run whatever its status (attempts + 1, updated_at): a group member's attempt
 * whose registration was deferred and whose run was settled by someone else before it was written
 * (src/work/runtime/complete/settlement.ts recordMovedOnAttempt). Returns the run, or null when it does not exist
 * or has succeeded.
 */
export async function countAttempt(tx: TxSql, scope: RunScope, key: RunKey): Promise<RunRow | null> {
  const tenantId = checkTenant(scope, key.tenantId);
  // Never a succeeded run: its success recorded its attempt (a group whose COMMIT reply was lost
  // committed it; settlement cannot tell, and must not record a rolled-back start for it).
  const rows = await tx`UPDATE ${tx(RUN_TABLE[scope])} SET attempts = attempts + 1, updated_at = clock_timestamp()
    WHERE run_id = ${key.runId} ${tenantId ? tx`AND tenant_id = ${tenantId}` : tx``} AND status <> 'succeeded' RETURNING *`;
  return rows[0] ? toRunRow(rows[0]) : null;
}

/** Records progress (0..100) of a running run without changing its status. Returns false when not running. */
export async function setRunProgress(tx: TxSql, scope: RunScope, key: RunKey, progress: number): Promise<boolean> {
  const tenantId = checkTenant(scope, key.tenantId);
  const rows = await tx`UPDATE ${tx(RUN_TABLE[scope])} SET progress = ${progress}::smallint, updated_at = clock_timestamp()
    WHERE run_id = ${key.runId} ${tenantId ? tx`AND tenant_id = ${tenantId}` : tx``} AND status = 'running'
    RETURNING run_id`;
  return rows.length === 1;
}

// ───────────── the worker's hot path: one statement per step instead of one per row ─────────────
// Each statement below does what the general functions above do in several round trips (lock, read,
// update, append the trail event), so a delivery costs a handful of round trips instead of ~18. The
// trail event still commits with its transition: they are one statement in one transaction.

/** app.tenant_id, app.user_id, app.process of the unit of work (see src/db/unit-of-work.ts). */
export interface ActorSettings {
  tenantId: string;
  userId: string;
  process: string;
}

export interface DeliveryStart extends RunKey {
  receiveCount: number;
  workerInstance: string;
  /** The queue's id of the received message (recorded on a `sent` the delivery writes, see below). Default ''. */
  messageId?: string;
  /**
   * The instant the delivery was received, when it is recorded later (a group member whose registration
   * was deferred, src/work/runtime/execute/group-execution.ts): its `received` (and a `sent` it records) carry
   * it, so they keep their place before the attempt's `started`. Default: the statement's clock.
   */
  receivedAt?: string | null;
  /**
   * The delivery's idempotency key, when the caller holds its advisory lock: the statement then says
   * whether the ledger has a row for it (`keyed`), read after that lock was taken (execution.ts).
   */
  key?: Buffer;
}

/** detail of a `sent` event a delivery records for its still-pending outbox row. */
const SENT_BY_DELIVERY = sqlText(`jsonb_build_object('message_id', d.message_id, 'recorded_by', 'delivery')`);
const COMMIT_TEXT = sqlText(COMMIT_WITHOUT_FLUSH);

/**
 * The outbox rows still pending for the runs this statement starts (CTEs `d` and `run`): a delivery
 * proves its message was sent, so when the relay died between SendMessageBatch and its commit, the
 * delivery marks the row sent (the relay does not send it again) and its `sent` event goes into the
 * trail before `received`. The ctx CTE has already waited for a relay pass holding these rows.
 */
function sentByDelivery(scope: RunScope) {
  return piece`UPDATE ${scopeTables(scope).outbox} o SET sent_at = clock_timestamp()
              WHERE o.run_id IN (SELECT run_id FROM run) AND o.sent_at IS NULL
             RETURNING o.run_id, o.queue`;
}

/**
 * The ctx CTE of startDelivery(ies): the actor settings, and a wait for the relay's commit of the
 * outbox rows of the runs `runs` picks (see startDelivery).
 */
function deliveryContext(scope: RunScope, actor: ActorSettings, runs: SqlPiece) {
  return piece`ctx AS MATERIALIZED (
        SELECT set_config('app.tenant_id', ${actor.tenantId}, true) AS t, set_config('app.user_id', ${actor.userId}, true) AS u,
               set_config('app.process', ${actor.process}, true) AS p, ${COMMIT_TEXT} AS c,
               (SELECT count(*) FROM (SELECT 1 FROM ${scopeTables(scope).outbox} WHERE ${runs} AND sent_at IS NULL FOR KEY SHARE) ob) AS ob)`;
}

/**
 * The ev CTE of startDelivery(ies): per run, `sent` when its outbox row was still pending (CTE `ob`),
 * then `received` (`received`: its arm of the union), both at the delivery's instant.
 */
function deliveryTrail(scope: RunScope, workerInstance: string, received: SqlPiece, order: SqlText) {
  const column = sqlText;
  return trailRows(
    scope,
    {
      runId: column('run_id'), tenantId: column('tenant_id'), event: column('event'), attempt: column('attempt'), receiveCount: column('receive_count'),
      queue: column('queue'), workerInstance, detail: column('detail'), occurredAt: column('received_at'),
    },
    piece`FROM (
          SELECT 0 AS ord, run.run_id, ${tenantText(scope, 'run.tenant_id,')} 'sent' AS event, 0 AS attempt, 0 AS receive_count, ob.queue, ${SENT_BY_DELIVERY} AS detail, d.received_at
            FROM ob JOIN run ON run.run_id = ob.run_id JOIN d ON d.run_id = ob.run_id
          UNION ALL
          ${received}
        ) x ORDER BY ${order}`,
  );
}

/** The scheduled moment of a platform run started by the statement (CTE `run`), as text; NULL for a tenant run. */
const SCHEDULED_FOR = {
  tenant: sqlText('NULL::text'),
  platform: sqlText(`(SELECT to_char(o.scheduled_for AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
                       FROM platform_task_run_schedule_origins o WHERE o.run_id = run.run_id)`),
} as const;

/**
 * Registration of a delivery that will execute, as ONE autocommitted statement (its own transaction):
 * applies the actor context, moves a non-final run to `running` (attempts + 1, started_at on the first
 * start) and appends `received` with the new attempt. Returns the updated run and, for a platform run,
 * its scheduled moment; null when the run is missing or final (nothing was written: the caller takes
 * the general path, which locks, reads and records those cases).
 */
export async function startDelivery(
  sql: Sql,
  scope: RunScope,
  actor: ActorSettings,
  d: DeliveryStart,
): Promise<StartedDelivery | null> {
  const tenantId = checkTenant(scope, d.tenantId);
  // The uncorrelated EXISTS is an init-plan: the settings are applied before the first row is updated,
  // among them the commit without a flush (src/db/commit-without-flush.ts: the effect's commit flushes it).
  // It also takes KEY SHARE on the run's outbox row while it is not marked sent, which waits while the
  // relay holds that row FOR UPDATE: a message can arrive before the relay commits, and `received`
  // must follow `sent` in the trail (ids are taken at insert). The wait rechecks `sent_at IS NULL` on
  // the relay's committed row and lets it go; a row already marked sent when the statement starts (the
  // usual case) is not locked at all, which spares a tuple lock and its WAL record per delivery. No
  // outbox row (purged, redriven) means no wait.
  const rows = await scoped(sql)`
      WITH ${deliveryContext(scope, actor, piece`run_id = ${d.runId}`)},
      d AS (SELECT ${d.runId}::uuid AS run_id, ${d.receiveCount}::int AS receive_count, ${d.messageId ?? ''}::text AS message_id,
                   COALESCE(${d.receivedAt ?? null}::text::timestamptz, clock_timestamp()) AS received_at),
      run AS (
        UPDATE ${scopeTables(scope).runs} SET status = 'running', attempts = attempts + 1,
               started_at = COALESCE(started_at, ${d.receivedAt ?? null}::text::timestamptz, clock_timestamp()), finished_at = NULL, updated_at = clock_timestamp()
         WHERE run_id = ${d.runId} ${tenantOnly(scope, piece`AND tenant_id = ${tenantId}`)} AND status IN ('queued', 'running', 'retrying')
           AND EXISTS (SELECT 1 FROM ctx)
        RETURNING *),
      ob AS (${sentByDelivery(scope)}),
      ev AS (${deliveryTrail(
        scope,
        d.workerInstance,
        piece`SELECT 1, run.run_id, ${tenantText(scope, 'run.tenant_id,')} 'received', run.attempts, d.receive_count, run.queue, '{}'::jsonb, d.received_at FROM run JOIN d ON d.run_id = run.run_id`,
        sqlText('ord'),
      )})
      SELECT run.*, ${SCHEDULED_FOR[scope]} AS scheduled_for_at, (SELECT received_at::text FROM d) AS received_at_text,
             ${keyedColumn(scope, piece`${d.key ? d.key.toString('hex') : null}::text`, sqlText('run'))} AS keyed FROM run`;
  const row = rows[0];
  return row ? startedOf(row) : null;
}

/**
 * A delivery registered by startDelivery(ies): the run as it now is, a platform run's scheduled moment,
 * its `received` instant (text, to the microsecond) and, when its key was given, whether the ledger has
 * a row for it (else null).
 */
export interface StartedDelivery {
  run: RunRow;
  scheduledFor: string | null;
  receivedAt: string;
  keyed: boolean | null;
}

function startedOf(row: RawRun): StartedDelivery {
  return {
    run: toRunRow(row),
    scheduledFor: (row.scheduled_for_at as string | null) ?? null,
    receivedAt: row.received_at_text as string,
    keyed: (row.keyed as boolean | null) ?? null,
  };
}

/**
 * Whether the ledger has a row for the delivery's key (hex text, null: no key given, null out). Read in
 * the registration's snapshot, which the caller's advisory lock on the key precedes: a holder that
 * claimed the key and let the lock go has committed by then, so its row is seen. A scalar subquery with
 * LIMIT, not EXISTS: PostgreSQL may plan an EXISTS here as one hashed scan of the whole ledger per
 * statement, which it picks while the ledger is small and keeps on the generic plan as the ledger grows
 * (a burn-down's registrations went from 0.5 to 2-4 ms so); this one probes the key's unique index.
 */
function keyedColumn(scope: RunScope, keyHex: SqlPiece | SqlText, run: SqlText) {
  return piece`CASE WHEN ${keyHex} IS NULL THEN NULL ELSE (SELECT true FROM ${scopeTables(scope).ledger} l
                 WHERE l.idempotency_key = decode(${keyHex}, 'hex') ${tenantOnly(scope, piece`AND l.tenant_id = ${run}.tenant_id`)} LIMIT 1) IS NOT NULL END`;
}

/**
 * startDelivery for several deliveries that share a scope, tenant and actor, as ONE autocommitted
 * statement: each run still moves with its own `received` event in the same commit. Returns the
 * started runs by run id; a run missing or final is absent from the map (nothing was written for it).
 * The run ids must be distinct.
 */
export async function startDeliveries(
  sql: Sql,
  scope: RunScope,
  actor: ActorSettings,
  tenantId: string | null,
  workerInstance: string,
  deliveries: ReadonlyArray<{ runId: string; receiveCount: number; messageId?: string; receivedAt?: string | null; key?: Buffer }>,
): Promise<Map<string, StartedDelivery>> {
  const tenant = checkTenant(scope, tenantId);
  const ids = deliveries.map((d) => d.runId);
  // As startDelivery: ctx also waits for the relay's commit of these runs' outbox rows.
  const counts = deliveries.map((d) => d.receiveCount);
  const messageIds = deliveries.map((d) => d.messageId ?? '');
  const receivedAts = deliveries.map((d) => d.receivedAt ?? null);
  const keys = deliveries.map((d) => (d.key ? d.key.toString('hex') : null));
  // Each array is read through a scalar subquery: the planner then sizes it as it does a parameter's
  // (10 elements) in every plan, so the plans it makes with the values (custom) cost what the plan
  // without them (generic) does, and from the sixth call on the prepared statement runs on its generic
  // plan. Sized from the values, every custom plan looked cheaper, and planning this statement anew
  // each call (0.55 ms) cost more than executing it (0.50 ms for 3.4 runs), measured.
  const rows = await scoped(sql)`
      WITH ${deliveryContext(scope, actor, piece`run_id = ANY((SELECT ${ids}::uuid[])::uuid[])`)},
      d AS (SELECT run_id, receive_count, message_id, COALESCE(received_at::timestamptz, clock_timestamp()) AS received_at, key_hex
              FROM unnest((SELECT ${ids}::uuid[]), (SELECT ${counts}::int[]), (SELECT ${messageIds}::text[]), (SELECT ${receivedAts}::text[]), (SELECT ${keys}::text[]))
                   AS d(run_id, receive_count, message_id, received_at, key_hex)),
      run AS (
        UPDATE ${scopeTables(scope).runs} t SET status = 'running', attempts = t.attempts + 1,
               started_at = COALESCE(t.started_at, d.received_at), finished_at = NULL, updated_at = clock_timestamp()
          FROM d
         WHERE t.run_id = d.run_id ${tenantOnly(scope, piece`AND t.tenant_id = ${tenant}`)} AND t.status IN ('queued', 'running', 'retrying')
           AND EXISTS (SELECT 1 FROM ctx)
        RETURNING t.*, d.receive_count AS delivery_receive_count, d.received_at AS delivery_received_at, d.key_hex AS delivery_key_hex),
      ob AS (${sentByDelivery(scope)}),
      ev AS (${deliveryTrail(
        scope,
        workerInstance,
        piece`SELECT 1, run_id, ${tenantText(scope, 'tenant_id,')} 'received', attempts, delivery_receive_count, queue, '{}'::jsonb, delivery_received_at FROM run`,
        sqlText('ord, run_id'),
      )})
      SELECT run.*, ${SCHEDULED_FOR[scope]} AS scheduled_for_at, run.delivery_received_at::text AS received_at_text,
             ${keyedColumn(scope, sqlText('run.delivery_key_hex'), sqlText('run'))} AS keyed FROM run`;
  return new Map(rows.map((row) => [row.run_id as string, startedOf(row)]));
}

export interface DeliveryFinish extends RunKey {
  attempt: number;
  receiveCount: number;
  queue: string;
  workerInstance: string;
  /** JSON object of at most 2048 bytes. */
  outcome: Record<string, unknown>;
  /** The claimed idempotency key, marked `completed` with the outcome in the same statement. */
  ledger: { key: Buffer; retentionMs: number };
  /**
   * The key was not claimed before the handler (the usual delivery, execution.ts): the finish inserts it
   * `completed` (its fingerprint) and writes `started` at `startedAt` (the delivery's `received`
   * instant; null: written already, before a progress report) before `succeeded`. If the key has a row
   * by then (written without the key's lock, as a failed attempt's settlement writes it), the statement
   * fails on purpose and nothing of the effect commits.
   */
  fresh?: { fingerprint: Buffer; startedAt: string | null; deferred?: DeferredRegistration | null };
}

/**
 * A registration left to the finish (src/work/runtime/execute/deferred-registration.ts): the instant of
 * its `received`, and the run as the delivery's read saw it, which it must still be (its status and its
 * `updated_at`, which every change of a run stamps: a cancel, another delivery's settlement, a rescue).
 */
export interface DeferredRegistration {
  receivedAt: string;
  seenStatus: RunStatus;
  seenUpdatedAt: string;
}

/**
 * The registration of deliveries that left it to their finish, as ONE statement sent in the finish's
 * transaction, right before it and in its write: each run `running` (attempts + 1, started at its
 * `received` instant if never before) and its `received` row, so the run still goes through the spec's
 * `queued` → `running` → `succeeded`. A run no longer as its delivery's read saw it is left as it is: the
 * finish behind finds it not `running` and is refused.
 */
function registerDeferred(
  db: Sql | TxSql,
  scope: RunScope,
  tenantId: string | null,
  workerInstance: string,
  members: ReadonlyArray<{ runId: string; receiveCount: number; deferred: DeferredRegistration }>,
) {
  const tenant = checkTenant(scope, tenantId);
  const ids = members.map((m) => m.runId);
  return scoped(db)`
      WITH m AS MATERIALIZED (
        SELECT run_id, receive_count, received_at::timestamptz AS received_at, seen_status, seen_updated_at::timestamptz AS seen_updated_at, ord
          FROM unnest((SELECT ${ids}::uuid[]), (SELECT ${members.map((m) => m.receiveCount)}::int[]), (SELECT ${members.map((m) => m.deferred.receivedAt)}::text[]),
                      (SELECT ${members.map((m) => m.deferred.seenStatus)}::text[]), (SELECT ${members.map((m) => m.deferred.seenUpdatedAt)}::text[]))
               WITH ORDINALITY AS u(run_id, receive_count, received_at, seen_status, seen_updated_at, ord)),
      run AS (
        UPDATE ${scopeTables(scope).runs} r SET status = 'running', attempts = r.attempts + 1, started_at = COALESCE(r.started_at, m.received_at),
               finished_at = NULL, updated_at = clock_timestamp()
          FROM m
         WHERE r.run_id = ANY((SELECT ${ids}::uuid[])::uuid[]) AND r.run_id = m.run_id ${tenantOnly(scope, piece`AND r.tenant_id = ${tenant}`)}
           AND r.status = m.seen_status AND r.updated_at = m.seen_updated_at
        RETURNING r.run_id, r.attempts, r.queue),
      ev AS (${trailRows(
        scope,
        {
          runId: sqlText('m.run_id'), tenantId: tenant, event: sqlText(`'received'`), attempt: sqlText('run.attempts'), receiveCount: sqlText('m.receive_count'),
          queue: sqlText('run.queue'), workerInstance, occurredAt: sqlText('m.received_at'),
        },
        piece`FROM run JOIN m USING (run_id) ORDER BY m.ord`,
      )})
      SELECT run_id FROM run`;
}

/** What the finish of a fresh key says when the key has a row after all (finishDelivery's `fresh`). */
const KEY_CLAIMED_MEANWHILE = 'was claimed by another execution';

/** A finish refused on purpose (its statement's cast of a non-constant text, SQLSTATE 22P02) for the reason `why` names. */
function refusedFor(error: unknown, why: string): boolean {
  const e = error as { name?: unknown; code?: unknown; message?: unknown } | null;
  return e?.name === 'PostgresError' && e.code === '22P02' && typeof e.message === 'string' && e.message.includes(why);
}

/** The error of a finish refused because its run left the status it expected (a cancel, another delivery's settlement, a rescue). */
export function isRunMovedOnRefusal(error: unknown): boolean {
  return refusedFor(error, 'is no longer running');
}

/** The error of a finish whose fresh key was claimed meanwhile: a retry reads what that execution recorded. */
export function isKeyClaimedMeanwhile(error: unknown): boolean {
  return refusedFor(error, KEY_CLAIMED_MEANWHILE);
}

/**
 * The end of a successful execution inside the effect transaction, as ONE statement: marks the ledger
 * key `completed` with the outcome (as completeKey), moves the run to `succeeded` (outcome, progress
 * 100, finished_at) and appends `succeeded` (as transitionRun + appendTrailEvent). Returns false when
 * the run row is gone; fails (aborting the transaction) when the run is no longer `running`.
 */
export async function finishDelivery(tx: TxSql, scope: RunScope, f: DeliveryFinish): Promise<boolean> {
  const tenantId = checkTenant(scope, f.tenantId);
  const outcome = tx.json(f.outcome as never);
  const retention = f.ledger.retentionMs / 1000;
  // running → succeeded only. A run that left `running` meanwhile (an early failure of a duplicate
  // delivery failed it) must not be overwritten, and this effect must not commit: the statement then
  // fails on purpose (a cast of a non-constant text, so nothing is folded at plan time), which aborts
  // the transaction, and the COMMIT sent behind it rolls back.
  const notRunning = piece`('run ' || r.run_id::text || ' is no longer running: its finish is refused')::int`;
  const t = scopeTables(scope);
  const fresh = f.fresh;
  // The key: marked completed (claimed before the handler), or inserted completed (fresh).
  const key = fresh
    ? piece`INSERT INTO ${t.ledger} (${tenantText(scope, 'tenant_id,')} idempotency_key, request_fingerprint, status, outcome, expires_at)
        VALUES (${tenantOnly(scope, piece`${tenantId}::bigint,`)} ${f.ledger.key}, ${fresh.fingerprint}, 'completed', ${outcome}, clock_timestamp() + make_interval(secs => ${retention}))
        ON CONFLICT DO NOTHING RETURNING 1 AS claimed`
    : piece`UPDATE ${t.ledger} SET status = 'completed', outcome = ${outcome},
               expires_at = clock_timestamp() + make_interval(secs => ${retention}), updated_at = clock_timestamp()
         WHERE idempotency_key = ${f.ledger.key} ${tenantOnly(scope, piece`AND tenant_id = ${tenantId}`)}`;
  // The trail rows: `succeeded`, or (fresh, `started` not written yet) `started` at the received instant
  // then `succeeded`, in that order of ids.
  const events =
    fresh !== undefined && fresh.startedAt !== null
      ? {
          event: sqlText('v.e'),
          occurredAt: sqlText('COALESCE(v.instant, (SELECT t FROM at))'),
          source: piece`FROM run CROSS JOIN (VALUES (1, 'started', ${fresh.startedAt}::text::timestamptz), (2, 'succeeded', NULL)) v(n, e, instant) ORDER BY v.n`,
        }
      : { event: sqlText(`'succeeded'`), occurredAt: sqlText('(SELECT t FROM at)'), source: sqlText('FROM run') };
  const keyTaken = fresh
    ? piece`UNION ALL SELECT ('the key of run ' || ${f.runId}::text || ' ' || ${KEY_CLAIMED_MEANWHILE} || ' before ' || at.t::text || ': its finish is refused')::int
              FROM at WHERE NOT EXISTS (SELECT 1 FROM k)`
    : sqlText('');
  // A registration left to this finish goes first, in the same write (its failure aborts the transaction).
  const deferred = fresh?.deferred;
  const registered = deferred ? registerDeferred(tx, scope, tenantId, f.workerInstance, [{ runId: f.runId, receiveCount: f.receiveCount, deferred }]) : null;
  registered?.catch(() => {}); // awaited below
  const finished = scoped(tx)`
      WITH at AS MATERIALIZED (SELECT clock_timestamp() AS t),
      k AS (${key}),
      run AS (
        UPDATE ${t.runs} SET status = 'succeeded', progress = 100::smallint, outcome = ${outcome},
               finished_at = (SELECT t FROM at), updated_at = clock_timestamp()
         WHERE run_id = ${f.runId} ${tenantOnly(scope, piece`AND tenant_id = ${tenantId}`)} AND status = 'running'
        RETURNING run_id ${tenantText(scope, ', tenant_id')}),
      ev AS (${trailRows(
        scope,
        {
          runId: sqlText('run_id'), tenantId: sqlText('tenant_id'), event: events.event, attempt: f.attempt, receiveCount: f.receiveCount,
          queue: f.queue, workerInstance: f.workerInstance, occurredAt: events.occurredAt,
        },
        events.source,
      )})
      SELECT 1 AS done FROM run
      UNION ALL
      SELECT ${notRunning} FROM ${t.runs} r WHERE r.run_id = ${f.runId} ${tenantOnly(scope, piece`AND r.tenant_id = ${tenantId}`)} AND NOT EXISTS (SELECT 1 FROM run)
      ${keyTaken}`;
  const [, rows] = await Promise.all([registered, finished]);
  return rows.length === 1;
}

/** One member of finishDeliveries: a DeliveryFinish of the group, with its `started` instant when it is written only now. */
export interface GroupFinish extends Omit<DeliveryFinish, 'tenantId' | 'ledger' | 'queue' | 'workerInstance'> {
  key: Buffer;
  fingerprint: Buffer;
  /** The claim's instant: `started` is written with this occurred_at (a fresh claim of the group's opening); null: already written. */
  startedAt: string | null;
  /**
   * Set when the member wrote nothing in the transaction, its key was claimed fresh by it and its run
   * row is not locked yet: the claim row's address (FreshClaim.row). If the run is no longer `running`
   * (a cancel landed after its handler), the member is left out and that claim row deleted, instead of
   * the whole statement failing.
   */
  leaveClaim: string | null;
  /**
   * Set when the member's registration was deferred to this statement (group-execution.ts): the
   * instant it was received. The run then moves from `queued`, `running` or `retrying` (attempts + 1,
   * started_at on its first start) and its `received` row is written before `started`, at that instant
   * (its outbox row is marked sent already: a member whose row was pending registers on its own first,
   * src/work/runtime/execute/group-opening.ts). null: registered already, the run must be `running`.
   */
  receivedAt: string | null;
  /**
   * With `receivedAt`: the run's status when the group opened. The run must still have it: a delivery
   * that moved it meanwhile (an early failure of a duplicate, which cannot see the group) wins, and this
   * member's attempt rolls back, as it would had it registered first.
   */
  seenStatus: RunStatus | null;
}

/**
 * finishDelivery for the members of a group commit (one tenant or platform, one unit, one worker):
 * ONE statement moves every run `running` → `succeeded`, marks its key `completed` and appends its
 * `started` (at its claim's instant, when not written yet) and `succeeded`. A member whose run row the
 * caller locked must still be `running`; if one is not, the statement fails on purpose (as
 * finishDelivery's) and the transaction aborts. A member with a `leaveClaim` is left out when its run
 * moved on (its fresh claim deleted, as a rollback of its attempt would): returns the run ids left out.
 * The update of a run row locks it, so a cancel that lands later waits for the commit and finds the run
 * succeeded.
 *
 * No step depends on the planner's estimate of a table's size: the runs are updated through
 * `run_id = ANY(array)`, the keys are marked through their unique index (an upsert that always
 * conflicts with the claim), a left-out claim is deleted by its address, and only when there is one
 * (a one-time filter). A join on the ledger was
 * planned as a sequential scan by a generic plan made while the ledger of a new deployment was small,
 * and kept until the next ANALYZE (20,000 rows read per group, measured).
 */
export async function finishDeliveries(
  tx: TxSql,
  scope: RunScope,
  group: { tenantId: string | null; workerInstance: string; retentionMs: number },
  members: readonly GroupFinish[],
): Promise<Set<string>> {
  const tenantId = checkTenant(scope, group.tenantId);
  const retention = group.retentionMs / 1000;
  const ids = members.map((m) => m.runId);
  const keys = members.map((m) => m.key.toString('hex'));
  const prints = members.map((m) => m.fingerprint.toString('hex'));
  const outcomes = members.map((m) => JSON.stringify(m.outcome));
  const attempts = members.map((m) => m.attempt);
  const receives = members.map((m) => m.receiveCount);
  const started = members.map((m) => m.startedAt);
  const leave = members.map((m) => m.leaveClaim);
  const receivedAts = members.map((m) => m.receivedAt);
  const seenStatuses = members.map((m) => m.seenStatus);
  const notRunning = piece`CASE WHEN m.leave_claim IS NOT NULL THEN 0 ELSE ('run ' || m.run_id::text || ' is no longer running: its finish is refused')::int END`;
  const input = piece`
      at AS MATERIALIZED (SELECT clock_timestamp() AS t),
      m AS MATERIALIZED (
        SELECT run_id, key_hex, print_hex, outcome, attempt, receive_count, started_at, leave_claim::tid AS leave_claim,
               received_at::timestamptz AS received_at, seen_status, ord
          FROM unnest(${ids}::uuid[], ${keys}::text[], ${prints}::text[], ${outcomes}::text[], ${attempts}::int[], ${receives}::int[], ${started}::text[], ${leave}::text[],
                      ${receivedAts}::text[], ${seenStatuses}::text[])
               WITH ORDINALITY AS u(run_id, key_hex, print_hex, outcome, attempt, receive_count, started_at, leave_claim, received_at, seen_status, ord))`;
  // The left-out members' claim rows (an init-plan). Their DELETE is gated on the array not being empty:
  // a condition on an init-plan alone is a one-time filter, so in the usual case (nobody left out) the
  // ledger is not read at all, whichever scan the planner picked for it.
  const goneRows = piece`ARRAY(SELECT m.leave_claim FROM m WHERE m.leave_claim IS NOT NULL AND NOT EXISTS (SELECT 1 FROM run WHERE run.run_id = m.run_id))`;
  // A registered member's run must be `running`; a deferred one's must be as the group's opening saw it.
  const stillActive = piece`(CASE WHEN m.received_at IS NULL THEN r.status = 'running' ELSE r.status = m.seen_status END)`;
  // Per member, in order: `received` when its registration was deferred here (at the instant of the
  // receive), `started` when not written yet (at its claim's), `succeeded` (at this statement's).
  const eventRows = piece`(VALUES (1, 'received'), (2, 'started'), (3, 'succeeded')) AS e(n, event)`;
  const eventWanted = piece`CASE e.event WHEN 'received' THEN m.received_at IS NOT NULL WHEN 'started' THEN m.started_at IS NOT NULL ELSE true END`;
  const t = scopeTables(scope);
  // Literal table names: a DELETE through a dynamic name is what R-RUN-21's source scan forbids.
  const gone =
    scope === 'tenant'
      ? piece`DELETE FROM idempotency_keys WHERE cardinality(${goneRows}) > 0 AND ctid = ANY(${goneRows}) AND tenant_id = ${tenantId}`
      : piece`DELETE FROM platform_idempotency_keys WHERE cardinality(${goneRows}) > 0 AND ctid = ANY(${goneRows})`;
  const left = await scoped(tx)<{ run_id: string }[]>`
      WITH ${input},
      run AS (
        UPDATE ${t.runs} r SET status = 'succeeded', progress = 100::smallint, outcome = m.outcome::jsonb,
               attempts = r.attempts + (m.received_at IS NOT NULL)::int, started_at = COALESCE(r.started_at, m.received_at),
               finished_at = (SELECT t FROM at), updated_at = clock_timestamp()
          FROM m
         WHERE r.run_id = ANY(${ids}::uuid[]) AND r.run_id = m.run_id ${tenantOnly(scope, piece`AND r.tenant_id = ${tenantId}`)} AND ${stillActive}
        RETURNING r.run_id, r.queue),
      k AS (
        INSERT INTO ${t.ledger} (${tenantText(scope, 'tenant_id,')} idempotency_key, request_fingerprint, status, outcome, expires_at)
        SELECT ${tenantOnly(scope, piece`${tenantId},`)} decode(m.key_hex, 'hex'), decode(m.print_hex, 'hex'), 'completed', m.outcome::jsonb,
               clock_timestamp() + make_interval(secs => ${retention})
          FROM run JOIN m USING (run_id)
        ON CONFLICT (${tenantText(scope, 'tenant_id,')} idempotency_key) DO UPDATE
           SET status = 'completed', outcome = EXCLUDED.outcome, expires_at = EXCLUDED.expires_at, updated_at = clock_timestamp()),
      gone AS (${gone}),
      ev AS (${trailRows(
        scope,
        {
          runId: sqlText('m.run_id'), tenantId, event: sqlText('e.event'), attempt: sqlText('m.attempt'), receiveCount: sqlText('m.receive_count'),
          queue: sqlText('run.queue'), workerInstance: group.workerInstance,
          occurredAt: sqlText(`CASE e.event WHEN 'received' THEN m.received_at WHEN 'started' THEN m.started_at::timestamptz ELSE (SELECT t FROM at) END`),
        },
        piece`FROM run JOIN m USING (run_id) CROSS JOIN ${eventRows}
         WHERE ${eventWanted}
         ORDER BY m.ord, e.n`,
      )})
      SELECT m.run_id::text AS run_id, ${notRunning} AS refused FROM m WHERE NOT EXISTS (SELECT 1 FROM run WHERE run.run_id = m.run_id)`;
  return new Set(left.map((r) => r.run_id));
}

/** What finishFreshDeliveries says when one of its runs moved on or one of its keys has a row. */
const FINISHES_REFUSED = 'the finishes are refused';

/** The error of a finishFreshDeliveries that was refused (each delivery then finishes on its own and meets its own refusal). */
export function isFinishTogetherRefused(error: unknown): boolean {
  return refusedFor(error, FINISHES_REFUSED);
}

/** One delivery of finishFreshDeliveries: a finish whose key is new to the ledger and whose `started` is not written yet. */
export interface FreshFinish {
  runId: string;
  attempt: number;
  receiveCount: number;
  queue: string;
  outcome: Record<string, unknown>;
  key: Buffer;
  fingerprint: Buffer;
  /** The delivery's `received` instant (text): `started` is written at it. */
  startedAt: string;
  /** Its registration was left to this finish: written right before it, in one transaction with it. */
  deferred?: DeferredRegistration | null;
}

/**
 * finishDelivery with `fresh`, for several deliveries of one scope, tenant, actor and worker whose
 * handlers sent nothing on their effect transactions, as ONE autocommitted statement (a commit that
 * waits for its flush, as an effect's does): each key inserted `completed`, each run `running` →
 * `succeeded`, each run's `started` (at its `received` instant) and `succeeded`, in that order. Every
 * run's rows commit together; each caller still holds its key's and its run's locks in its own open
 * effect transaction, so nothing can claim the key or execute the run meanwhile, as in finishDelivery.
 * All or nothing: if one key has a row by then or one run is no longer `running`, the statement fails
 * on purpose and nothing of it commits (each delivery then finishes on its own, and meets its own
 * refusal). The run ids must be distinct.
 */
export async function finishFreshDeliveries(
  sql: Sql,
  scope: RunScope,
  actor: ActorSettings,
  group: { tenantId: string | null; workerInstance: string; retentionMs: number },
  members: readonly FreshFinish[],
): Promise<void> {
  const tenantId = checkTenant(scope, group.tenantId);
  const t = scopeTables(scope);
  const ids = members.map((m) => m.runId);
  // Read through scalar subqueries, as startDeliveries' arrays: planned as a parameter's size whatever their length.
  const input = piece`m AS MATERIALIZED (
        SELECT run_id, key_hex, print_hex, outcome, attempt, receive_count, queue, started_at::timestamptz AS started_at, ord
          FROM unnest((SELECT ${ids}::uuid[]), (SELECT ${members.map((m) => m.key.toString('hex'))}::text[]), (SELECT ${members.map((m) => m.fingerprint.toString('hex'))}::text[]),
                      (SELECT ${members.map((m) => JSON.stringify(m.outcome))}::text[]), (SELECT ${members.map((m) => m.attempt)}::int[]), (SELECT ${members.map((m) => m.receiveCount)}::int[]),
                      (SELECT ${members.map((m) => m.queue)}::text[]), (SELECT ${members.map((m) => m.startedAt)}::text[]))
               WITH ORDINALITY AS u(run_id, key_hex, print_hex, outcome, attempt, receive_count, queue, started_at, ord))`;
  // A cast of a non-constant text, as finishDelivery's refusals: the statement fails and nothing commits.
  const refused = piece`('of ' || ${members.length}::int::text || ' finishes, ' || (SELECT count(*) FROM k)::text || ' keys were new and '
                          || (SELECT count(*) FROM run)::text || ' runs still running: ' || ${FINISHES_REFUSED})::int`;
  // The settings come first (an init-plan of each write: EXISTS on ctx), as in startDeliveries.
  const finish = (db: Sql | TxSql) => scoped(db)`
      WITH ctx AS MATERIALIZED (
        SELECT set_config('app.tenant_id', ${actor.tenantId}, true) AS t, set_config('app.user_id', ${actor.userId}, true),
               set_config('app.process', ${actor.process}, true)),
      at AS MATERIALIZED (SELECT clock_timestamp() AS t FROM ctx),
      ${input},
      k AS (
        INSERT INTO ${t.ledger} (${tenantText(scope, 'tenant_id,')} idempotency_key, request_fingerprint, status, outcome, expires_at)
        SELECT ${tenantOnly(scope, piece`${tenantId}::bigint,`)} decode(m.key_hex, 'hex'), decode(m.print_hex, 'hex'), 'completed', m.outcome::jsonb,
               clock_timestamp() + make_interval(secs => ${group.retentionMs / 1000})
          FROM m WHERE EXISTS (SELECT 1 FROM ctx)
         ORDER BY m.ord
        ON CONFLICT DO NOTHING RETURNING 1),
      run AS (
        UPDATE ${t.runs} r SET status = 'succeeded', progress = 100::smallint, outcome = m.outcome::jsonb,
               finished_at = (SELECT t FROM at), updated_at = clock_timestamp()
          FROM m
         WHERE r.run_id = ANY((SELECT ${ids}::uuid[])::uuid[]) AND r.run_id = m.run_id ${tenantOnly(scope, piece`AND r.tenant_id = ${tenantId}`)} AND r.status = 'running'
           AND EXISTS (SELECT 1 FROM ctx)
        RETURNING r.run_id),
      ev AS (${trailRows(
        scope,
        {
          runId: sqlText('m.run_id'), tenantId, event: sqlText('e.event'), attempt: sqlText('m.attempt'), receiveCount: sqlText('m.receive_count'),
          queue: sqlText('m.queue'), workerInstance: group.workerInstance,
          occurredAt: sqlText(`CASE e.event WHEN 'started' THEN m.started_at ELSE (SELECT t FROM at) END`),
        },
        piece`FROM run JOIN m USING (run_id) CROSS JOIN (VALUES (1, 'started'), (2, 'succeeded')) AS e(n, event) ORDER BY m.ord, e.n`,
      )})
      SELECT CASE WHEN (SELECT count(*) FROM k) = ${members.length} AND (SELECT count(*) FROM run) = ${members.length} THEN 1 ELSE ${refused} END AS done`;
  const deferred = members.flatMap((m) => (m.deferred ? [{ runId: m.runId, receiveCount: m.receiveCount, deferred: m.deferred }] : []));
  if (deferred.length === 0) {
    await finish(sql);
    return;
  }
  // Registrations left to these finishes go first, in one transaction with them: all or nothing.
  await inPipelinedTransaction(
    sql,
    (tx) => [tx`SELECT set_config('app.tenant_id', ${actor.tenantId}, true), set_config('app.user_id', ${actor.userId}, true), set_config('app.process', ${actor.process}, true)`],
    async (tx) => {
      const registered = registerDeferred(tx, scope, group.tenantId, group.workerInstance, deferred);
      registered.catch(() => {}); // awaited below
      await Promise.all([registered, finish(tx)]);
    },
  );
}

/**
 * Locks a run row of a group member after its handler (FOR NO KEY UPDATE) and tells whether it is still
 * `running` (`seenStatus`: a member whose registration the group's finish writes: whether its run still
 * has the status the group's opening saw).
 */
export async function lockRunningRun(tx: TxSql, scope: RunScope, key: RunKey, seenStatus: RunStatus | null = null): Promise<boolean> {
  const tenantId = checkTenant(scope, key.tenantId);
  const [row] = await tx<{ status: string }[]>`
    SELECT status FROM ${tx(RUN_TABLE[scope])} WHERE run_id = ${key.runId} ${tenantId ? tx`AND tenant_id = ${tenantId}` : tx``} FOR NO KEY UPDATE`;
  return row?.status === (seenStatus ?? 'running');
}

/** One run the rescuer sends again (src/work/runtime/maintain/rescuer.ts). */
export interface RunRescue extends RunKey {
  queue: string;
  /** The run's attempts (the rescue's `queued` event belongs to its current attempt). */
  attempt: number;
  /** Why: the state it was found in, how long it had waited, which rescue this is. */
  detail: Record<string, unknown>;
  /** Not sent before this instant (timestamptz text: a retry's due); default now. */
  notBefore?: string | null;
}

/**
 * Sends runs again through their outbox rows, in the caller's transaction (which holds the run rows
 * locked): each row goes back to pending (sent_at NULL, due now or at a retry's due), the run's updated_at is stamped and
 * a `queued` event with `detail.rescue` is appended (the trail keeps the spec's twelve values: the run is queued again). A run whose row is pending no longer counts against its tenant's fairness
 * cap (src/work/runtime/produce/tenant-inflight.ts counts only runs whose row is sent) until the relay sends it again.
 * Exactly-once is still the ledger's: a duplicate delivery of a run that did complete replays.
 */
export async function resendRuns(tx: TxSql, scope: RunScope, rescues: readonly RunRescue[], workerInstance: string): Promise<void> {
  if (rescues.length === 0) return;
  const ids = rescues.map((r) => r.runId);
  const notBefore = rescues.map((r) => r.notBefore ?? null);
  await tx`UPDATE ${tx(OUTBOX_TABLE[scope])} o SET sent_at = NULL, available_at = greatest(clock_timestamp(), u.not_before::timestamptz)
             FROM unnest(${ids}::uuid[], ${notBefore}::text[]) AS u(run_id, not_before)
            WHERE o.run_id = u.run_id AND o.sent_at IS NOT NULL`;
  await tx`UPDATE ${tx(RUN_TABLE[scope])} SET updated_at = clock_timestamp()
            WHERE run_id = ANY(${ids}::uuid[]) AND status IN ('queued', 'running', 'retrying')`;
  await insertTrailEvents(
    tx,
    scope,
    rescues.map((r) => ({ runId: r.runId, tenantId: r.tenantId ?? null, event: 'queued' as const, attempt: r.attempt, queue: r.queue, workerInstance, detail: r.detail })),
  );
}
