// The rescuer: no run waits for ever on a message or a worker that is gone. It runs beside the outbox
// relay and, every interval, finds the active runs with no live delivery (src/work/runtime/store/stranded-runs.ts:
// queued and sent, running or retrying, with nothing done for longer than any live delivery takes)
// and sends each one again through its outbox row (back to pending; the relay sends it), with a
// `queued` event whose detail says why (`rescue`, `reason`), in one transaction. Exactly-once is still decided by the ledger: a
// rescued duplicate of a run that did complete replays. A run rescued `maxRescues` times that is lost
// again ends `failed` (RESCUE_LIMIT) instead; a run whose outbox row is gone (payload unknown) ends
// `failed` (RESCUE_PAYLOAD_GONE).
//
// Several relays (a rolling deploy) may rescue at once: a run is locked FOR NO KEY UPDATE SKIP LOCKED
// and judged again after the lock, so a run another rescuer just sent again (its row pending, its
// rescue's `queued` event new) is left alone. A run a delivery is registering is skipped until the next pass.
// Each pass examines at most `scanLimit` active runs per outbox (a keyset cursor carries on where a
// full scan stopped) and rescues at most `batchSize`.
//
// A queue whose messages are visible right now has a backlog: its consumers are behind or down, and a
// message that seems overdue may be waiting in it. Its runs are left alone for that pass (they show in
// the overdue gauge); rescuing them would only add duplicates and spend their rescues while workers
// are down. A queue the rescuer cannot ask is treated the same way.
import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { Redis } from 'ioredis';
import type { Sql, TxSql } from '../../../db/client.ts';
import { inUnitOfWork, type Actor } from '../../../db/unit-of-work.ts';
import { DEFAULT_PASS_DEADLINE_MS, DEFAULT_RESCUE_INTERVAL_MS, DEFAULT_RESCUE_MARGIN_MS, DEFAULT_RESCUE_MAX } from '../../../config/limits.ts';
import { passBounds, withStageBounds } from '../../../db/stage-deadline.ts';
import { evictRunStatus } from '../../../kv/run-status-cache.ts';
import { signalOutbox } from '../../../kv/wake.ts';
import { recordRunFinished } from '../../../observe/delivery-metrics.ts';
import { recordOverdue, recordRescued } from '../../../observe/rescue-metrics.ts';
import { queueUrl, type QueueName } from '../../../queue/names.ts';
import { failedOutcome } from '../complete/failure-outcome.ts';
import { resendRuns, transitionRun, type RunRescue } from '../store/run-store.ts';
import type { RunScope } from '../store/scope-tables.ts';
import { appendTrailEvent } from '../store/trail.ts';
import { findStrandedRuns, type OverdueWindows, type StrandedRun } from '../store/stranded-runs.ts';

/** Defaults: interval 30 s (SVC_RESCUE_INTERVAL_MS), margin 120 s (SVC_RESCUE_MARGIN_MS), 5 rescues (SVC_RESCUE_MAX). */
export { DEFAULT_RESCUE_INTERVAL_MS, DEFAULT_RESCUE_MARGIN_MS, DEFAULT_RESCUE_MAX };
/** Default runs rescued per outbox per pass. */
export const DEFAULT_RESCUE_BATCH_SIZE = 200;
/** Default active runs examined per outbox per pass. */
export const DEFAULT_RESCUE_SCAN_LIMIT = 2_000;

/** Error code of a run given up after too many rescues. */
export const RESCUE_LIMIT = 'RESCUE_LIMIT';
/** Error code of a run whose message was lost after its outbox row (its payload) was purged. */
export const RESCUE_PAYLOAD_GONE = 'RESCUE_PAYLOAD_GONE';

/** Who the rescuer's units of work act as (app.process = rescuer). */
export const RESCUER_ACTOR: Actor = { kind: 'system', label: 'rescuer' };
const SQS_ATTRIBUTES_TIMEOUT_MS = 5_000;

export interface RescueLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface RescuePassOptions {
  sql: Sql;
  sqs: SQSClient;
  queueUrlPrefix: string;
  windows: OverdueWindows;
  /** Rescues of one run before it ends failed (RESCUE_LIMIT); default DEFAULT_RESCUE_MAX (5). */
  maxRescues?: number;
  /** Runs rescued per outbox per pass; default DEFAULT_RESCUE_BATCH_SIZE (200). */
  batchSize?: number;
  /** Active runs examined per outbox per pass; default DEFAULT_RESCUE_SCAN_LIMIT (2000). */
  scanLimit?: number;
  /** worker_instance of the trail rows written; default 'rescuer'. */
  instance?: string;
  /** Evicts cached statuses of runs ended here, and wakes the relay after a resend. Optional. */
  redis?: Redis | undefined;
  log?: RescueLogger;
}

export interface RescuePassResult {
  /** Overdue runs found (both outboxes), rescued or not. */
  overdue: number;
  /** Runs sent again. */
  resent: number;
  /** Runs ended failed (RESCUE_LIMIT, RESCUE_PAYLOAD_GONE). */
  gaveUp: number;
  /** Overdue runs left alone because their queue has a backlog (or could not be asked). */
  deferred: number;
}

