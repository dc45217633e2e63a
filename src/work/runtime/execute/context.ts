// What every stage of a delivery shares: the runner's dependencies, the port to the queue, the
// context of one delivery and the small helpers each stage writes the trail and the cache with.
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { TxSql, Sql } from '../../../db/client.ts';
import { jsonbTextBytes } from '../../../db/jsonb-text.ts';
import type { Actor } from '../../../db/unit-of-work.ts';
import { CodedError } from '../../../errors/coded-error.ts';
import { evictRunStatus } from '../../../kv/run-status-cache.ts';
import { DEFAULT_IDEMPOTENCY_CACHE_TTL_MS, RUN_JSON_MAX_BYTES } from '../../../config/limits.ts';
import type { BackoffOptions } from '../complete/backoff.ts';
import type { Envelope } from '../produce/envelope.ts';
import { releaseGate, type GateState, type LedgerScope } from '../store/idempotency.ts';
import type { ActorSettings, RunRow } from '../store/run-store.ts';
import type { RunScope } from '../store/scope-tables.ts';
import { appendTrailEvent, type TrailEventName } from '../store/trail.ts';
import type { WorkUnit } from '../../define/unit.ts';
import type { StartCoalescer } from './start-coalescer.ts';
import type { FinishCoalescer } from './finish-coalescer.ts';
import type { CancelNotices } from './cancel-notices.ts';
import type { DatabaseRateWindow } from './rate-window.ts';

export interface Delivery {
  messageId: string;
  body: string;
  /** `body` already parsed as JSON by the consumer (absent: not parsed yet, or not JSON). */
  json?: unknown;
  /** ApproximateReceiveCount of this delivery (1 on the first). */
  receiveCount: number;
  /** performance.now() when this worker got the message (its visibility can reach 12 h past the receipt at most); absent: unknown. */
  receivedAtMs?: number;
  /** The unit's rate window when the database holds it (Redis unusable, consume/rate-limit.ts): registration takes the place. */
  rateWindow?: DatabaseRateWindow;
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
  /**
   * The delivery never started and nothing of it was written (the worker stopped while it waited for
   * its unit's slot): the message goes back at once, and this receive does not count against its
   * receives.
   */
  giveBack(): Promise<void>;
  /**
   * The run's turn has not come (an earlier run of its serial key, serial-turn.ts, or its unit's rate
   * window) and nothing of the delivery was written: the message comes back after `seconds`, and this
   * receive does not count against its receives. With `turn` (a run near the front of its key's line),
   * the consumer may instead keep the message and deliver it again once `turn.ahead` runs of the key
   * have passed their turn (serial-turn.ts SerialTurns).
   */
  waitTurn(seconds: number, turn?: { id: string; ahead: number }): Promise<void>;
  /**
   * The delivery's handler has returned and what is left of it runs no unit code (a group's finish
   * and COMMIT, group-execution.ts; a success's Redis copy and delete, settlement.ts settleSuccess): its
   * place in the consumer may take the next message meanwhile. Optional; without it the place is held
   * until the delivery settles.
   */
  handlerReturned?(): void;
  /**
   * Keeps the message invisible for `seconds` from now on instead of the queue's visibility timeout:
   * the visibility is changed at once and every heartbeat extends it by that much. Never longer than
   * the queue's, never shorter than the heartbeat can sustain. Optional (a port without it keeps the
   * queue's). Not awaited by callers: a failure only leaves the queue's visibility in place.
   */
  keepFor?(seconds: number): void;
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
  /** Fairness is on (SVC_TENANT_INFLIGHT_MAX > 0): each success wakes a relay the cap holds back (src/kv/wake.ts signalRoom). Default false. */
  roomSignals?: boolean;
  backoff: BackoffOptions;
  /** Receives before the permanent path. Default 5. */
  maxReceives?: number;
  /** Aborted at the end of the drain window: running handlers are released back to the queue. */
  releaseSignal?: AbortSignal;
  /** The process's listener for pushed cancels (cancel-notices.ts); none: the poll alone. Default none. */
  cancelNotices?: CancelNotices | undefined;
  /** How often a running handler's run is checked for an operator's cancel, ms: the heartbeat interval. Default 20000. */
  cancelCheckIntervalMs?: number;
  /** A group member's handler running this long has its run registered (`running`) on its own, ms. Default RUNNING_VISIBLE_AFTER_MS. */
  runningVisibleAfterMs?: number;
  /** This runtime's registration coalescer (one per worker runtime, shared by its consumers). */
  starts: StartCoalescer;
  /** This runtime's finish coalescer, for deliveries whose handlers wrote nothing (one per worker runtime). */
  finishes: FinishCoalescer;
  /** This runtime's forming group commits (units with `groupCommit`). */
  groups: GroupCommitPort;
}

