// The outbox relay: moves pending outbox rows (both outboxes) to their queues. It blocks on the wake
// list so a committed dispatch goes out within milliseconds, and sweeps every few seconds so a lost
// signal (or Redis down) loses nothing. Each pass locks the due rows of both outboxes with FOR UPDATE
// SKIP LOCKED, sends them with SendMessageBatch, and marks them sent (plus the `sent` trail event) in
// the same transaction, one for both outboxes; a failed entry only counts an attempt and stays
// pending. A resend after a partial failure is safe: consumers are idempotent by run id.
//
// A row the queue refuses itself (a per-entry sender fault: its body or attributes; a message over the
// size limit) is refused again on every pass, so it steps aside (1 s, doubling, at most 60 s) and,
// refused once more after `maxAttempts` failed passes, ends its run `failed` with OUTBOX_SEND_FAILED
// and a `failed` trail row saying what the queue answered. A row refused whose run is already final
// (an operator cancelled it) is given up at once. A given-up row gets `sent_at` too: the relay is done
// with it, it no longer counts as pending, and purge deletes it after the retention; its trail has no
// `sent`, so it never reads as delivered. A transport error or a failure of the whole call (the queue
// down, missing, throttling) counts an attempt as before but never gives a row up: a queue that is
// down for an hour must not fail every run of that hour.
//
// Where a pass starts reading: a row marked sent leaves its entry in the pending-row index until a
// vacuum, and those entries sort first (oldest available_at), so a pass from the start walks every
// row sent since the last vacuum: 0.47 ms a pass after three bursts of 20,000 rows, and 3 ms once the
// planner turned to a bitmap scan (bench/results/hot-path-levers-2026-11-25.md). So after a pass that
// drained what it saw, a pass woken by 'recent' signals (src/kv/wake.ts) reads only the rows that
// became due since shortly before that pass, and those with failed attempts. Any other wake, a sweep,
// a failed pass and at least one pass per sweep interval read every due row, so a row a window misses
// (a dispatch whose transaction outlived RECENT_WRITE_MS without saying so, a crashed relay's lock)
// waits one sweep interval at most, as a lost signal does.
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Redis } from 'ioredis';
import type { Sql, TxSql } from '../../../db/client.ts';
import { COMMIT_WITHOUT_FLUSH } from '../../../db/commit-without-flush.ts';
import { beginPipelinedAll } from '../../../db/pipelined-begin.ts';
import { passBounds, withStageBounds } from '../../../db/stage-deadline.ts';
import { CAPPED_REFILL_MS, DEFAULT_PASS_DEADLINE_MS, LONE_REFILL_MS } from '../../../config/limits.ts';
import { actorContextSelect, type Actor } from '../../../db/unit-of-work.ts';
import { markRelayCapped, RECENT_WRITE_MS, waitForWake, type WakeSignal } from '../../../kv/wake.ts';
import { startBacklogSampler } from '../../../observe/backlog.ts';
import { redisFallback } from '../../../observe/redis-fallback.ts';
import { recordRelayPass } from '../../../observe/relay-metrics.ts';
import { startRelaySendSpans } from '../../../observe/work-tracing.ts';
import { bodyBytes, packBatches } from '../../../queue/batch.ts';
import { isQueueName, queueUrl } from '../../../queue/names.ts';
import { sendMessageBatch } from '../../../queue/send.ts';
import {
  DEFAULT_CAPPED_POLL_MS,
  dueRowsWaiting,
  fairPassColumns,
  selectionPlanSettings,
  inFlightStamp,
  PLATFORM_MESSAGE_GROUP,
  RecentGroups,
  fairRowsQuery,
  type FairPasses,
  type FairRow,
  type LoneRoom,
} from './tenant-inflight.ts';
import { defaultInstanceLabel } from './dispatch.ts';
import { FINAL_RUN_STATUSES, transitionRun, type RunRow, type RunStatus } from '../store/run-store.ts';
import { NO_SQL, OUTBOX_TABLE, piece, RETURNING_ONE, RUN_TABLE, scoped, scopeTables, sqlText, type RunScope } from '../store/scope-tables.ts';
import { appendTrailEvent, trailEventRows, type TrailEventInput } from '../store/trail.ts';
import { failedOutcome } from '../complete/failure-outcome.ts';
import { DEFAULT_OUTBOX_MAX_ATTEMPTS, DEFAULT_RELAY_SWEEP_INTERVAL_MS } from '../../../config/limits.ts';
import { recordRunFinished } from '../../../observe/delivery-metrics.ts';
import { evictRunStatus } from '../../../kv/run-status-cache.ts';
import { envelopeBody } from './envelope.ts';

/**
 * Default rows locked per outbox per pass (sent in calls of at most 10 messages / 256 KiB). A pass pays
 * its statements and its commit once, whatever its rows: in the work bench's burn-down, 500 instead of
 * 100 took throughput up by about a tenth at 7 % less CPU per run (bench/results/hot-path-levers-2026-11-25.md).
 * A pass over a steady flow holds a few rows, as before.
 */
export const DEFAULT_RELAY_BATCH_SIZE = 500;
/** Who the relay's units of work act as (app.process = relay). */
export const RELAY_ACTOR: Actor = { kind: 'system', label: 'relay' };
/** Longest blocking pop (BLMPOP), so a lost connection or a stop is noticed quickly. */
const WAKE_BLOCK_SECONDS = 1;
/**
 * Parallel SendMessageBatch calls within one pass. Their retries spend the SQS client's retry budget,
 * which the workers' receives, deletes and heartbeats share, so a queue that stops answering costs one
 * wave of 4 calls: after a wave none of whose calls got an answer, the pass sends nothing more (passAll).
 */