/** Keyset cursors of the scans, per outbox: where the next pass carries on after a full scan. */
export type RescueCursors = Partial<Record<RunScope, { updatedAt: string; runId: string } | null>>;

const silent: RescueLogger = { info() {}, warn() {}, error() {} };
const SCOPES: readonly RunScope[] = ['tenant', 'platform'];

async function queueHasBacklog(sqs: SQSClient, queueUrlPrefix: string, queue: QueueName): Promise<boolean> {
  try {
    const out = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl(queueUrlPrefix, queue), AttributeNames: ['ApproximateNumberOfMessages'] }), {
      abortSignal: AbortSignal.timeout(SQS_ATTRIBUTES_TIMEOUT_MS),
    });
    return (Number(out.Attributes?.ApproximateNumberOfMessages ?? 0) || 0) > 0;
  } catch {
    return true;
  }
}

function rescueDetail(run: StrandedRun, rescue: number, max: number): Record<string, unknown> {
  return { reason: run.reason, status: run.status, waited_seconds: Math.round(run.waitedSeconds), since: run.since, rescue, max_rescues: max };
}

/** Ends a stranded run `failed` with `code`; false when it moved on meanwhile. The caller holds the run row locked. */
async function giveUp(tx: TxSql, run: StrandedRun, code: string, message: string, detail: Record<string, unknown>, instance: string): Promise<boolean> {
  const failed = await transitionRun(tx, run.scope, {
    runId: run.runId,
    tenantId: run.tenantId,
    to: 'failed',
    from: ['queued', 'running', 'retrying'],
    outcome: failedOutcome({ code, type: 'RunFailed', message }),
  });
  if (!failed) return false;
  await appendTrailEvent(tx, run.scope, {
    runId: run.runId,
    tenantId: run.tenantId,
    event: 'failed',
    attempt: failed.attempts,
    queue: run.queue,
    workerInstance: instance,
    errorCode: code,
    errorType: 'RunFailed',
    detail: { message, ...detail },
    occurredAt: 'run_finished',
  });
  return true;
}

/** One outbox's rescues, in one transaction: lock, judge again, send again or give up. */
async function rescueScope(o: RescuePassOptions, scope: RunScope, candidates: readonly StrandedRun[]) {
  const max = o.maxRescues ?? DEFAULT_RESCUE_MAX;
  const instance = o.instance ?? 'rescuer';
  return inUnitOfWork(o.sql, RESCUER_ACTOR, async (tx) => {
    const ids = candidates.map((c) => c.runId);
    const locked = await tx<{ run_id: string }[]>`
      SELECT run_id::text AS run_id FROM ${tx(scope === 'tenant' ? 'task_runs' : 'platform_task_runs')}
       WHERE run_id = ANY(${ids}::uuid[]) AND status IN ('queued', 'running', 'retrying')
       ORDER BY run_id FOR NO KEY UPDATE SKIP LOCKED`;
    if (locked.length === 0) return { resent: [] as StrandedRun[], gaveUp: [] as Array<{ run: StrandedRun; code: string }> };
    // Judged again under the lock, in a snapshot taken after it: another rescuer's commit, a delivery
    // that registered meanwhile, is seen.
    const { runs } = await findStrandedRuns(tx, scope, o.windows, { ids: locked.map((l) => l.run_id) });
    const resend: RunRescue[] = [];
    const resent: StrandedRun[] = [];
    const gaveUp: Array<{ run: StrandedRun; code: string }> = [];
    for (const run of runs) {
      if (!run.hasOutbox) {
        const message = 'the run waited on a message that was lost, and its outbox row (its payload) was purged: it cannot be sent again';
        if (await giveUp(tx, run, RESCUE_PAYLOAD_GONE, message, rescueDetail(run, run.rescues, max), instance)) gaveUp.push({ run, code: RESCUE_PAYLOAD_GONE });
      } else if (run.rescues >= max) {
        const message = `the run was rescued ${run.rescues} time(s) and its message or worker was lost again: given up`;
        if (await giveUp(tx, run, RESCUE_LIMIT, message, rescueDetail(run, run.rescues, max), instance)) gaveUp.push({ run, code: RESCUE_LIMIT });
      } else {
        resend.push({ runId: run.runId, tenantId: run.tenantId, queue: run.queue, attempt: run.attempts, detail: rescueDetail(run, run.rescues + 1, max), notBefore: run.retryDue });
        resent.push(run);
      }
    }
    await resendRuns(tx, scope, resend, instance);
    return { resent, gaveUp };
  });
}

/**
 * One pass over both outboxes: find the overdue runs, set the gauges, rescue what may be rescued.
 * `cursors` is updated in place (the next pass carries on after a full scan).
 */
