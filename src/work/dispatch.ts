// Dispatching a task and publishing a domain event, inside the caller's transaction: the run row
// (queued), its `queued` trail event, the user-actor row for a user, and the outbox row carrying the
// envelope are written together, so they commit or vanish together. The relay sends the outbox row
// later; after commit the caller pushes the wake signal (src/kv/wake.ts `afterCommit`).
//
// Unit metadata comes from a lookup passed in (`resolve`, `subscribers`): the workers resolve from the
// loaded unit definitions (with payload schemas), the API from tasks.json (without unit code).
import os from 'node:os';
import { randomUUID } from 'node:crypto';
import type { ZodType } from 'zod';
import type { TxSql } from '../db/client.ts';
import type { Actor } from '../db/unit-of-work.ts';
import type { QueueName } from '../queue/names.ts';
import { dispatchTraceFields } from '../observe/work-tracing.ts';
import { MAX_PAYLOAD_BYTES, payloadBytes, type Envelope } from './envelope.ts';
import {
  appendTrailEvent,
  insertRun,
  insertScheduleOrigin,
  insertUserActor,
  OUTBOX_TABLE,
  type RunScope,
  type RunTrigger,
} from './run-store.ts';

/** tenant (default): runs for one tenant; platform and system: runs without a tenant. */
export type UnitContext = 'tenant' | 'platform' | 'system';

/** What dispatch needs to know about a unit (a task, or an event subscriber). */
export interface DispatchTarget {
  name: string;
  queue: QueueName;
  context: UnitContext;
  /** Validates (and may transform) the payload at dispatch; absent means accepted as any JSON. */
  payload?: ZodType;
}

export type ResolveUnit = (name: string) => DispatchTarget | undefined;
export type ResolveSubscribers = (type: string, version: number) => readonly DispatchTarget[];

export type DispatchErrorCode =
  | 'RUN_CONTEXT_MISMATCH'
  | 'PAYLOAD_TOO_LARGE'
  | 'PAYLOAD_INVALID'
  | 'UNIT_NOT_REGISTERED'
  | 'RUN_ACTOR_REFUSED'
  | 'DISPATCH_DELAY_INVALID';

export class DispatchError extends Error {
  readonly code: DispatchErrorCode;
  /** Machine-readable facts for logs and error bodies; never payload values. */
  readonly details: Record<string, unknown>;
  constructor(code: DispatchErrorCode, message: string, details: Record<string, unknown> = {}, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.details = details;
  }
}

export interface DispatcherDeps {
  resolve: ResolveUnit;
  /** Subscribers of an event type and version; default: none. */
  subscribers?: ResolveSubscribers;
  /** Names this process in trail rows (1..128 chars); default `<hostname>:<pid>`. */
  instance?: string;
}

export interface DispatchOptions {
  /** Who dispatches: a user (of a tenant) or a system process (with or without tenant). */
  actor: Actor;
  /** Seconds before the relay may send the message (becomes available_at); default 0. */
  delaySeconds?: number;
  /** Correlation id shared by a chain of runs; default a new uuid. */
  correlationId?: string;
  /** Id of what caused this run (e.g. the parent run id); default the correlation id. */
  causationId?: string;
}

export interface ScheduledDispatchOptions {
  scheduleName: string;
  /** 1..128 characters identifying this firing. */
  executionId: string;
  scheduledFor: Date | string;
  /** Default `scheduler`. */
  actorLabel?: string;
  correlationId?: string;
}

export interface DispatchedRun {
  runId: string;
  scope: RunScope;
  /** Tenant of a tenant run, null for platform/system runs. */
  tenantId: string | null;
  name: string;
  queue: QueueName;
  kind: Envelope['kind'];
  envelope: Envelope;
}