const SEND_CONCURRENCY = 4;
/**
 * How far before the previous pass a window starts, ms: a 'recent' signal's rows were written by a
 * transaction that began less than RECENT_WRITE_MS before the signal, so they became due no earlier
 * than that before the commit the previous pass could not see; twice that covers the gap between the
 * two clocks' readings of a pass's start (this process's and the database's).
 */
const WINDOW_MARGIN_MS = 2 * RECENT_WRITE_MS;

export interface RelayLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

const silent: RelayLogger = { debug() {}, info() {}, warn() {}, error() {} };

export interface RelayPassOptions {
  /** Rows locked per outbox per pass; default DEFAULT_RELAY_BATCH_SIZE (500). */
  batchSize?: number;
  /** worker_instance of the `sent` trail rows; default `<hostname>:<pid>`. */
  instance?: string;
  log?: RelayLogger;
  /** Fair share: at most this many runs of one tenant (per queue) sent and not final; 0 = off, first come first served. Default 0. */
  tenantInflightMax?: number;
  /**
   * Work-conserving fair share: a tenant no other tenant contends with on its queue (none pending, in
   * flight, nor sent for within CONTENTION_MEMORY_MS) may have up to this many runs in flight instead of
   * `tenantInflightMax`, one number for every queue or one per queue (loneRoomsOf: from the units); at
   * most `tenantInflightMax` (or 0, or a queue absent): the cap holds always. Default 0.
   */
  tenantInflightLoneMax?: LoneRoom;
  /** The groups the relay sent for lately (startRelay keeps one for its passes); without it, only what the statement sees contends. */
  recentGroups?: RecentGroups;
  /** The lone room's bound in time: it applies while the tenant's oldest sent, still queued run is younger than this, ms. Default LONE_ROOM_MAX_WAIT_MS (250). */
  loneMaxWaitMs?: number;
  /** Send MessageGroupId (tenant uid, `platform` for platform runs) with each message. Default false. */
  fairGroups?: boolean;
  /**
   * This pass reads only the rows with failed attempts and those that became due in the last
   * `windowMs` (the relay's wake passes, see the header); ignored with fairness on. Default: every due row.
   */
  windowMs?: number;
  /** Failed passes after which a row the queue refuses itself ends its run failed (OUTBOX_SEND_FAILED); default DEFAULT_OUTBOX_MAX_ATTEMPTS (20, SVC_OUTBOX_MAX_ATTEMPTS). */
  maxAttempts?: number;
}

/** Error code of a run whose outbox row the queue kept refusing. */
export const OUTBOX_SEND_FAILED = 'OUTBOX_SEND_FAILED';

export interface RelayPassResult {
  sent: number;
  failed: number;
  /** Some outbox returned a full batch: more rows may be due right now. */
  full: boolean;
  /** Fairness held due rows back (their tenants are at the cap): look again soon, room opens as runs finish. */
  capped?: boolean;
  /** The outboxes whose rows fairness held back (relayPass): the short polls look at these only. */
  cappedScopes?: RunScope[];
  /** In every outbox held back, every group with rows pending had its lone room this pass: the relay looks again less often (capRefillWaitMs). */
  cappedLone?: boolean;
  /** Runs this pass ended `failed` because the queue kept refusing their rows (absent when none). */
  failedRuns?: string[];
}

/** A due outbox row the relay locked, with fairness on or off (one row shape for both selections), and its outbox. */
type PendingRow = FairRow & { scope: RunScope };

/**
 * The relay's actor context, and a commit that does not wait for its WAL flush: the marks of a pass are
 * made durable by the effect transaction of the runs it sent, which commits later and waits for the disk
 * (src/db/commit-without-flush.ts says what a database crash can then take back). With fairness on, the
 * fair pass's hold on each outbox of the pass (its locks and the selections' planner settings); off, the
 * selection's planner settings. Either way those settings hold for the rest of the pass's transaction.
 */
function relayContextSelect(tx: TxSql, fairPasses?: readonly RunScope[]) {
  return tx`SELECT a.*, ${tx.unsafe(COMMIT_WITHOUT_FLUSH)} AS c, ${fairPasses ? fairPassColumns(tx, fairPasses) : selectionPlanSettings(tx)}
              FROM (${actorContextSelect(tx, RELAY_ACTOR)}) a`;
}

/**
 * One outbox's due rows, locked FOR UPDATE SKIP LOCKED, fewest failed attempts first (a row that keeps
 * failing never blocks newer ones). With a window, the scan of the pending-row index starts at its
 * floor (a row comparison on the index's columns; now() is the pass's BEGIN, stable, so an index bound).
 */
function dueRows(tx: TxSql, scope: RunScope, batchSize: number, groups: boolean, windowMs: number | undefined) {
  const tenantColumns =
    scope === 'tenant'
      ? tx`tenant_id::text AS tenant_id, ${groups ? tx`(SELECT t.uid FROM tenants t WHERE t.id = tenant_id)` : tx`NULL::text`} AS tenant_uid`
      : tx`NULL::text AS tenant_id, NULL::text AS tenant_uid`;
  return tx`
    SELECT ${scope}::text AS scope, id::text AS id, run_id, ${tenantColumns}, queue, envelope, attempts
      FROM ${tx(OUTBOX_TABLE[scope])}
     WHERE sent_at IS NULL AND available_at <= clock_timestamp()
       ${windowMs === undefined ? tx`` : tx`AND (attempts, available_at, id) >= (0, now() - ${Math.ceil(windowMs)}::int * interval '1 millisecond', 0::bigint)`}
     ORDER BY attempts, available_at, id
     LIMIT ${batchSize}
       FOR UPDATE SKIP LOCKED`;
}

