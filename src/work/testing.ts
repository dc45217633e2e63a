// The unit author's test helper (public module: import it from 'src/work/testing.ts'):
//
//   const { outcome, error, run, trail, delivery } = await testUnit(sendInvoice, { invoiceId: '7' }, { sql, tenant });
//
// dispatches the payload as any dispatch would (a real queued run, its `queued` event and outbox row),
// then hands the run's message to the worker's own runner (runtime/consume/runner.ts runDelivery) through
// an in-memory DeliveryPort instead of SQS: the checks, the registration, the effect transaction with its
// guarded run.transaction and the unit's timeout, the outcome's size check and the settlement are the
// worker's, so a unit passes its test exactly when it passes in the worker. The port records what the
// worker did with the message (deleted, retried after a delay, dead-lettered, given back) and testUnit
// returns it beside the run. Nothing is sent: the outbox rows of follow-ups stay pending; the run's own
// is marked sent by its delivery (`sent` on the trail), as a worker does for a message it received.
// No Redis unless one is given (the ledger alone decides, as in a worker while Redis is down).
//
// `deliverAgain(unit, previous, options)` delivers the same message once more: the worker's retry of it
// (attempt + 1, receive count + 1).
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import pino, { type Logger } from 'pino';
import type { z } from 'zod';
import type { Sql, TxSql } from '../db/client.ts';
import type { QueueName } from '../queue/names.ts';
import { inUnitOfWork, type Actor } from '../db/unit-of-work.ts';
import type { BackoffOptions } from './runtime/complete/backoff.ts';
import { FinishCoalescer, GroupCommits, runDelivery, StartCoalescer, type DeadLetterContext, type DeliveryPort, type DeliveryResult, type RunnerDeps } from './runtime/consume/runner.ts';
import { createDispatcher, targetOfUnit } from './runtime/produce/dispatch.ts';
import { envelopeBody } from './runtime/produce/envelope.ts';
import { readRun, type RunRow } from './runtime/store/run-store.ts';
import type { RunScope } from './runtime/store/scope-tables.ts';
import { readTrail, type TrailEvent } from './runtime/store/trail.ts';
import type { classifyFailure } from './define/unit-errors.ts';
import type { DispatchedRun, UnitOutcome, WorkUnit } from './define/unit.ts';

export interface TestUnitOptions {
  sql: Sql;
  /** Tenant id of a tenant unit's run (needed unless `actor` carries one); omit for platform and system units. */
  tenant?: string;
  /** Who dispatches the run; default a system process (`test-unit`) bound to `tenant`. */
  actor?: Actor;
  /** Units `run.dispatch` and `run.publish` reach (the subscribers among them); default the unit alone. */
  units?: Iterable<WorkUnit>;
  /** Names the process in trail rows; default `test-unit`. */
  instance?: string;
  /** ApproximateReceiveCount of the delivery; default 1 (deliverAgain: the previous one + 1). The last allowed receive takes the permanent path. */
  receiveCount?: number;
  /** Receives before the permanent path (SVC_MAX_RECEIVES; the unit's retry.maxReceives may lower it); default 5. */
  maxReceives?: number;
  /** The workers' backoff (SVC_BACKOFF_*) under the unit's own retry policy; default base 2000 ms, cap 300000 ms, full jitter. */
  backoff?: BackoffOptions;
  /** Redis for the idempotency gate and the result cache; default none (the database ledger alone decides). */
  redis?: Redis;
  /** Idempotency lease margin over the unit timeout, ms (SVC_IDEMPOTENCY_LEASE_MARGIN_MS); default 30000. */
  leaseMarginMs?: number;
  /** Retention of a finished idempotency key, ms (SVC_IDEMPOTENCY_RETENTION_MS); default 7 days. */
  retentionMs?: number;
  /** Aborting it releases the running handler as a worker's drain window ending does; default never. */
  releaseSignal?: AbortSignal;
  /** How often the running handler's run is checked for an operator's cancel, ms; default 20000. */
  cancelCheckIntervalMs?: number;
  /** Logger of the delivery and of run.logger; default silent. */
  logger?: Logger;
}

/** A failure as the runtime classifies it. */
export type ClassifiedFailure = ReturnType<typeof classifyFailure>;

/** A trail event of the run, in causal order. */
export type TrailRow = TrailEvent;

/** One call the runner made on the message, in order. */
export type PortCall =
  | { call: 'ack' }
  | { call: 'retryAfter'; seconds: number }
  | { call: 'giveBack' }
  | { call: 'waitTurn'; seconds: number }
  | { call: 'deadLetter'; context: DeadLetterContext }
  | { call: 'keepFor'; seconds: number };

