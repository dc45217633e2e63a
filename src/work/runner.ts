// Runs one delivery of a queue message through the gated idempotency runner and settles it.
//
//   parse envelope ─► Redis gate (SET NX PX) ─► registration tx: lock run, trail `received`,
//   status → running, attempts + 1 ─► effect tx: advisory lock + ledger claim, trail `started`,
//   handler(payload, run), ledger `completed`, status → succeeded, trail `succeeded` ─commit─►
//   result copied to Redis, message deleted.
//
// Failures: transient → ledger `failed_retryable`, run `retrying`, `retry_scheduled`, message back
// with exponential backoff; permanent or the fifth receive → ledger `failed_permanent`, run `failed`,
// `failed`, message to the dead-letter queue, `dead_lettered`. Shutdown past the drain window → run
// `queued`, `released_on_shutdown`, message visible again at once. The effect transaction never holds
// the run row locked while the handler runs, so `progress()` commits in its own short transaction.
//
// The runner knows nothing of SQS: the consumer passes a DeliveryPort that deletes, delays or
// dead-letters the message.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Sql, TxSql } from '../db/client.ts';
import { jsonbTextBytes } from '../db/jsonb-text.ts';
import { inUnitOfWork, type Actor } from '../db/unit-of-work.ts';
import { runStatusKey } from '../kv/keys.ts';
import { evictRunStatus } from '../kv/run-status-cache.ts';
import { DEFAULT_IDEMPOTENCY_CACHE_TTL_MS, RUN_JSON_MAX_BYTES, RUNTIME_MAX_RECEIVES } from '../config/limits.ts';
import { backoffSeconds, type BackoffOptions } from './backoff.ts';
import { parseEnvelope, type Envelope } from './envelope.ts';
import {
  acquireGate,
  advisoryKeyOf,
  claimKeyAndStart,
  failKey,
  fingerprintOf,
  gateKeyOf,
  idempotencyKeyOf,
  readKey,
  recordGateResult,
  recordGateResultAndEvict,
  releaseGate,
  type GateState,
  type LedgerScope,
} from './idempotency.ts';
import {
  appendTrailEvent,
  FINAL_RUN_STATUSES,
  finishDelivery,
  OUTBOX_TABLE,
  readRun,
  setRunProgress,
  startDeliveries,
  startDelivery,
  transitionRun,
  type ActorSettings,
  type RunRow,
  type RunScope,
  type TrailEventName,
} from './run-store.ts';
import { classifyFailure, IdempotencyKeyReused, PermanentFailure, UnitNotRegistered, UnitTimedOut, ValidationFailure } from './unit-errors.ts';
import type { UnitOutcome, UnitRun, WorkUnit } from './unit.ts';

export interface Delivery {
  messageId: string;
  body: string;
  /** ApproximateReceiveCount of this delivery (1 on the first). */
  receiveCount: number;
}

export interface DeadLetterContext {
  runId: string | null;
  unit: string | null;
  errorCode: string;
  errorType: string;
  errorMessage: string;
  receiveCount: number;
  workerInstance: string;
}

/** What the runner may do with the message; implemented by the consumer over SQS. */
export interface DeliveryPort {
  /** Deletes the message: the delivery is settled. */
  ack(): Promise<void>;
  /** Makes the message visible again after `seconds` (0: at once). */
  retryAfter(seconds: number): Promise<void>;
  /** Sends a copy with its error context to the dead-letter queue (the runner then acks). */
  deadLetter(context: DeadLetterContext): Promise<void>;
}

export interface RunnerDeps {
  sql: Sql;
  /** Absent or down: the database ledger alone decides. */
  redis?: Redis | undefined;
  units: ReadonlyMap<string, WorkUnit>;
  /** 1..128 characters naming this process in the trail, e.g. `workers@host:1234`. */
  workerInstance: string;
  logger: Logger;
  /** Gate lease = unit timeout + this margin (SVC_IDEMPOTENCY_LEASE_MARGIN_MS). */
  leaseMarginMs: number;
  /** How long a finished key is kept for replay (SVC_IDEMPOTENCY_RETENTION_MS). */
  retentionMs: number;
  /** TTL of the Redis copy of a finished result (SVC_IDEMPOTENCY_CACHE_TTL_MS); the ledger answers after it. Default 1 hour. */
  cacheTtlMs?: number;
  backoff: BackoffOptions;
  /** Receives before the permanent path. Default 5. */
  maxReceives?: number;
  /** Aborted at the end of the drain window: running handlers are released back to the queue. */
  releaseSignal?: AbortSignal;
}

export type DeliveryResult = 'succeeded' | 'replayed' | 'retrying' | 'failed' | 'held' | 'released' | 'settled';

/** A failure already known when the message arrives: no handler will run for this delivery. */
interface Failure {
  code: string;
  type: string;
  message: string;
  permanent: boolean;
}