/**
 * The pass's first statement, which goes out with its BEGIN (src/db/pipelined-begin.ts): the relay's
 * actor context (app.process = relay) for the sent_at updates and `sent` trail rows that follow, and
 * the planner settings of the selections behind it in the same write; with fairness on, also the fair
 * pass's hold on each outbox of the pass (tenant-inflight.ts fairPassColumns: its locks, no round trip
 * of their own). Harmless if BEGIN failed: its settings and locks end with the statement, and the pass
 * then stops before it reads a selection.
 */
function openPass(tx: TxSql, scopes: readonly RunScope[], fairness: { cap: number }) {
  return relayContextSelect(tx, fairness.cap > 0 ? scopes : undefined);
}

/**
 * With fairness off, the due rows of every outbox of the pass, locked FOR UPDATE SKIP LOCKED, in one
 * statement behind the opening (whose settings it is planned under: one generic plan per connection).
 */
function dueSelection(tx: TxSql, scopes: readonly RunScope[], batchSize: number, groups: boolean, windowMs: number | undefined) {
  const [first, second] = scopes.map((scope) => dueRows(tx, scope, batchSize, groups, windowMs));
  return tx`WITH a AS (${first!}) ${second ? tx`, b AS (${second})` : tx``}
    SELECT * FROM a ${second ? tx`UNION ALL SELECT * FROM b` : tx``}`;
}

/**
 * The pass's selections, sent in the write of BEGIN and the opening, right behind it. With fairness on,
 * each outbox's (tenant-inflight.ts: per-tenant room, round robin between tenants, dispatch order within
 * one): each runs after the opening took (or failed to take) its outbox's fair pass, with a snapshot
 * taken then, and selects nothing without it. Off, one for every outbox of the pass (dueSelection). A
 * pass is then BEGIN with its opening and selections, the sends, and the marks with COMMIT: two round
 * trips to PostgreSQL.
 */
function selections(tx: TxSql, scopes: readonly RunScope[], batchSize: number, fairness: Fairness, windowMs: number | undefined) {
  if (!(fairness.cap > 0)) return [dueSelection(tx, scopes, batchSize, fairness.groups, windowMs)];
  const lone = { loneMax: fairness.loneMax, recent: fairness.recent?.active(), maxWaitMs: fairness.loneMaxWaitMs };
  return scopes.map((scope) => fairRowsQuery(tx, scope, fairness.cap, batchSize, actorContextSelect(tx, RELAY_ACTOR), lone));
}

/** What one outbox of a pass sent, failed and held back. */
interface ScopeOutcome {
  rows: PendingRow[];
  /** Fair selection only: the rows this outbox may send (null: another relay holds its fair pass). */
  fair?: PendingRow[] | null;
  sentIds: string[];
  sentRunIds: string[];
  sentTrail: Array<Omit<TrailEventInput, 'occurredAt'>>;
  failedIds: string[];
  /** Rows the queue refused themselves this pass (a subset of failedIds), with what it answered. */
  refused: Array<{ row: PendingRow; code: string; message: string }>;
}

/**
 * What an outbox's rows sent in a pass leave behind, as ONE statement: their `sent_at`, their runs' `sent`
 * events and, in a fair pass, their runs' in-flight stamp (inFlightStamp). Each is a CTE, run in that
 * order as the select list reads their counts; one statement where there were three is two fewer a pass
 * for PostgreSQL to parse, bind, execute and answer. The id array through a scalar subquery: on the
 * generic plan (planned once per connection), where a custom plan per pass cost more to plan (0.11-0.14
 * ms) than to run.
 */
function recordSent(tx: TxSql, scope: RunScope, o: ScopeOutcome) {
  const stamp = o.fair ? piece`, m AS (${inFlightStamp(scope, o.sentRunIds)})` : NO_SQL;
  return scoped(tx)`WITH s AS (UPDATE ${scopeTables(scope).outbox} SET sent_at = clock_timestamp() WHERE id = ANY((SELECT ${o.sentIds}::bigint[])::bigint[]) RETURNING 1),
      e AS (${trailEventRows(scope, o.sentTrail, RETURNING_ONE)}) ${stamp}
    SELECT (SELECT count(*) FROM s)::int AS sent, (SELECT count(*) FROM e)::int AS events ${o.fair ? STAMPED_COUNT : NO_SQL}`;
}

const STAMPED_COUNT = sqlText(', (SELECT count(*) FROM m)::int AS stamped');

/**
 * A per-entry failure that refuses the row itself: a sender fault (its body, its attributes), except
 * the KMS ones, which are the queue's encryption key failing (a setting, or throttling), not the row.
 */
function refusesRow(f: { code: string; senderFault?: true }): boolean {
  return f.senderFault === true && !/^kms/i.test(f.code);
}