export interface Dispatcher {
  /** Writes run, trail, actor and outbox rows for one task. */
  dispatchTask(tx: TxSql, name: string, payload: unknown, options: DispatchOptions): Promise<DispatchedRun>;
  /** Writes one run + outbox row per subscriber, each with its own run id; [] without subscribers. */
  publishEvent(tx: TxSql, type: string, version: number, payload: unknown, options: DispatchOptions): Promise<DispatchedRun[]>;
  /**
   * Writes a scheduler run (trigger schedule) with its schedule origin. Returns null, leaving the
   * transaction usable, when that scheduled moment already has its run.
   */
  dispatchScheduled(tx: TxSql, name: string, payload: unknown, options: ScheduledDispatchOptions): Promise<DispatchedRun | null>;
}

export function defaultInstanceLabel(): string {
  return `${os.hostname()}:${process.pid}`.slice(0, 128);
}

/** The tenant a run belongs to, from the actor; refuses actors that cannot own runs. */
function actorTenant(actor: Actor, name: string): string | null {
  const kind = (actor as { kind?: unknown }).kind;
  if (kind === 'user') return (actor as Extract<Actor, { kind: 'user' }>).tenantId;
  if (kind === 'system') return (actor as Extract<Actor, { kind: 'system' }>).tenantId ?? null;
  if (kind === 'scheduler') {
    throw new DispatchError('RUN_ACTOR_REFUSED', `the scheduler starts ${name} through dispatchScheduled, not as a dispatch actor`, {
      unit: name,
      actorKind: kind,
    });
  }
  // Platform operators (and anything else) cannot own runs yet; the database refuses them too.
  throw new DispatchError('RUN_ACTOR_REFUSED', `runs for actor kind ${String(kind)} do not exist: dispatch as a user of a tenant or as a system process`, {
    unit: name,
    actorKind: String(kind),
  });
}

function checkContext(target: DispatchTarget, tenantId: string | null): void {
  if (target.context === 'tenant' && tenantId === null) {
    throw new DispatchError(
      'RUN_CONTEXT_MISMATCH',
      `${target.name} is a tenant task: dispatch it from a unit of work bound to a tenant`,
      { unit: target.name, context: target.context },
    );
  }
  if (target.context !== 'tenant' && tenantId !== null) {
    throw new DispatchError(
      'RUN_CONTEXT_MISMATCH',
      `${target.name} is a ${target.context} task and must not run for a tenant: dispatch it as a system process without a tenant`,
      { unit: target.name, context: target.context },
    );
  }
}

function checkSize(name: string, payload: unknown): void {
  let bytes: number;
  try {
    bytes = payloadBytes(payload);
  } catch (cause) {
    throw new DispatchError('PAYLOAD_INVALID', `the payload of ${name} is not serializable as JSON`, { unit: name }, { cause });
  }
  if (bytes > MAX_PAYLOAD_BYTES) {
    throw new DispatchError(
      'PAYLOAD_TOO_LARGE',
      `the payload of ${name} is ${bytes} bytes; at most ${MAX_PAYLOAD_BYTES} are accepted: pass a reference to the data instead`,
      { unit: name, bytes, maxBytes: MAX_PAYLOAD_BYTES },
    );
  }
}

/** Size cap, then the unit's schema; returns the payload as the schema outputs it. */
function checkPayload(target: DispatchTarget, payload: unknown): unknown {
  checkSize(target.name, payload);
  if (!target.payload) return payload ?? null;
  const parsed = target.payload.safeParse(payload);
  if (!parsed.success) {
    // Paths and rules only: payload values may be personal data.
    const issues = parsed.error.issues.map((i) => ({ path: i.path.join('.'), rule: i.message }));
    throw new DispatchError('PAYLOAD_INVALID', `the payload of ${target.name} does not match its schema`, {
      unit: target.name,
      issues,
    });
  }
  checkSize(target.name, parsed.data);
  return parsed.data ?? null;
}

function checkDelay(delaySeconds: number | undefined): number {
  const delay = delaySeconds ?? 0;
  if (!Number.isFinite(delay) || delay < 0) {
    throw new DispatchError('DISPATCH_DELAY_INVALID', 'delaySeconds must be a finite number of seconds, at least 0', {
      delaySeconds: String(delaySeconds),
    });
  }
  return delay;
}