class HeldElsewhere extends Error {
  readonly code = 'IDEMPOTENCY_KEY_HELD';
}

export class ReleasedOnShutdown extends Error {
  readonly code = 'RELEASED_ON_SHUTDOWN';
  constructor() {
    super('the worker is shutting down and the stop budget ran out: the run goes back to the queue');
  }
}

/** Keeps a JSON object under the column limit (as jsonb text, what the CHECK measures) by shortening its long strings. */
export function fitDetail(detail: Record<string, unknown>, maxBytes = RUN_JSON_MAX_BYTES): Record<string, unknown> {
  let out = detail;
  for (let limit = 512; jsonbTextBytes(out) > maxBytes && limit >= 16; limit = Math.floor(limit / 2)) {
    out = Object.fromEntries(
      Object.entries(detail).map(([k, v]) => [k, typeof v === 'string' && v.length > limit ? `${v.slice(0, limit)}…` : v]),
    );
  }
  return jsonbTextBytes(out) > maxBytes ? { truncated: true } : out;
}

/** The Redis copy never outlives the ledger row it copies. */
function cacheTtlOf(deps: RunnerDeps): number {
  return Math.min(deps.cacheTtlMs ?? DEFAULT_IDEMPOTENCY_CACHE_TTL_MS, deps.retentionMs);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Settles when the promise does, or rejects with the signal's reason when it is aborted first. */
function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e as Error);
      },
    );
  });
}

interface DeliveryContext {
  deps: RunnerDeps;
  delivery: Delivery;
  port: DeliveryPort;
  envelope: Envelope;
  scope: RunScope;
  tenantId: string | null;
  unit: WorkUnit | undefined;
  log: Logger;
  actor: Actor;
  maxReceives: number;
  key?: Buffer;
  fingerprint?: Buffer;
  gateKey?: string;
  gateToken?: string;
}

function ledgerScope(c: DeliveryContext): LedgerScope {
  return { scope: c.scope, tenantId: c.tenantId };
}

async function evict(c: DeliveryContext): Promise<void> {
  await evictRunStatus(c.deps.redis, c.envelope.run_id);
}

async function trail(
  tx: TxSql,
  c: DeliveryContext,
  run: Pick<RunRow, 'queue'>,
  event: TrailEventName,
  attempt: number,
  extra: { receiveCount?: number; errorCode?: string; errorType?: string; detail?: Record<string, unknown> } = {},
): Promise<void> {
  await appendTrailEvent(tx, c.scope, {
    runId: c.envelope.run_id,
    tenantId: c.tenantId,
    event,
    attempt,
    receiveCount: extra.receiveCount ?? c.delivery.receiveCount,
    queue: run.queue,
    workerInstance: c.deps.workerInstance,
    errorCode: extra.errorCode,
    errorType: extra.errorType,
    detail: fitDetail(extra.detail ?? {}),
  });
}

async function releaseOwnGate(c: DeliveryContext): Promise<void> {
  if (c.gateKey && c.gateToken) await releaseGate(c.deps.redis, c.gateKey, c.gateToken);
}