/**
 * The refused rows of one outbox that the relay gives up (see the header): those whose run is already
 * final, and those refused after `maxAttempts` failed passes, whose run ends `failed` here with its
 * trail row. Their ids leave `failedIds` for the returned `done`. Rare, so one statement per row.
 */
async function giveUpRefused(tx: TxSql, scope: RunScope, o: ScopeOutcome, maxAttempts: number, instance: string, log: RelayLogger): Promise<{ done: string[]; failedRuns: RunRow[] }> {
  const done: string[] = [];
  const failedRuns: RunRow[] = [];
  if (o.refused.length === 0) return { done, failedRuns };
  const statuses = new Map(
    (await tx<{ run_id: string; status: RunStatus }[]>`SELECT run_id, status FROM ${tx(RUN_TABLE[scope])} WHERE run_id = ANY(${o.refused.map((r) => r.row.run_id)}::uuid[])`).map((r) => [
      r.run_id,
      r.status,
    ]),
  );
  for (const { row, code, message } of o.refused) {
    const status = statuses.get(row.run_id);
    if (status !== undefined && FINAL_RUN_STATUSES.has(status)) {
      done.push(row.id);
      continue;
    }
    const attempts = row.attempts + 1;
    if (attempts < maxAttempts) continue;
    const key = { runId: row.run_id, tenantId: row.tenant_id };
    const reason = `the queue refused the run's message ${attempts} times (${code.slice(0, 64)}): it can never be delivered`;
    // queued only: a run that left queued meanwhile (an operator's cancel, committed first) keeps its settlement.
    const failed = await transitionRun(tx, scope, {
      ...key,
      to: 'failed',
      from: ['queued'],
      outcome: failedOutcome({ code: OUTBOX_SEND_FAILED, type: 'OutboxSendFailure', message: reason }),
    });
    if (failed) {
      await appendTrailEvent(tx, scope, {
        ...key,
        event: 'failed',
        attempt: failed.attempts,
        queue: row.queue,
        workerInstance: instance,
        errorCode: OUTBOX_SEND_FAILED,
        errorType: 'OutboxSendFailure',
        occurredAt: 'run_finished',
        // What the queue answered names the rule its body broke, never the body.
        detail: { message: reason, queue_code: code.slice(0, 128), queue_message: message.slice(0, 300), outbox_attempts: attempts },
      });
      failedRuns.push(failed);
      log.error({ runId: row.run_id, outboxId: row.id, queue: row.queue, code, attempts }, 'the queue keeps refusing this outbox message: its run is failed (OUTBOX_SEND_FAILED)');
    }
    if (failed || (await tx`SELECT 1 FROM ${tx(RUN_TABLE[scope])} WHERE run_id = ${row.run_id} AND status = ANY(${[...FINAL_RUN_STATUSES]}::text[])`).length > 0) {
      done.push(row.id);
    }
  }
  if (done.length > 0) {
    const given = new Set(done);
    o.failedIds = o.failedIds.filter((id) => !given.has(id));
  }
  return { done, failedRuns };
}