interface RunWrite {
  target: DispatchTarget;
  kind: Envelope['kind'];
  trigger: RunTrigger;
  payload: unknown;
  tenantId: string | null;
  actorKind: 'user' | 'system' | 'scheduler';
  actorLabel: string;
  user?: { userId: string; membershipId: string };
  correlationId: string;
  causationId: string;
  delaySeconds: number;
  event?: { type: string; version: number };
}

async function writeTrailAndOutbox(tx: TxSql, instance: string, w: RunWrite, runId: string): Promise<DispatchedRun> {
  const scope: RunScope = w.tenantId === null ? 'platform' : 'tenant';
  const envelope: Envelope = {
    run_id: runId,
    kind: w.kind,
    name: w.target.name,
    ...(w.event ? { event: w.event.type, version: w.event.version } : {}),
    ...(w.tenantId !== null ? { tenant_id: w.tenantId } : {}),
    payload: w.payload,
    correlation_id: w.correlationId,
    causation_id: w.causationId,
    ...dispatchTraceFields(w.target.name, w.target.queue, runId), // dispatch span + traceparent (src/observe)
  };
  await appendTrailEvent(tx, scope, {
    runId,
    tenantId: w.tenantId,
    event: 'queued',
    attempt: 0,
    queue: w.target.queue,
    workerInstance: instance,
    detail: {
      trigger: w.trigger,
      ...(w.delaySeconds > 0 ? { delay_seconds: w.delaySeconds } : {}),
      ...(w.event ? { event: w.event.type, version: w.event.version } : {}),
    },
  });
  await tx`INSERT INTO ${tx(OUTBOX_TABLE[scope])}
      (${w.tenantId !== null ? tx`tenant_id, ` : tx``}run_id, queue, envelope, available_at)
    VALUES (${w.tenantId !== null ? tx`${w.tenantId}, ` : tx``}${runId}, ${w.target.queue}, ${tx.json(envelope as never)},
      clock_timestamp() + make_interval(secs => ${w.delaySeconds}::float8))`;
  return { runId, scope, tenantId: w.tenantId, name: w.target.name, queue: w.target.queue, kind: w.kind, envelope };
}

async function writeRun(tx: TxSql, instance: string, w: RunWrite): Promise<DispatchedRun> {
  const runId = randomUUID();
  const scope: RunScope = w.tenantId === null ? 'platform' : 'tenant';
  await insertRun(tx, scope, {
    runId,
    tenantId: w.tenantId,
    name: w.target.name,
    queue: w.target.queue,
    trigger: w.trigger,
    actorKind: w.actorKind,
    actorLabel: w.actorLabel,
    correlationId: w.correlationId,
    causationId: w.causationId,
  });
  if (w.user) {
    await insertUserActor(tx, { runId, tenantId: w.tenantId!, userId: w.user.userId, membershipId: w.user.membershipId });
  }
  return writeTrailAndOutbox(tx, instance, w, runId);
}

export interface RedriveRunWrite {
  target: Pick<DispatchTarget, 'name' | 'queue'>;
  kind: Envelope['kind'];
  /** The failed run's payload, as its envelope carried it (already validated at its dispatch). */
  payload: unknown;
  tenantId: string | null;
  /** Who redrives, 1..128 characters (a system actor). */
  actorLabel: string;
  /** The failed run's correlation id. */
  correlationId: string;
  /** The failed run's id. */
  causationId: string;
  event?: { type: string; version: number };
}

/**
 * Writes a redrive run (trigger `redrive`, system actor) exactly as a dispatch writes a run: run row,
 * `queued` event and outbox row, in the caller's transaction (src/work/operate/redrive-run.ts).
 */
export async function writeRedriveRun(tx: TxSql, instance: string, r: RedriveRunWrite): Promise<DispatchedRun> {
  checkSize(r.target.name, r.payload);
  return writeRun(tx, instance, {
    target: { ...r.target, context: r.tenantId === null ? 'system' : 'tenant' },
    kind: r.kind,
    trigger: 'redrive',
    payload: r.payload ?? null,
    tenantId: r.tenantId,
    actorKind: 'system',
    actorLabel: r.actorLabel,
    correlationId: r.correlationId,
    causationId: r.causationId,
    delaySeconds: 0,
    ...(r.event ? { event: r.event } : {}),
  });
}