export type DeliveryResult = 'succeeded' | 'replayed' | 'retrying' | 'failed' | 'held' | 'released' | 'settled';

/** A failure already known when the message arrives: no handler will run for this delivery. */
export interface Failure {
  code: string;
  type: string;
  message: string;
  permanent: boolean;
}

/** The key's ledger row is `processing` under another execution's lease: this delivery waits its turn. */
export class HeldElsewhere extends CodedError<'IDEMPOTENCY_KEY_HELD'> {
  constructor() {
    super('IDEMPOTENCY_KEY_HELD', 'the idempotency key is held by another execution');
    this.name = 'HeldElsewhere';
  }
}

/** The drain window ran out: the running handler is aborted and its run goes back to the queue. */
export class ReleasedOnShutdown extends CodedError<'RELEASED_ON_SHUTDOWN'> {
  constructor() {
    super('RELEASED_ON_SHUTDOWN', 'the worker is shutting down and the stop budget ran out: the run goes back to the queue');
    this.name = 'ReleasedOnShutdown';
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
export function cacheTtlOf(deps: RunnerDeps): number {
  return Math.min(deps.cacheTtlMs ?? DEFAULT_IDEMPOTENCY_CACHE_TTL_MS, deps.retentionMs);
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export interface DeliveryContext {
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
  /** The key of a delivery that will not execute (receives exhausted): only probed for an execution in progress. */
  probeKey?: Buffer;
  fingerprint?: Buffer;
  gateKey?: string;
  gateToken?: string;
}

export function ledgerScope(c: DeliveryContext): LedgerScope {
  return { scope: c.scope, tenantId: c.tenantId };
}

export async function evict(c: DeliveryContext): Promise<void> {
  await evictRunStatus(c.deps.redis, c.envelope.run_id);
}

export async function trail(
  tx: TxSql,
  c: DeliveryContext,
  run: Pick<RunRow, 'queue'>,
  event: TrailEventName,
  attempt: number,
  extra: { receiveCount?: number; errorCode?: string; errorType?: string; detail?: Record<string, unknown>; occurredAt?: 'run_finished' | string } = {},
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
    occurredAt: extra.occurredAt,
  });
}

export async function releaseOwnGate(c: DeliveryContext): Promise<void> {
  if (c.gateKey && c.gateToken) await releaseGate(c.deps.redis, c.gateKey, c.gateToken);
}
/** The run left `running` under this delivery (another delivery settled or released it): this one's settlement is void. */
export class RunMovedOn extends CodedError<'RUN_MOVED_ON'> {
  constructor() {
    super('RUN_MOVED_ON', 'the run is no longer running: another delivery settled it');
    this.name = 'RunMovedOn';
  }
}

/** The transaction-local actor settings, as inUnitOfWork (src/db/unit-of-work.ts) sets them. */
export function actorSettingsOf(actor: Actor): ActorSettings {
  if (actor.kind === 'user') return { tenantId: actor.tenantId, userId: actor.userId, process: '' };
  if (actor.kind === 'scheduler') return { tenantId: '', userId: '', process: actor.label };
  return { tenantId: actor.tenantId ?? '', userId: '', process: actor.label };
}

export function fitOutcome(outcome: Record<string, unknown>): Record<string, unknown> {
  return jsonbTextBytes(outcome) <= RUN_JSON_MAX_BYTES ? outcome : { truncated: true };
}

export function deadLetterContext(c: DeliveryContext, f: Failure): DeadLetterContext {
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

/** Gives back the slot of a unit a group (or a run alone in a `groupCommit` unit) held. */
export type SlotRelease = () => void;

/**
 * The group commits of this process (group-commit.ts GroupCommits) as the stages see them: the
 * executor joins a group or runs alone in a unit slot; a group's execution enters and leaves its
 * commit tail and takes a slot again to re-run a member alone.
 */
export interface GroupCommitPort {
  /** Counts a delivery in its checks (a group waits for deliveries about to join); returns its leave. */
  enterChecks(): () => void;
  join(member: { c: DeliveryContext; gate: GateState; payload: unknown; leaseMs: number }): Promise<DeliveryResult>;
  alone(c: DeliveryContext, early: Failure | null, gate: GateState, payload: unknown, leaseMs: number): Promise<DeliveryResult>;
  enterTail(unit: string): boolean;
  leaveTail(unit: string): void;
  slotForRerun(c: DeliveryContext): Promise<SlotRelease | null>;
}