async function passAll(
  tx: TxSql,
  opened: readonly object[],
  selected: ReadonlyArray<readonly object[]>,
  sqs: SQSClient,
  queueUrlPrefix: string,
  scopes: readonly RunScope[],
  batchSize: number,
  instance: string,
  log: RelayLogger,
  fairness: Fairness,
  beforeCommit: <S>(statement: Promise<S>) => Promise<S>,
  maxAttempts: number,
): Promise<{ total: RelayPassResult; capped: Array<{ scope: RunScope; capped: boolean | Promise<boolean>; lone: boolean }>; failedRuns: RunRow[] }> {
  // The selections went out with the opening (selections). With fairness on (tenantInflightMax > 0), one
  // per outbox, and the opening's row says which outboxes' fair passes this transaction holds (openPass);
  // an outbox another relay holds was not selected from (null) and is looked at again shortly.
  const held = fairness.cap > 0 ? (opened[0] as FairPasses | undefined) : undefined;
  const fairRows =
    fairness.cap > 0
      ? scopes.map((scope, i) => (held?.[scope === 'tenant' ? 'fair_tenant' : 'fair_platform'] === true ? (selected[i] as FairRow[]) : null))
      : undefined;
  // With fairness off, one selection for every outbox of the pass.
  const due = fairness.cap > 0 ? [] : (selected[0] as PendingRow[]);
  const outcomes = new Map<RunScope, ScopeOutcome>();
  scopes.forEach((scope, i) => {
    const fair = fairRows ? (fairRows[i]?.map((row) => ({ ...row, scope })) ?? null) : undefined;
    const rows = fair === undefined ? due.filter((row) => row.scope === scope) : (fair ?? []);
    outcomes.set(scope, { rows, ...(fair === undefined ? {} : { fair }), sentIds: [], sentRunIds: [], sentTrail: [], failedIds: [], refused: [] });
  });

  // One call carries the rows of one outbox and one queue (the ids of the two outboxes may coincide).
  const byQueue = new Map<string, { scope: RunScope; queue: string; items: Array<{ row: PendingRow; body: string }> }>();
  for (const { rows } of outcomes.values()) {
    for (const row of rows) {
      const key = `${row.scope}\u0000${row.queue}`;
      const entry = byQueue.get(key) ?? { scope: row.scope, queue: row.queue, items: [] };
      entry.items.push({ row, body: envelopeBody(row.envelope) });
      byQueue.set(key, entry);
    }
  }

  const calls: Array<() => Promise<boolean>> = [];
  for (const { scope, queue, items } of byQueue.values()) {
    const outcome = outcomes.get(scope)!;
    const { batches, oversized } = packBatches(items, (i) => bodyBytes(i.body));
    for (const item of oversized) {
      outcome.failedIds.push(item.row.id);
      outcome.refused.push({ row: item.row, code: 'MessageTooLong', message: `the message is ${bodyBytes(item.body)} bytes, over the queue's limit` });
      log.error({ outboxId: item.row.id, runId: item.row.run_id, queue }, 'outbox message exceeds the queue message size limit and cannot be sent');
    }
    if (!isQueueName(queue)) {
      // The table refuses unknown queues; kept as a guard against a hand-edited row.
      for (const b of batches) for (const i of b) outcome.failedIds.push(i.row.id);
      continue;
    }
    const url = queueUrl(queueUrlPrefix, queue);
    for (const batch of batches) {
      calls.push(async () => {
        const endSpans = startRelaySendSpans(queue, batch.map((i) => i.row.envelope)); // relay send spans (src/observe)
        const result = await sendMessageBatch(
          sqs,
          url,
          batch.map((i) => ({
            id: i.row.id,
            body: i.body,
            ...(fairness.groups ? { groupId: i.row.tenant_uid ?? PLATFORM_MESSAGE_GROUP } : {}),
          })),
        );
        endSpans(new Set(result.failed.map((f) => batch.findIndex((i) => i.row.id === f.id))));
        const byId = new Map(batch.map((i) => [i.row.id, i.row]));
        if (outcome.fair) fairness.recent?.record(result.sent.map((s) => byId.get(s.id)!));
        for (const s of result.sent) {
          const row = byId.get(s.id)!;
          outcome.sentIds.push(row.id);
          outcome.sentRunIds.push(row.run_id);
          outcome.sentTrail.push({
            runId: row.run_id,
            tenantId: row.tenant_id ?? null,
            event: 'sent',
            attempt: 0,
            queue,
            workerInstance: instance,
            detail: { message_id: s.messageId, outbox_attempts: row.attempts },
          });
        }
        for (const f of result.failed) {
          outcome.failedIds.push(f.id);
          if (refusesRow(f)) outcome.refused.push({ row: byId.get(f.id)!, code: f.code, message: f.message });
        }
        if (result.failed.length > 0) {
          log.warn(
            { queue, failed: result.failed.length, code: result.failed[0]!.code, reason: result.failed[0]!.message },
            'outbox send failed; the rows stay pending and are retried on the next pass',
          );
        }
        return result.unanswered !== true;
      });
    }
  }
  // A wave none of whose calls got an answer (the queue service down or stalled) ends the sending: the
  // rows not tried stay pending as they were, for the next pass, and a stalled queue holds the pass for
  // one wave's request timeouts, not one per wave. An error answer (a queue missing) does not stop it,
  // so one bad queue never holds back another's rows.
  for (let i = 0; i < calls.length; i += SEND_CONCURRENCY) {
    const answers = await Promise.all(calls.slice(i, i + SEND_CONCURRENCY).map((call) => call()));
    if (answers.every((answered) => !answered)) break;
  }

  // The pass's writes go out with its COMMIT, in one round trip (beforeCommit: each is one statement,
  // sent in this order). They are on the path of every run: a worker that received one of these
  // messages waits for this commit before it records `received` (startDelivery's KEY SHARE on the
  // outbox row), so each round trip here was one more wait before the run could start. A failure of
  // any of them rolls the whole pass back, both outboxes: the rows stay pending. Not awaited here (`void`):
  // beforeCommit holds each one and the COMMIT reports its failure.
  const total: RelayPassResult = { sent: 0, failed: 0, full: false };
  const capped: Array<{ scope: RunScope; capped: boolean | Promise<boolean>; lone: boolean }> = [];
  const failedRuns: RunRow[] = [];
  for (const [scope, o] of outcomes) {
    const table = OUTBOX_TABLE[scope];
    const givenUp = await giveUpRefused(tx, scope, o, maxAttempts, instance, log);
    failedRuns.push(...givenUp.failedRuns);
    if (givenUp.done.length > 0) {
      void beforeCommit(tx`UPDATE ${tx(table)} SET attempts = attempts + 1, sent_at = clock_timestamp() WHERE id = ANY((SELECT ${givenUp.done}::bigint[])::bigint[])`.execute());
    }
    if (o.sentIds.length > 0) {
      void beforeCommit(recordSent(tx, scope, o).execute());
    }
    if (o.failedIds.length > 0) {
      // With fairness on, a failed row steps aside for a while (1 s, doubling, at most 60 s): the fair
      // selection walks a group in dispatch order, so a row the queue keeps refusing (a body SQS rejects)
      // would otherwise be a candidate in every pass and take its tenant's room for ever (at cap 1, all of it).
      // With fairness off, a row the queue refused itself steps aside the same way, so its failed
      // passes (which bound it, maxAttempts) are spread over minutes, not spent by a burst of wake
      // signals; a row that failed for want of an answer is tried again on the next pass, as before.
      const aside = o.fair !== undefined ? o.failedIds : o.refused.map((r) => r.row.id).filter((id) => o.failedIds.includes(id));
      const stepAside = tx`available_at = CASE WHEN id = ANY(${aside}::bigint[]) THEN clock_timestamp() + least(power(2, attempts), 60) * interval '1 second' ELSE available_at END`;
      void beforeCommit(tx`UPDATE ${tx(table)} SET attempts = attempts + 1, ${stepAside} WHERE id = ANY(${o.failedIds}::bigint[])`.execute());
    }
    total.sent += o.sentIds.length;
    total.failed += o.failedIds.length + givenUp.done.length;
    total.full ||= o.rows.length === batchSize;
    // Only a fair pass reports `capped`: with fairness off the result is what it always was.
    // null: another relay is in its fair pass of this outbox; look again shortly. Nothing selected:
    // look again soon only while due rows wait (for room); asked in the write of the COMMIT, so it
    // delays no other outbox's commit. A short fair batch that sent something, with due rows its groups'
    // room kept out (the selection's `held`): look again shortly without asking (a poll that finds
    // nothing due asks, and ends the short polls). A short batch that took every due row (a trickle of
    // single dispatches) holds nothing back: no capped mark, no second look, no short polls; the next
    // dispatch's signal wakes the relay as with fairness off. A batch that sent nothing but failed
    // (a broken queue) waits for the sweep; one failed row beside sent ones (one tenant's bad body) must
    // not send every other tenant's held-back rows to the sweep interval.
    if (o.fair === undefined) continue;
    capped.push({
      scope,
      lone: o.rows.length > 0 && o.rows[0]!.lone === true,
      capped:
        o.fair === null
          ? true
          : o.rows.length === 0
            ? beforeCommit(dueRowsWaiting(tx, scope))
            : o.rows.length < batchSize && o.rows[0]!.held === true && (o.sentIds.length > 0 || o.failedIds.length === 0),
    });
  }
  if (failedRuns.length > 0) total.failedRuns = failedRuns.map((r) => r.runId);
  return { total, capped, failedRuns };
}