function actorFields(actor: Actor): Pick<RunWrite, 'actorKind' | 'actorLabel' | 'user'> {
  if (actor.kind === 'user') {
    return { actorKind: 'user', actorLabel: actor.label, user: { userId: actor.userId, membershipId: actor.membershipId } };
  }
  return { actorKind: 'system', actorLabel: actor.label };
}

export function createDispatcher(deps: DispatcherDeps): Dispatcher {
  const instance = deps.instance ?? defaultInstanceLabel();
  const subscribers = deps.subscribers ?? (() => []);

  function resolveTask(name: string): DispatchTarget {
    const target = deps.resolve(name);
    if (!target) {
      throw new DispatchError('UNIT_NOT_REGISTERED', `no task named ${name} is registered: check the name or publish the workers that define it first`, {
        unit: name,
      });
    }
    return target;
  }

  return {
    async dispatchTask(tx, name, payload, options) {
      const target = resolveTask(name);
      const tenantId = actorTenant(options.actor, name);
      checkContext(target, tenantId);
      const delaySeconds = checkDelay(options.delaySeconds);
      const checked = checkPayload(target, payload);
      const correlationId = options.correlationId ?? randomUUID();
      return writeRun(tx, instance, {
        target,
        kind: 'task',
        trigger: 'dispatch',
        payload: checked,
        tenantId,
        ...actorFields(options.actor),
        correlationId,
        causationId: options.causationId ?? correlationId,
        delaySeconds,
      });
    },

    async publishEvent(tx, type, version, payload, options) {
      const targets = subscribers(type, version);
      const tenantId = actorTenant(options.actor, type);
      const delaySeconds = checkDelay(options.delaySeconds);
      // Check every subscriber before writing anything: a refusal leaves no partial publish behind.
      const checked = targets.map((target) => {
        checkContext(target, tenantId);
        return { target, payload: checkPayload(target, payload) };
      });
      const correlationId = options.correlationId ?? randomUUID();
      const runs: DispatchedRun[] = [];
      for (const { target, payload: p } of checked) {
        runs.push(
          await writeRun(tx, instance, {
            target,
            kind: 'event',
            trigger: 'event',
            payload: p,
            tenantId,
            ...actorFields(options.actor),
            correlationId,
            causationId: options.causationId ?? correlationId,
            delaySeconds,
            event: { type, version },
          }),
        );
      }
      return runs;
    },

    async dispatchScheduled(tx, name, payload, options) {
      const target = resolveTask(name);
      checkContext(target, null);
      const checked = checkPayload(target, payload);
      const correlationId = options.correlationId ?? randomUUID();
      const runId = randomUUID();
      const write: RunWrite = {
        target,
        kind: 'task',
        trigger: 'schedule',
        payload: checked,
        tenantId: null,
        actorKind: 'scheduler',
        actorLabel: options.actorLabel ?? 'scheduler',
        correlationId,
        causationId: correlationId,
        delaySeconds: 0,
      };
      // A savepoint, so a moment that already has its run leaves the caller's transaction usable.
      const fired = await tx.savepoint(async (sp) => {
        await insertRun(sp as unknown as TxSql, 'platform', {
          runId,
          name: target.name,
          queue: target.queue,
          trigger: 'schedule',
          actorKind: 'scheduler',
          actorLabel: write.actorLabel,
          correlationId,
          causationId: correlationId,
        });
        const inserted = await insertScheduleOrigin(sp as unknown as TxSql, {
          runId,
          scheduleName: options.scheduleName,
          executionId: options.executionId,
          scheduledFor: options.scheduledFor,
        });
        if (!inserted) throw new MomentTaken();
        return true;
      }).catch((error: unknown) => {
        if (error instanceof MomentTaken) return false;
        throw error;
      });
      if (!fired) return null;
      return writeTrailAndOutbox(tx, instance, write, runId);
    },
  };
}

class MomentTaken extends Error {}