/**
 * What became of the message: deleted (`acked`), visible again after `retryInSeconds` (`retry`: a
 * scheduled retry, a held key, a release on shutdown), back at once without spending the receive
 * (`given_back`), back shortly without spending the receive while an earlier run of its serial key is
 * not final (`waiting_turn`), copied to the dead-letter queue and deleted (`dead_lettered`).
 */
export type MessageDisposition = 'acked' | 'retry' | 'given_back' | 'waiting_turn' | 'dead_lettered';

/** The message as delivered, to deliver it again. */
export interface TestMessage {
  body: string;
  receiveCount: number;
}

export interface TestUnitResult {
  /** The handler's outcome as stored on the run; null unless the run succeeded. */
  outcome: UnitOutcome | null;
  /** The failure of this delivery as the worker recorded it (trail `failed` or `retry_scheduled`); null when none. */
  error: ClassifiedFailure | null;
  /** The run row after the delivery. */
  run: RunRow;
  /** The run's trail in order. */
  trail: TrailRow[];
  /** Follow-up runs the run committed (dispatched or published by its handler). */
  followUps: DispatchedRun[];
  /** What the worker did with the message. */
  delivery: MessageDisposition;
  /** The delay of the message's return when `delivery` is `retry`, seconds; null otherwise. */
  retryInSeconds: number | null;
  /** What was sent to the dead-letter queue with the message; null when it was not. */
  deadLetter: DeadLetterContext | null;
  /** Every call the runner made on the message, in order. */
  portCalls: PortCall[];
  /** The runner's own result (runtime/execute/context.ts DeliveryResult). */
  result: DeliveryResult;
  /** The message as delivered (deliverAgain sends it again). */
  message: TestMessage;
}

/** Handlers log through run.logger; in a unit test those lines go nowhere unless a logger is given. */
const silentLogger = pino({ level: 'silent' });

function tenantOf(options: TestUnitOptions): string | null {
  if (options.actor) return options.actor.kind === 'scheduler' ? null : (options.actor.tenantId ?? null);
  return options.tenant ?? null;
}

/** Dispatches `payload` to `unit` for real, then delivers its message once through the worker's runner; see the file header. */
export async function testUnit<S extends z.ZodType>(unit: WorkUnit & { payload: S }, payload: z.input<S>, options: TestUnitOptions): Promise<TestUnitResult> {
  const instance = options.instance ?? 'test-unit';
  const tenantId = tenantOf(options);
  const actor: Actor = options.actor ?? { kind: 'system', tenantId, label: 'test-unit' };
  // Exactly as the API or a use case would (the payload is checked here: a bad one throws). A
  // subscriber under test gets its run through a publish that reaches it alone.
  const dispatched = await inUnitOfWork(options.sql, actor, async (tx) => {
    const dispatcher = createDispatcher({
      resolve: (name) => (name === unit.name && unit.kind === 'task' ? targetOfUnit(unit) : undefined),
      subscribers: () => (unit.kind === 'subscriber' ? [targetOfUnit(unit)] : []),
      instance,
    });
    if (unit.kind === 'task') return dispatcher.dispatchTask(tx, unit.name, payload, { actor });
    const [run] = await dispatcher.publishEvent(tx, unit.event.type, unit.event.version, payload, { actor });
    return run!;
  });
  // The body the relay sends for this outbox row.
  return deliverOnce(unit, { body: envelopeBody(dispatched.envelope), receiveCount: options.receiveCount ?? 1 }, dispatched, options);
}

/**
 * Delivers the message of an earlier testUnit (or deliverAgain) once more, as the queue does after a
 * retry's delay or a visibility timeout: receive count + 1 unless `options.receiveCount` says.
 */
export async function deliverAgain(unit: WorkUnit, previous: Pick<TestUnitResult, 'message' | 'run'>, options: TestUnitOptions): Promise<TestUnitResult> {
  const receiveCount = options.receiveCount ?? previous.message.receiveCount + 1;
  return deliverOnce(unit, { body: previous.message.body, receiveCount }, previous.run, options);
}