const BOTH_SCOPES: readonly RunScope[] = ['tenant', 'platform'];

interface Fairness {
  cap: number;
  groups: boolean;
  loneMax: LoneRoom;
  recent: RecentGroups | undefined;
  loneMaxWaitMs: number | undefined;
}

/**
 * One pass over both outboxes (or the given ones), in ONE transaction: a pass costs BEGIN and COMMIT
 * once, not once per outbox (with fairness off, one statement selects the due rows of both), which a
 * wake signal for a single run used to pay twice, the second time for an outbox with nothing due.
 */
export async function relayPass(
  sql: Sql,
  sqs: SQSClient,
  queueUrlPrefix: string,
  options: RelayPassOptions = {},
  scopes: readonly RunScope[] = BOTH_SCOPES,
): Promise<RelayPassResult> {
  const batchSize = options.batchSize ?? DEFAULT_RELAY_BATCH_SIZE;
  const instance = options.instance ?? defaultInstanceLabel();
  const log = options.log ?? silent;
  const fairness: Fairness = {
    cap: options.tenantInflightMax ?? 0,
    groups: options.fairGroups ?? false,
    loneMax: options.tenantInflightLoneMax ?? 0,
    recent: options.recentGroups,
    loneMaxWaitMs: options.loneMaxWaitMs,
  };
  const distinct = [...new Set(scopes)];
  const maxAttempts = options.maxAttempts ?? DEFAULT_OUTBOX_MAX_ATTEMPTS;
  const { total, capped, failedRuns } = await beginPipelinedAll(
    sql,
    (tx) => [openPass(tx, distinct, fairness), ...selections(tx, distinct, batchSize, fairness, options.windowMs)],
    (tx, [opened, ...selected], beforeCommit) =>
      passAll(tx, opened as readonly object[], selected as readonly object[][], sqs, queueUrlPrefix, distinct, batchSize, instance, log, fairness, beforeCommit, maxAttempts),
  );
  for (const c of capped) {
    // Answered before the COMMIT was.
    if (!(await c.capped)) continue;
    total.capped = true;
    (total.cappedScopes ??= []).push(c.scope);
    total.cappedLone = (total.cappedLone ?? true) && c.lone;
  }
  if (capped.length > 0) total.capped ??= false;
  recordRelayPass(total); // svc_relay_sent_total, svc_relay_send_failures_total (src/observe)
  for (const run of failedRuns) recordRunFinished(run, 'failed'); // svc_runs_finished_total (src/observe)
  return total;
}

export interface RelayOptions extends RelayPassOptions {
  sql: Sql;
  /** Source of the wake signal; the relay opens its own blocking connection from it. Without it, sweeps only. */
  redis?: Redis | undefined;
  sqs: SQSClient;
  queueUrlPrefix: string;
  /** Pause between sweeps when no signal arrives; default 5000 ms. */
  sweepIntervalMs?: number;
  /** Pause between samples of outbox and queue depths for the metrics; default 15000 ms. */
  backlogSampleIntervalMs?: number;
  /** How long past its own block time a wake wait may go unanswered before the relay gives up on it (a hung Redis), ms. Default 500. */
  wakeTimeoutMs?: number;
  /** With fairness on, how soon to look again while due rows wait for room; default 50 ms (SVC_RELAY_CAPPED_POLL_MS). */
  cappedPollMs?: number;
  /** Deadline of each wait of a pass on the database (a reserve, BEGIN, the pass's body, COMMIT), ms; default 60000. */
  passDeadlineMs?: number;
}

/**
 * waitForWake bounded by `boundMs` on the caller's clock: a hung Redis (frozen, black-holed) never
 * answers the blocking pop, and the relay must not wait for it past its sweep.
 */