export async function rescuePass(o: RescuePassOptions, cursors: RescueCursors = {}): Promise<RescuePassResult> {
  const log = o.log ?? silent;
  const batchSize = o.batchSize ?? DEFAULT_RESCUE_BATCH_SIZE;
  const scanLimit = o.scanLimit ?? DEFAULT_RESCUE_SCAN_LIMIT;
  const found = new Map<RunScope, StrandedRun[]>();
  for (const scope of SCOPES) {
    const scan = await inUnitOfWork(o.sql, RESCUER_ACTOR, (tx) => findStrandedRuns(tx, scope, o.windows, { scan: { limit: scanLimit, after: cursors[scope] ?? null } }));
    found.set(scope, scan.runs);
    // Carry on after a full scan; start from the oldest again after a short one.
    cursors[scope] = scan.examined >= scanLimit ? scan.last : null;
  }
  const all = [...found.values()].flat();
  recordOverdue(all);
  const result: RescuePassResult = { overdue: all.length, resent: 0, gaveUp: 0, deferred: 0 };
  if (all.length === 0) return result;

  // Runs known lost (the queue server restarted empty) and runs without a payload are not waiting in
  // any queue: the backlog check does not hold them back.
  const asked = [...new Set(all.filter((r) => r.reason !== 'queue_restarted' && r.reason !== 'payload_gone').map((r) => r.queue))];
  const backlog = new Set<QueueName>();
  await Promise.all(asked.map(async (queue) => (await queueHasBacklog(o.sqs, o.queueUrlPrefix, queue)) && backlog.add(queue)));

  const ended: string[] = [];
  for (const scope of SCOPES) {
    const runs = found.get(scope)!;
    const candidates = runs.filter((r) => r.reason === 'queue_restarted' || r.reason === 'payload_gone' || !backlog.has(r.queue));
    result.deferred += runs.length - candidates.length;
    const take = candidates.slice(0, batchSize);
    // More overdue than one batch: this stretch is scanned again next pass (the rescued ones moved on).
    if (candidates.length > batchSize) cursors[scope] = null;
    if (take.length === 0) continue;
    try {
      const { resent, gaveUp } = await rescueScope(o, scope, take);
      result.resent += resent.length;
      result.gaveUp += gaveUp.length;
      for (const r of resent) recordRescued(r.queue, r.reason);
      for (const g of gaveUp) {
        recordRescued(g.run.queue, g.code === RESCUE_LIMIT ? 'rescue_limit' : 'payload_gone');
        recordRunFinished({ name: g.run.unit, queue: g.run.queue, queuedAt: new Date(g.run.since), startedAt: null }, 'failed');
        ended.push(g.run.runId);
        log.error({ runId: g.run.runId, queue: g.run.queue, code: g.code, rescues: g.run.rescues }, 'stranded run given up: failed');
      }
      if (resent.length > 0) {
        log.warn(
          { scope, resent: resent.length, reasons: [...new Set(resent.map((r) => r.reason))], oldestWaitedSeconds: Math.round(Math.max(...resent.map((r) => r.waitedSeconds))) },
          'stranded runs sent again (their message or worker was lost)',
        );
      }
    } catch (error) {
      log.error({ err: error, scope }, 'rescue pass failed for this outbox; retried next pass');
    }
  }
  if (ended.length > 0) await evictRunStatus(o.redis, ended).catch(() => {});
  if (result.resent > 0) await signalOutbox(o.redis).catch(() => false);
  return result;
}

export interface RescuerOptions extends RescuePassOptions {
  /** Pause between passes, ms; default DEFAULT_RESCUE_INTERVAL_MS (30000). */
  intervalMs?: number;
  /** Deadline of each database wait of a pass, ms; default DEFAULT_PASS_DEADLINE_MS (60000). */
  passDeadlineMs?: number;
}

export interface Rescuer {
  /** Finishes the pass in progress, then stops. */
  stop(): Promise<void>;
}

/**
 * The database clock now, for OverdueWindows.lostBefore when the queue server started empty with this
 * process (npm start's in-memory queue): read before the relay starts, every message sent before it is
 * lost, and those runs are sent again on the first pass instead of after their window.
 */
export async function queueStartInstant(sql: Sql): Promise<string> {
  const [row] = await sql<{ at: string }[]>`SELECT clock_timestamp()::text AS at`;
  return row!.at;
}

export function startRescuer(options: RescuerOptions): Rescuer {
  const intervalMs = options.intervalMs ?? DEFAULT_RESCUE_INTERVAL_MS;
  const log = options.log ?? silent;
  let stopping = false;
  let wake: (() => void) | undefined;
  const cursors: RescueCursors = {};
  // Bounded as the relay's passes: a pass stuck on the driver after a database restart is abandoned.
  const bounds = passBounds(options.passDeadlineMs ?? DEFAULT_PASS_DEADLINE_MS, (stage) =>
    log.warn({ stage }, 'a rescue pass did not finish its wait within its deadline: the pass is abandoned and the next one starts'),
  );
  const loop = (async () => {
    while (!stopping) {
      try {
        await withStageBounds(bounds, () => rescuePass(options, cursors));
      } catch (error) {
        log.error({ err: error }, 'rescue pass failed; retried after the interval');
      }
      if (stopping) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, intervalMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  })();
  return {
    async stop() {
      stopping = true;
      wake?.();
      await loop;
    },
  };
}