async function deliverOnce(unit: WorkUnit, message: TestMessage, key: { runId: string; tenantId: string | null }, options: TestUnitOptions): Promise<TestUnitResult> {
  const { sql } = options;
  const units = new Map([...(options.units ?? [unit])].map((u) => [u.name, u]));
  units.set(unit.name, unit);
  const never = new AbortController().signal;
  // The worker's runner dependencies, as worker-runtime.ts builds them for one process.
  const deps: RunnerDeps = {
    sql,
    redis: options.redis,
    units,
    workerInstance: options.instance ?? 'test-unit',
    logger: options.logger ?? silentLogger,
    leaseMarginMs: options.leaseMarginMs ?? 30_000,
    retentionMs: options.retentionMs ?? 7 * 86_400_000,
    backoff: options.backoff ?? {},
    maxReceives: options.maxReceives,
    releaseSignal: options.releaseSignal,
    cancelCheckIntervalMs: options.cancelCheckIntervalMs,
    starts: new StartCoalescer(sql, options.logger ?? silentLogger),
    finishes: new FinishCoalescer(sql, options.logger ?? silentLogger),
    groups: GroupCommits.forUnits(units.values(), options.releaseSignal ?? never),
  };
  const portCalls: PortCall[] = [];
  const port: DeliveryPort = {
    ack: async () => void portCalls.push({ call: 'ack' }),
    retryAfter: async (seconds) => void portCalls.push({ call: 'retryAfter', seconds }),
    giveBack: async () => void portCalls.push({ call: 'giveBack' }),
    waitTurn: async (seconds) => void portCalls.push({ call: 'waitTurn', seconds }),
    deadLetter: async (context) => void portCalls.push({ call: 'deadLetter', context }),
    keepFor: (seconds) => void portCalls.push({ call: 'keepFor', seconds }),
  };
  const result = await runDelivery(deps, { messageId: randomUUID(), body: message.body, receiveCount: message.receiveCount, receivedAtMs: performance.now() }, port);

  const { runId, tenantId } = key;
  const scope: RunScope = tenantId === null ? 'platform' : 'tenant';
  // Read as the worker reads it: the worker process, bound to the run's tenant.
  const workerActor: Actor = { kind: 'system', tenantId, label: `worker:${unit.name}`.slice(0, 128) };
  const { run, followUps } = await inUnitOfWork(sql, workerActor, async (tx) => ({
    run: (await readRun(tx, scope, { runId, tenantId }))!,
    followUps: await committedFollowUps(tx, runId),
  }));
  const trail = await readTrail(sql, scope, runId);
  const dead = portCalls.findLast((c) => c.call === 'deadLetter');
  const last = portCalls.findLast((c) => c.call !== 'keepFor');
  const delivery: MessageDisposition = dead ? 'dead_lettered' : last?.call === 'retryAfter' ? 'retry' : last?.call === 'giveBack' ? 'given_back' : last?.call === 'waitTurn' ? 'waiting_turn' : 'acked';
  return {
    outcome: run.status === 'succeeded' ? run.outcome : null,
    error: result === 'retrying' || result === 'failed' ? failureOf(trail, message.receiveCount) : null,
    run,
    trail,
    followUps,
    delivery,
    retryInSeconds: delivery === 'retry' && last?.call === 'retryAfter' ? last.seconds : null,
    deadLetter: dead?.call === 'deadLetter' ? dead.context : null,
    portCalls,
    result,
    message,
  };
}

/** The failure this receive recorded on the trail (the settlement writes what classifyFailure found). */
function failureOf(trail: readonly TrailRow[], receiveCount: number): ClassifiedFailure | null {
  const row = trail.findLast((t) => (t.event === 'failed' || t.event === 'retry_scheduled') && t.errorCode && t.receiveCount === receiveCount);
  if (!row) return null;
  return {
    code: row.errorCode!,
    type: row.errorType ?? '',
    message: typeof row.detail.message === 'string' ? row.detail.message : '',
    permanent: row.event === 'failed' && row.detail.permanent === true,
  };
}

/** The runs caused by `runId` (its handler's dispatches and publishes, committed with its effect), in dispatch order. */
async function committedFollowUps(tx: TxSql, runId: string): Promise<DispatchedRun[]> {
  const rows = await tx<{ run_id: string; tenant_id: string | null; name: string; queue: QueueName; trigger: string }[]>`
    SELECT run_id, tenant_id::text, name, queue, trigger, queued_at FROM task_runs WHERE causation_id = ${runId} AND run_id <> ${runId}
    UNION ALL
    SELECT run_id, NULL, name, queue, trigger, queued_at FROM platform_task_runs WHERE causation_id = ${runId} AND run_id <> ${runId}
    ORDER BY queued_at, run_id`;
  return rows.map((r) => ({
    runId: r.run_id,
    scope: r.tenant_id === null ? 'platform' : 'tenant',
    tenantId: r.tenant_id,
    name: r.name,
    queue: r.queue,
    kind: r.trigger === 'event' ? 'event' : 'task',
  }));
}