async function boundedWake(blocking: Redis, blockSeconds: number, boundMs: number): Promise<WakeSignal | 'timeout' | 'failed' | 'hung'> {
  let timer: NodeJS.Timeout | undefined;
  const waited = waitForWake(blocking, blockSeconds).then(
    (woken) => woken ?? ('timeout' as const),
    () => 'failed' as const,
  );
  try {
    return await Promise.race([waited, new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), boundMs)))]);
  } finally {
    clearTimeout(timer);
  }
}

export interface Relay {
  /** Finishes the pass in progress, then stops; closes the relay's own Redis connection. */
  stop(): Promise<void>;
}

/**
 * How long the relay waits before its next pass, ms, once a wait returned `woken`, from what the last
 * pass reported (`pass`, null when it failed): a signal without the `recent` mark (`any`: a finish's
 * room signal, or a dispatch that did not say when it began) while the cap holds rows back lets more
 * room open first, so the next pass sends a fuller batch for the same count of the runs in flight (the
 * pass started `sincePassStartMs` ago); a dispatch's `recent` signal, a poll that timed out and an
 * uncapped relay go at once. A pass whose groups with rows pending were all alone (`cappedLone`: they
 * had their lone room, sized for looks this far apart, loneRoomsOf) waits LONE_REFILL_MS: half the
 * passes of a lone burst, each counting its runs in flight once. The loop hands the pass's result over
 * whole, so what the pass reported is what the wait is made of.
 */
export function capRefillWaitMs(pass: Pick<RelayPassResult, 'cappedScopes' | 'cappedLone'> | null, woken: WakeSignal | null, sincePassStartMs: number): number {
  const capped = (pass?.cappedScopes?.length ?? 0) > 0;
  if (!capped || woken !== 'any') return 0;
  return Math.max(0, (pass!.cappedLone === true ? LONE_REFILL_MS : CAPPED_REFILL_MS) - sincePassStartMs);
}

/**
 * Spends a refill wait (capRefillWaitMs) listening for wake signals (`listen`: the relay's wait, null
 * once its time is up or the relay stops): a dispatch's `recent` signal ends it at once, so a tenant
 * that arrives while a burst is capped, or a trickle of single dispatches, never waits for the burst's
 * refill; further room signals (`any`) do not. Resolves true when a `recent` signal ended it.
 */
export async function waitForRefill(refillMs: number, listen: (ms: number) => Promise<WakeSignal | null>, now: () => number = () => performance.now()): Promise<boolean> {
  const deadline = now() + refillMs;
  for (;;) {
    const left = deadline - now();
    if (left <= 0) return false;
    const woke = await listen(left);
    if (woke === 'recent') return true;
    if (woke === null) return false;
  }
}