/** Processes one delivery end to end. Never throws for a unit's failure; throws only if the database is unreachable. */
export async function runDelivery(deps: RunnerDeps, delivery: Delivery, port: DeliveryPort): Promise<DeliveryResult> {
  const maxReceives = deps.maxReceives ?? RUNTIME_MAX_RECEIVES;
  let envelope: Envelope;
  try {
    envelope = parseEnvelope(delivery.body);
  } catch (error) {
    // Not a run envelope: no run to record and no retry can fix it.
    const f = classifyFailure(error);
    deps.logger.error({ messageId: delivery.messageId, code: f.code }, 'message is not a run envelope: dead-lettered');
    await port.deadLetter({
      runId: null,
      unit: null,
      errorCode: 'MESSAGE_MALFORMED',
      errorType: f.type,
      errorMessage: f.message,
      receiveCount: delivery.receiveCount,
      workerInstance: deps.workerInstance,
    });
    await port.ack();
    return 'failed';
  }
  const scope: RunScope = envelope.tenant_id === undefined ? 'platform' : 'tenant';
  const tenantId = envelope.tenant_id ?? null;
  const unit = deps.units.get(envelope.name);
  const c: DeliveryContext = {
    deps,
    delivery,
    port,
    envelope,
    scope,
    tenantId,
    unit,
    maxReceives,
    log: deps.logger.child({ runId: envelope.run_id, unit: envelope.name, receiveCount: delivery.receiveCount }),
    // Every statement runs as the worker process, bound to the run's tenant.
    actor: { kind: 'system', tenantId, label: `worker:${envelope.name}`.slice(0, 128) },
  };

  // Failures known before anything runs.
  let early: Failure | null = null;
  let payload: unknown;
  if (!unit) {
    early = classifyFailure(new UnitNotRegistered(envelope.name));
  } else if (delivery.receiveCount > maxReceives) {
    early = {
      code: 'RECEIVES_EXHAUSTED',
      type: 'ReceivesExhausted',
      message: `the message was received ${delivery.receiveCount} times, more than the ${maxReceives} allowed: the handler is not run again`,
      permanent: true,
    };
  } else if ((unit.context === 'tenant') !== (scope === 'tenant')) {
    early = classifyFailure(
      new PermanentFailure('RUN_CONTEXT_MISMATCH', `unit '${unit.name}' has context ${unit.context} but the message is a ${scope} run`),
    );
  } else {
    const parsed = unit.payload.safeParse(envelope.payload);
    if (!parsed.success) {
      early = classifyFailure(new ValidationFailure(`payload of '${unit.name}' is invalid: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(payload)'} ${i.message}`).join('; ')}`));
    } else {
      payload = parsed.data;
      try {
        const source = unit.idempotencyKey ? unit.idempotencyKey(payload as never) : envelope.run_id;
        c.key = idempotencyKeyOf(unit.name, source);
        c.fingerprint = fingerprintOf(envelope.payload);
        c.gateKey = gateKeyOf(scope, tenantId, c.key);
      } catch (error) {
        early = classifyFailure(error);
      }
    }
  }

  // The Redis gate: a concurrent duplicate sees it held; a finished key replays from it.
  let gate: GateState = { state: 'unavailable' };
  if (!early && unit && c.gateKey) {
    const token = randomUUID();
    gate = await acquireGate(deps.redis, c.gateKey, token, unit.timeoutSeconds * 1000 + deps.leaseMarginMs);
    if (gate.state === 'acquired') c.gateToken = token;
    if (gate.state === 'completed' && gate.fingerprintHex !== c.fingerprint!.toString('hex')) {
      early = classifyFailure(new IdempotencyKeyReused(unit.name));
    }
  }

  const leaseMs = unit ? unit.timeoutSeconds * 1000 + deps.leaseMarginMs : deps.leaseMarginMs;
  return deliver(c, early, gate, payload, leaseMs);
}

type Registration =
  | { kind: 'missing' }
  | { kind: 'final'; run: RunRow; deadLettered: boolean }
  | { kind: 'early'; run: RunRow }
  | { kind: 'held'; retryAfterMs: number }
  | { kind: 'replayed' }
  | { kind: 'execute'; run: RunRow; attempt: number; scheduledFor: string | null };

/**
 * Registration transaction: lock the run, record the delivery, start the attempt. `keyLocked` says
 * whether the effect transaction (already open) holds the key's advisory lock.
 */
async function register(c: DeliveryContext, early: Failure | null, gate: GateState, keyLocked: boolean, leaseMs: number): Promise<Registration> {
  const { scope, tenantId, envelope } = c;
  if (!early && keyLocked && (gate.state === 'acquired' || gate.state === 'unavailable')) {
    // The usual delivery: one autocommitted statement (actor context, lock, running, `received`).
    const started = await startCoalesced(c.deps.sql, scope, actorSettingsOf(c.actor), tenantId, c.deps.workerInstance, {
      runId: envelope.run_id,
      receiveCount: c.delivery.receiveCount,
    });
    if (started) return { kind: 'execute', run: started.run, attempt: started.run.attempts, scheduledFor: started.scheduledFor };
    // Missing or final: nothing was written; the general path below records it.
  }
  return inUnitOfWork(c.deps.sql, c.actor, async (tx): Promise<Registration> => {
    // Waits for the relay's commit of this run's outbox row (its FOR UPDATE conflicts with KEY SHARE),
    // so `received` follows `sent` in the trail, as startDelivery does.
    await tx`SELECT 1 FROM ${tx(OUTBOX_TABLE[scope])} WHERE run_id = ${envelope.run_id} FOR KEY SHARE`;
    // FOR NO KEY UPDATE, not FOR UPDATE: the open effect transaction of a duplicate holds a KEY SHARE
    // lock on the run (its trail rows reference it), and this registration must not wait for it.
    await tx`SELECT 1 FROM ${tx(scope === 'tenant' ? 'task_runs' : 'platform_task_runs')}
              WHERE run_id = ${envelope.run_id} ${tenantId ? tx`AND tenant_id = ${tenantId}` : tx``} FOR NO KEY UPDATE`;
    const run = await readRun(tx, scope, { runId: envelope.run_id, tenantId });
    if (!run) return { kind: 'missing' };
    if (FINAL_RUN_STATUSES.has(run.status)) {
      await trail(tx, c, run, 'received', run.attempts, { detail: { settled: run.status } });
      const rows =
        run.status === 'failed'
          ? await tx`SELECT 1 FROM ${tx(scope === 'tenant' ? 'task_run_events' : 'platform_task_run_events')}
                      WHERE run_id = ${run.runId} AND event = 'dead_lettered' LIMIT 1`
          : [1];
      return { kind: 'final', run, deadLettered: rows.length > 0 };
    }
    if (early) {
      // Only the spec's transitions: the delivery makes the run `running` (queued/retrying → running;
      // attempts unchanged, no handler runs), and settleFailure moves it on from `running`.
      const taken = await takeRun(tx, c, run);
      await trail(tx, c, run, 'received', run.attempts);
      return { kind: 'early', run: taken };
    }
    if (gate.state === 'held') {
      await trail(tx, c, run, 'received', run.attempts, { detail: { held: 'gate' } });
      return { kind: 'held', retryAfterMs: gate.retryAfterMs };
    }
    if (gate.state === 'completed') {
      // Another run with the same business key already produced this result: replay it.
      await trail(tx, c, run, 'received', run.attempts, { detail: { replay: 'gate' } });
      await takeRun(tx, c, run);
      await transitionRun(tx, scope, { runId: run.runId, tenantId, to: 'succeeded', from: ['running'], outcome: fitOutcome(gate.outcome), progress: 100 });
      await trail(tx, c, run, 'succeeded', run.attempts, { detail: { replayed: true } });
      return { kind: 'replayed' };
    }
    if (!keyLocked) {
      // Without the Redis gate, the key's advisory lock is held by the open effect transaction of a duplicate.
      await trail(tx, c, run, 'received', run.attempts, { detail: { held: 'ledger' } });
      return { kind: 'held', retryAfterMs: leaseMs };
    }
    const started = await transitionRun(tx, scope, { runId: run.runId, tenantId, to: 'running', from: ['queued', 'running', 'retrying'], attempts: 'increment' });
    await trail(tx, c, run, 'received', started!.attempts);
    const [origin] =
      scope === 'platform'
        ? await tx<{ at: string }[]>`SELECT to_char(scheduled_for AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at
            FROM platform_task_run_schedule_origins WHERE run_id = ${run.runId}`
        : [];
    return { kind: 'execute', run: started!, attempt: started!.attempts, scheduledFor: origin?.at ?? null };
  });
}

type Started = { run: RunRow; scheduledFor: string | null } | null;

interface PendingStart {
  runId: string;
  receiveCount: number;
  resolve(started: Started): void;
  reject(error: unknown): void;
}

interface StartGroup {
  scope: RunScope;
  actor: ActorSettings;
  tenantId: string | null;
  workerInstance: string;
  items: PendingStart[];
}

/** Registrations waiting for the end of the current event-loop turn, per pool and per shared actor. */
const pendingStarts = new WeakMap<Sql, Map<string, StartGroup>>();

/**
 * Registers a delivery through startDelivery, sharing ONE statement (and one commit) with the other
 * deliveries of the same scope, tenant and actor that reach this point in the same event-loop turn
 * (typically the messages of one receive). Each run's transition still commits with its own
 * `received` event; only statement and commit overheads are shared. If the shared statement fails,
 * each delivery is retried alone, so one delivery's error never becomes another's.
 */
function startCoalesced(
  sql: Sql,
  scope: RunScope,
  actor: ActorSettings,
  tenantId: string | null,
  workerInstance: string,
  delivery: { runId: string; receiveCount: number },
): Promise<Started> {
  const one = () => startDelivery(sql, scope, actor, { ...delivery, tenantId, workerInstance });
  let groups = pendingStarts.get(sql);
  if (!groups) {
    groups = new Map();
    pendingStarts.set(sql, groups);
  }
  const key = [scope, actor.tenantId, actor.userId, actor.process, tenantId ?? '', workerInstance].join('\u0000');
  const group = groups.get(key);
  // The run ids of one statement must be distinct (the advisory lock already makes a repeat impossible).
  if (group?.items.some((i) => i.runId === delivery.runId)) return one();
  return new Promise<Started>((resolve, reject) => {
    const item: PendingStart = { ...delivery, resolve, reject };
    if (group) {
      group.items.push(item);
      return;
    }
    const fresh: StartGroup = { scope, actor, tenantId, workerInstance, items: [item] };
    groups.set(key, fresh);
    setImmediate(() => {
      groups.delete(key);
      void flushStarts(sql, fresh);
    });
  });
}

async function flushStarts(sql: Sql, g: StartGroup): Promise<void> {
  const alone = (i: PendingStart) =>
    startDelivery(sql, g.scope, g.actor, { runId: i.runId, receiveCount: i.receiveCount, tenantId: g.tenantId, workerInstance: g.workerInstance }).then(
      i.resolve,
      i.reject,
    );
  if (g.items.length === 1) return alone(g.items[0]!);
  let started: Map<string, Exclude<Started, null>>;
  try {
    started = await startDeliveries(sql, g.scope, g.actor, g.tenantId, g.workerInstance, g.items);
  } catch {
    // Nothing of the shared statement committed: each delivery goes alone and meets its own error.
    await Promise.all(g.items.map(alone));
    return;
  }
  for (const i of g.items) i.resolve(started.get(i.runId) ?? null);
}

/**
 * Makes a queued or retrying run `running` for a delivery that will not execute the handler (early
 * failure, replay), attempts unchanged; a run already `running` stays as it is. Returns the run as it
 * now is. The caller holds the run row locked.
 */
async function takeRun(tx: TxSql, c: DeliveryContext, run: RunRow): Promise<RunRow> {
  if (run.status === 'running') return run;
  const taken = await transitionRun(tx, c.scope, { runId: run.runId, tenantId: c.tenantId, to: 'running', from: ['queued', 'retrying'] });
  return taken ?? run;
}

/** The run left `running` under this delivery (another delivery settled or released it): this one's settlement is void. */
class RunMovedOn extends Error {
  readonly code = 'RUN_MOVED_ON';
  constructor() {
    super('the run is no longer running: another delivery settled it');
  }
}

/** The transaction-local actor settings, as applyActorContext (src/db/unit-of-work.ts) sets them. */
function actorSettingsOf(actor: Actor): ActorSettings {
  if (actor.kind === 'user') return { tenantId: actor.tenantId, userId: actor.userId, process: '' };
  if (actor.kind === 'scheduler') return { tenantId: '', userId: '', process: actor.label };
  return { tenantId: actor.tenantId ?? '', userId: '', process: actor.label };
}

function fitOutcome(outcome: Record<string, unknown>): Record<string, unknown> {
  return jsonbTextBytes(outcome) <= RUN_JSON_MAX_BYTES ? outcome : { truncated: true };
}

function deadLetterContext(c: DeliveryContext, f: Failure): DeadLetterContext {
  return {
    runId: c.envelope.run_id,
    unit: c.envelope.name,
    errorCode: f.code,
    errorType: f.type,
    errorMessage: f.message,
    receiveCount: c.delivery.receiveCount,
    workerInstance: c.deps.workerInstance,
  };
}

/**
 * Opens the effect transaction first and takes the key's advisory lock in it, then registers the
 * delivery in its own transaction, then runs the handler in the effect transaction. Holding the lock
 * from before registration to the end of the effect leaves no window in which a concurrent duplicate
 * could register a second attempt (each slot holds at most these two transactions at once).
 */
async function deliver(c: DeliveryContext, early: Failure | null, gate: GateState, payload: unknown, leaseMs: number): Promise<DeliveryResult> {
  const { deps, scope, tenantId, port } = c;
  const unit = c.unit;
  const controller = new AbortController();
  const timeoutMs = (unit?.timeoutSeconds ?? 60) * 1000;
  let timer: NodeJS.Timeout | undefined;
  // The effect transaction's backend while it is open: a release cancels its current statement, or
  // the ROLLBACK would queue behind a handler statement (pg_sleep, a lock wait) past the stop budget.
  let effectBackend: EffectBackend | null = null;
  const onRelease = () => {
    controller.abort(new ReleasedOnShutdown());
    if (effectBackend) {
      cancelStatement(deps.sql, effectBackend).catch((error: unknown) => c.log.warn({ err: error }, 'could not cancel the statement of a released run'));
    }
  };
  let registration: Registration | undefined;
  let evicted: Promise<void> = Promise.resolve();
  let startedAt: string | null = null;
  const needsLock = Boolean(c.key) && !early && gate.state !== 'held' && gate.state !== 'completed';
  try {
    const result = await deps.sql.begin(async (tx) => {
      // One statement: the actor context (as inUnitOfWork), the deadline of every statement of this
      // transaction (a handler statement cannot outlive the unit's timeout even if the handler ignores
      // the signal) and the key's advisory lock.
      const settings = actorSettingsOf(c.actor);
      const [opened] = await tx<{ locked: boolean; pid: number; xact_start: string }[]>`
        SELECT set_config('app.tenant_id', ${settings.tenantId}, true), set_config('app.user_id', ${settings.userId}, true),
               set_config('app.process', ${settings.process}, true), set_config('statement_timeout', ${String(timeoutMs)}, true),
               ${needsLock ? tx`pg_try_advisory_xact_lock(${advisoryKeyOf(c.key!)}::bigint)` : tx`true`} AS locked,
               pg_backend_pid() AS pid, (extract(epoch FROM now()) * 1000000)::int8::text AS xact_start`;
      effectBackend = { pid: opened!.pid, xactStart: opened!.xact_start };
      registration = await register(c, early, gate, opened!.locked, leaseMs);
      if (registration.kind !== 'execute') return null;
      // Not awaited: later Redis commands of this delivery go down the same connection after it.
      evicted = evict(c);
      const { run, attempt, scheduledFor } = registration;
      // The deadline starts with the execution; a release on shutdown aborts it too.
      timer = setTimeout(() => controller.abort(new UnitTimedOut(unit!.name, unit!.timeoutSeconds)), timeoutMs);
      if (deps.releaseSignal?.aborted) onRelease();
      else deps.releaseSignal?.addEventListener('abort', onRelease, { once: true });
      controller.signal.throwIfAborted();
      const claim = await claimKeyAndStart(tx, ledgerScope(c), c.key!, c.fingerprint!, leaseMs, {
        runId: run.runId,
        attempt,
        receiveCount: c.delivery.receiveCount,
        queue: run.queue,
        workerInstance: deps.workerInstance,
      });
      if (claim.kind === 'reused') throw new IdempotencyKeyReused(unit!.name);
      if (claim.kind === 'failed_permanent') {
        throw new PermanentFailure('IDEMPOTENCY_FAILED_PERMANENTLY', `an earlier execution with this idempotency key of '${unit!.name}' failed permanently`);
      }
      if (claim.kind === 'held') throw new HeldElsewhere('the idempotency key is held by another execution');
      if (claim.kind === 'completed') {
        const replayed = await transitionRun(tx, scope, { runId: run.runId, tenantId, to: 'succeeded', from: ['running'], outcome: fitOutcome(claim.outcome), progress: 100 });
        if (!replayed) throw new RunMovedOn();
        await trail(tx, c, run, 'succeeded', attempt, { detail: { replayed: true } });
        return { replayed: true, outcome: claim.outcome };
      }
      if (claim.startedAt !== undefined) {
        startedAt = claim.startedAt; // `started` was written with the claim
      } else {
        const [clock] = await tx<{ at: string }[]>`SELECT clock_timestamp()::text AS at`;
        startedAt = clock!.at;
        await trail(tx, c, run, 'started', attempt);
      }
      const runObject: UnitRun = {
        runId: run.runId,
        name: unit!.name,
        attempt,
        scheduledFor,
        tenantId,
        correlationId: run.correlationId,
        async now() {
          const [row] = await deps.sql<{ ms: number }[]>`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms`;
          return new Date(row!.ms);
        },
        logger: c.log.child({ attempt }),
        progress: (percent: number) => reportProgress(c, run, attempt, percent),
        transaction: tx,
        signal: controller.signal,
      };
      const handling = Promise.resolve().then(() => unit!.handler(payload as never, runObject));
      handling.catch(() => {}); // settled below; a late rejection after an abort must not crash the process
      const returned = await raceAbort(handling, controller.signal);
      const outcome = returned === undefined ? {} : returned;
      if (!isPlainObject(outcome)) throw new ValidationFailure(`handler of '${unit!.name}' must return a JSON object or nothing`);
      // Measured as the CHECK measures it (octet_length(outcome::text) of the jsonb), not compact JSON.
      if (jsonbTextBytes(outcome) > RUN_JSON_MAX_BYTES) {
        throw new ValidationFailure(`handler of '${unit!.name}' returned an outcome over ${RUN_JSON_MAX_BYTES} bytes`);
      }
      // Ledger `completed`, run `succeeded`, trail `succeeded`: one statement, committed with the effect.
      // Not awaited here, so COMMIT goes out in the same write right behind it (one round trip, not two).
      // If it fails, the transaction is aborted and that COMMIT rolls back: the rejection is awaited
      // below, after sql.begin returns, and takes the failure path exactly as a throw in here would.
      const finished = finishDelivery(tx, scope, {
        runId: run.runId,
        tenantId,
        attempt,
        receiveCount: c.delivery.receiveCount,
        queue: run.queue,
        workerInstance: deps.workerInstance,
        outcome: outcome as Record<string, unknown>,
        ledger: { key: c.key!, retentionMs: deps.retentionMs },
      });
      finished.catch(() => {}); // observed below
      return { replayed: false, outcome: outcome as UnitOutcome, finished };
    });
    effectBackend = null;
    if (result?.finished) await result.finished;
    clearTimeout(timer);
    deps.releaseSignal?.removeEventListener('abort', onRelease);
    if (result) {
      await evicted;
      await recordGateResultAndEvict(deps.redis, runStatusKey(c.envelope.run_id), c.gateKey, c.fingerprint, result.outcome, cacheTtlOf(deps));
      await port.ack();
      return result.replayed ? 'replayed' : 'succeeded';
    }
  } catch (error) {
    effectBackend = null;
    clearTimeout(timer);
    deps.releaseSignal?.removeEventListener('abort', onRelease);
    await evicted;
    if (registration?.kind !== 'execute') throw error; // the registration itself failed: the consumer retries
    const { run, attempt } = registration;
    if (error instanceof HeldElsewhere) {
      await releaseOwnGate(c);
      await port.retryAfter(Math.max(1, Math.ceil(leaseMs / 1000)));
      return 'held';
    }
    if (error instanceof ReleasedOnShutdown || controller.signal.reason instanceof ReleasedOnShutdown) {
      return release(c, run, attempt, startedAt);
    }
    // A statement cancelled by our own deadline reports as a query error: the timeout is the cause.
    const cause = controller.signal.aborted ? controller.signal.reason : error;
    return settleFailure(c, run, classifyFailure(cause), startedAt, attempt);
  }
  return settleRegistration(c, registration!, early);
}

interface EffectBackend {
  pid: number;
  /** now() of the effect transaction in epoch microseconds: the cancel hits only that transaction, never a later user of the connection. */
  xactStart: string;
}

/** Cancels the current statement of the effect transaction (on another connection; no-op once it ended). */
async function cancelStatement(sql: Sql, backend: EffectBackend): Promise<void> {
  await sql`SELECT pg_cancel_backend(pid) FROM pg_stat_activity
             WHERE pid = ${backend.pid} AND (extract(epoch FROM xact_start) * 1000000)::int8 = ${backend.xactStart}::text::int8`;
}

/** Settles a delivery that did not execute (finished run, held key, replay, early failure, no run). */
async function settleRegistration(c: DeliveryContext, registration: Registration, early: Failure | null): Promise<DeliveryResult> {
  const { deps, port } = c;
  if (registration.kind !== 'held') await evict(c);
  switch (registration.kind) {
    case 'missing': {
      await releaseOwnGate(c);
      c.log.error('the run of this message does not exist: dead-lettered');
      await port.deadLetter(deadLetterContext(c, { code: 'RUN_NOT_FOUND', type: 'NotFoundFailure', message: 'no run row matches the message', permanent: true }));
      await port.ack();
      return 'failed';
    }
    case 'final': {
      // A late duplicate of a finished run. Repopulate the gate from the ledger when Redis lacked it.
      if (registration.run.status === 'succeeded' && c.key && c.gateToken) {
        const row = await readKey(deps.sql, ledgerScope(c), c.key);
        if (row?.status === 'completed') await recordGateResult(deps.redis, c.gateKey!, row.fingerprint, row.outcome, cacheTtlOf(deps));
        else await releaseOwnGate(c);
      } else {
        await releaseOwnGate(c);
      }
      if (registration.run.status === 'failed' && !registration.deadLettered) {
        const f: Failure = { code: 'RUN_FAILED', type: 'RunFailed', message: 'the run had failed before its message was dead-lettered', permanent: true };
        await deadLetter(c, registration.run, f);
      }
      await port.ack();
      return 'settled';
    }
    case 'held':
      await releaseOwnGate(c);
      await port.retryAfter(Math.max(1, Math.ceil(registration.retryAfterMs / 1000)));
      return 'held';
    case 'replayed':
      await port.ack();
      return 'replayed';
    case 'early':
      return settleFailure(c, registration.run, early!, null, registration.run.attempts);
    case 'execute':
      throw new Error('unreachable: an executed delivery settles in deliver()');
  }
}

/** progress(percent): its own short transaction (status row + `progress` event), cache evicted. */
async function reportProgress(c: DeliveryContext, run: RunRow, attempt: number, percent: number): Promise<void> {
  if (!Number.isFinite(percent) || percent < 0 || percent > 100) {
    throw new ValidationFailure(`progress must be a number from 0 to 100, got ${String(percent)}`);
  }
  const value = Math.round(percent);
  await inUnitOfWork(c.deps.sql, c.actor, async (tx) => {
    if (await setRunProgress(tx, c.scope, { runId: run.runId, tenantId: c.tenantId }, value)) {
      await trail(tx, c, run, 'progress', attempt, { detail: { percent: value } });
    }
  });
  await evict(c);
}

/** The `started` event of a rolled-back attempt is recorded again, so the trail shows every attempt. */
async function rememberStart(tx: TxSql, c: DeliveryContext, run: RunRow, attempt: number, startedAt: string | null): Promise<void> {
  if (startedAt !== null) await trail(tx, c, run, 'started', attempt, { detail: { startedAt, effect: 'rolled_back' } });
}

async function release(c: DeliveryContext, run: RunRow, attempt: number, startedAt: string | null): Promise<DeliveryResult> {
  const released = await inUnitOfWork(c.deps.sql, c.actor, async (tx) => {
    if (!(await transitionRun(tx, c.scope, { runId: run.runId, tenantId: c.tenantId, to: 'queued', from: ['running'] }))) return false;
    await rememberStart(tx, c, run, attempt, startedAt);
    await trail(tx, c, run, 'released_on_shutdown', attempt);
    return true;
  });
  if (!released) return settleMovedOn(c, 0);
  await evict(c);
  await releaseOwnGate(c);
  await c.port.retryAfter(0);
  c.log.warn('released on shutdown: the message is visible again');
  return 'released';
}

async function settleFailure(c: DeliveryContext, run: RunRow, f: Failure, startedAt: string | null, attempt: number): Promise<DeliveryResult> {
  const exhausted = c.delivery.receiveCount >= c.maxReceives;
  const errorFields = { errorCode: f.code, errorType: f.type };
  if (!f.permanent && !exhausted) {
    const delaySeconds = backoffSeconds(c.delivery.receiveCount, c.deps.backoff);
    const moved = await voidIfMovedOn(c, async (tx) => {
      // running → retrying only: a run another delivery already settled keeps its settlement.
      if (!(await transitionRun(tx, c.scope, { runId: run.runId, tenantId: c.tenantId, to: 'retrying', from: ['running'] }))) throw new RunMovedOn();
      if (c.key) await failKey(tx, ledgerScope(c), c.key, c.fingerprint!, 'failed_retryable', c.deps.retentionMs);
      await rememberStart(tx, c, run, attempt, startedAt);
      await trail(tx, c, run, 'retry_scheduled', attempt, { ...errorFields, detail: { message: f.message, retryInSeconds: delaySeconds } });
    });
    if (moved) return settleMovedOn(c, delaySeconds);
    await evict(c);
    await releaseOwnGate(c);
    await c.port.retryAfter(delaySeconds);
    c.log.warn({ code: f.code, retryInSeconds: delaySeconds }, 'transient failure: retry scheduled');
    return 'retrying';
  }
  const reuse = f.code === 'IDEMPOTENCY_KEY_REUSED';
  const moved = await voidIfMovedOn(c, async (tx) => {
    // running → failed only (an early failure or the fifth receive made the run `running` first).
    if (!(await transitionRun(tx, c.scope, { runId: run.runId, tenantId: c.tenantId, to: 'failed', from: ['running'] }))) throw new RunMovedOn();
    // A reused key belongs to another request: its ledger row is left as it is.
    if (c.key && !reuse) await failKey(tx, ledgerScope(c), c.key, c.fingerprint!, 'failed_permanent', c.deps.retentionMs);
    await rememberStart(tx, c, run, attempt, startedAt);
    await trail(tx, c, run, 'failed', attempt, {
      ...errorFields,
      detail: { message: f.message, permanent: f.permanent, receivesExhausted: exhausted && !f.permanent },
    });
  });
  if (moved) return settleMovedOn(c, backoffSeconds(c.delivery.receiveCount, c.deps.backoff));
  await evict(c);
  await releaseOwnGate(c);
  await deadLetter(c, run, f, attempt);
  await c.port.ack();
  c.log.error({ code: f.code }, 'permanent failure: run failed, message dead-lettered');
  return 'failed';
}

/** Runs a settling unit of work; true (and nothing written) when it found the run no longer running. */
async function voidIfMovedOn(c: DeliveryContext, work: (tx: TxSql) => Promise<void>): Promise<boolean> {
  try {
    await inUnitOfWork(c.deps.sql, c.actor, work);
    return false;
  } catch (error) {
    if (error instanceof RunMovedOn) return true;
    throw error;
  }
}

/**
 * This delivery's run was settled (or released, or retried) by another delivery meanwhile: that
 * settlement stands and nothing is written for this one. A finished run's message is deleted; a
 * run still active comes back with its message, whose next delivery sorts it out.
 */
async function settleMovedOn(c: DeliveryContext, retryInSeconds: number): Promise<DeliveryResult> {
  await releaseOwnGate(c);
  const run = await inUnitOfWork(c.deps.sql, c.actor, (tx) => readRun(tx, c.scope, { runId: c.envelope.run_id, tenantId: c.tenantId }));
  c.log.warn({ status: run?.status }, 'the run left running under this delivery: its own settlement stands');
  if (!run || FINAL_RUN_STATUSES.has(run.status)) {
    await c.port.ack();
    return 'settled';
  }
  await c.port.retryAfter(retryInSeconds);
  return 'held';
}

async function deadLetter(c: DeliveryContext, run: RunRow, f: Failure, attempt = run.attempts): Promise<void> {
  await c.port.deadLetter(deadLetterContext(c, f));
  await inUnitOfWork(c.deps.sql, c.actor, async (tx) => {
    await trail(tx, c, run, 'dead_lettered', attempt, { errorCode: f.code, errorType: f.type });
  });
}