export function startRelay(options: RelayOptions): Relay {
  const { sql, sqs, queueUrlPrefix } = options;
  const sweepIntervalMs = options.sweepIntervalMs ?? DEFAULT_RELAY_SWEEP_INTERVAL_MS;
  const log = options.log ?? silent;
  const passOptions: RelayPassOptions = {
    batchSize: options.batchSize ?? DEFAULT_RELAY_BATCH_SIZE,
    instance: options.instance ?? defaultInstanceLabel(),
    log,
    tenantInflightMax: options.tenantInflightMax ?? 0,
    tenantInflightLoneMax: options.tenantInflightLoneMax ?? 0,
    // The relay's memory of whom it sent for (tenant-inflight.ts): a trickling tenant contends between its runs too.
    recentGroups: options.recentGroups ?? new RecentGroups(),
    ...(options.loneMaxWaitMs === undefined ? {} : { loneMaxWaitMs: options.loneMaxWaitMs }),
    fairGroups: options.fairGroups ?? false,
    maxAttempts: options.maxAttempts ?? DEFAULT_OUTBOX_MAX_ATTEMPTS,
  };
  const cappedPollMs = options.cappedPollMs ?? DEFAULT_CAPPED_POLL_MS;
  // The blocking pop (BLMPOP) holds its connection, so the relay blocks on a connection of its own (never auto-pipelined,
  // even when the workers' connection it is duplicated from is: a command batched behind it waits).
  // It outlives the client's command timeout by design, so this connection has none: the wait
  // below bounds it instead, and the sweep never waits behind it.
  const blocking = options.redis?.duplicate({ connectionName: 'svc-relay-wake', enableAutoPipelining: false, commandTimeout: undefined });
  const wakeTimeoutMs = options.wakeTimeoutMs ?? 500;
  blocking?.on('error', () => {
    // Redis is a hint here; the sweep carries on. ioredis reconnects by itself.
  });

  // svc_outbox_pending, svc_outbox_oldest_pending_seconds, svc_queue_messages (src/observe).
  const backlog = startBacklogSampler({ sql, sqs, queueUrlPrefix, intervalMs: options.backlogSampleIntervalMs, log });

  let stopping = false;
  let interrupt: (() => void) | undefined;
  const interrupted = () =>
    new Promise<void>((resolve) => {
      interrupt = resolve;
    });
  const pause = (ms: number) => {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, ms);
      }),
      interrupted(),
    ]).finally(() => clearTimeout(timer));
  };

  /** Waits for a wake signal or `waitMs`; what the signals said when they (commits of new rows) ended the wait, null when none did. */
  async function idle(waitMs: number = sweepIntervalMs): Promise<WakeSignal | null> {
    const deadline = Date.now() + waitMs;
    while (!stopping) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) return null;
      if (blocking && blocking.status === 'ready') {
        const blockSeconds = Math.max(0.01, Math.min(WAKE_BLOCK_SECONDS, remaining / 1000));
        const woke = await boundedWake(blocking, blockSeconds, blockSeconds * 1000 + wakeTimeoutMs);
        if (woke === 'recent' || woke === 'any') return woke;
        if (woke === 'timeout') continue;
        redisFallback('outbox_wake_wait');
        if (woke === 'hung') {
          // Redis took the blocking pop and never answered: drop the connection (its pending commands fail)
          // and reconnect; the sweep keeps its clock meanwhile.
          log.warn({ waitedMs: blockSeconds * 1000 + wakeTimeoutMs }, 'the wake signal wait got no answer: reconnecting; the sweep carries on');
          blocking.disconnect(true);
        }
        // 'failed': Redis went away mid-wait: fall through to a short pause and keep sweeping.
      }
      if (stopping) return null;
      await pause(Math.min(remaining, 100));
    }
    return null;
  }

  const loop = (async () => {
    // The outboxes the next pass looks at: both, except on a short poll for rows the cap held back,
    // which looks only at the outboxes that had such rows (a platform outbox with nothing due is not
    // asked twenty times a second while a tenant's burst drains). Both at least once per sweep
    // interval all the same: a lost wake signal must not leave the other outbox waiting for the burst.
    let shortPoll: RunScope[] | null = null;
    let lastFullPass = 0;
    // Where the next pass starts reading (the header): null, every due row; else a performance.now()
    // instant, and the pass reads the rows that became due since it (and those with failed attempts).
    let windowFrom: number | null = null;
    let lastEveryRow = -Infinity;
    // The last pass found the cap holding rows back.
    let wasCapped = false;
    const bounds = passBounds(options.passDeadlineMs ?? DEFAULT_PASS_DEADLINE_MS, (stage) =>
      log.warn({ stage }, 'a relay pass did not finish its wait within its deadline: the pass is abandoned and the next one starts'),
    );
    while (!stopping) {
      let again = false;
      let cappedScopes: RunScope[] = [];
      // What the pass reported (null when it failed): the refill wait below is made of it.
      let pass: RelayPassResult | null = null;
      // While the cap holds, the mark (src/kv/wake.ts signalRoom) is in Redis before the pass counts the
      // runs in flight: a run that finishes after the count takes it and wakes the relay, and one that
      // finished before is in the count.
      const markedBefore = wasCapped;
      if (markedBefore) await markRelayCapped(options.redis, Math.max(sweepIntervalMs, cappedPollMs));
      const scopes = shortPoll && Date.now() - lastFullPass < sweepIntervalMs ? shortPoll : BOTH_SCOPES;
      if (scopes === BOTH_SCOPES) lastFullPass = Date.now();
      const passStart = performance.now();
      if (passStart - lastEveryRow >= sweepIntervalMs) windowFrom = null;
      if (windowFrom === null) lastEveryRow = passStart;
      try {
        const windowMs = windowFrom === null ? undefined : passStart - windowFrom;
        // Bounded: after a database restart a reserve or BEGIN can stay pending for ever, and with it
        // every later send; past the deadline the pass is abandoned (its session ended, nothing marked
        // sent) and the next one starts.
        const result = await withStageBounds(bounds, () => relayPass(sql, sqs, queueUrlPrefix, { ...passOptions, windowMs }, scopes));
        if (result.sent > 0 || result.failed > 0) log.debug({ ...result }, 'outbox relay pass');
        // A poller may hold the queued status of a run this pass failed.
        if (result.failedRuns) await evictRunStatus(options.redis, result.failedRuns);
        // A full batch means more is due now; but not when sends fail, or a broken queue would spin.
        again = result.full && result.failed === 0;
        cappedScopes = result.cappedScopes ?? [];
        pass = result;
        // A pass that drained what it saw moves the window up to it; after a full batch the next pass
        // starts where this one did (the rows past the batch, and any committed meanwhile, are there).
        if (!result.full) windowFrom = passStart - WINDOW_MARGIN_MS;
      } catch (error) {
        windowFrom = null;
        log.error({ err: error }, 'outbox relay pass failed; retrying after the sweep interval');
      }
      shortPoll = null;
      wasCapped = cappedScopes.length > 0;
      if (again) continue;
      // Rows held back by the fairness cap go out as soon as runs finish: the first finish wakes the
      // relay (src/kv/wake.ts signalRoom), and a short wait, not a sweep, bounds it without Redis. A pass
      // that found the cap holding without the mark in place looks once more, mark in place: a run that
      // finished between its count and the mark took no mark and signalled nothing (a poll lost).
      if (wasCapped && !markedBefore) continue;
      const woken = await idle(wasCapped ? cappedPollMs : sweepIntervalMs);
      const refill = capRefillWaitMs(pass, woken, performance.now() - passStart);
      if (refill > 0) await waitForRefill(refill, idle);
      if (woken === null && wasCapped) shortPoll = cappedScopes;
      // A sweep, or a signal that may announce an older row: the next pass reads every due row.
      if (woken !== 'recent') windowFrom = null;
    }
  })();

  return {
    async stop() {
      if (stopping) return loop;
      stopping = true;
      interrupt?.();
      // Disconnecting rejects a pending blocking pop at once.
      blocking?.disconnect();
      await loop;
      await backlog.stop();
    },
  };
}
