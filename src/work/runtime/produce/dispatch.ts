// Dispatching a task and publishing a domain event, inside the caller's transaction: the run row
// (queued), its `queued` trail event, the user-actor row for a user, and the outbox row carrying the
// envelope are written together, so they commit or vanish together. The relay sends the outbox row
// later; after commit the caller pushes the wake signal (src/kv/wake.ts `afterCommit`).
//
// Unit metadata comes from a lookup passed in (`resolve`, `subscribers`): the workers resolve from the
// loaded unit definitions (with payload schemas), the API from tasks.json (without unit code).
import os from 'node:os';
import { CodedError } from '../../../errors/coded-error.ts';
import { randomUUID } from 'node:crypto';
import type { z, ZodType } from 'zod';
import type { TxSql } from '../../../db/client.ts';
import { deferToCommit } from '../../../db/pipelined-begin.ts';
import type { Actor } from '../../../db/unit-of-work.ts';
import type { QueueName } from '../../../queue/names.ts';
import { dispatchTraceFields } from '../../../observe/work-tracing.ts';
import { MAX_PAYLOAD_BYTES, payloadBytes, type Envelope } from './envelope.ts';
import { newRunId } from './run-id.ts';
import { zodPayloadCheck, type PayloadCheck, type PayloadIssue } from '../../define/payload-schema.ts';
import { insertRun, insertScheduleOrigin, type RunTrigger } from '../store/run-store.ts';
import { NO_SQL, piece, RETURNING_ONE, scoped, scopeTables, sqlText, tenantOnly, tenantText, type RunScope, type SqlPiece, type SqlText } from '../store/scope-tables.ts';
import { trailRows } from '../store/trail.ts';
import { isWorkUnit, MAX_SERIAL_KEY_LENGTH, serialKeyOf, type DispatchedRun as PublicDispatchedRun, type TaskUnit, type UniqueDispatchOptions, type UnitContext, type WorkUnit } from '../../define/unit.ts';
import { claimUniqueKeys, debounceRuns, uniqueKeys, uniqueRule, type KeyedRun } from './unique-dispatch.ts';

/** What dispatch needs to know about a unit (a task, or an event subscriber). */
export interface DispatchTarget {
  name: string;
  queue: QueueName;
  context: UnitContext;
  /** Validates (and may transform) the payload at dispatch (unit code: workers, typed dispatch). */
  payload?: ZodType;
  /** Used when `payload` is absent: the catalog's JSON Schema, compiled (the API). Neither: any JSON. */
  check?: PayloadCheck;
  /** The payload field whose value orders the task's runs (`serialKey` in defineTask); none when absent. */
  serialKey?: string | null;
}

/**
 * Most payloads one bulk call takes (all checked, and held, in memory at once); a larger list is refused
 * with DISPATCH_BATCH_TOO_LARGE. Any list up to it is written in chunks of BULK_CHUNK_RUNS, in the
 * caller's one transaction: all or nothing.
 */
export const MAX_BULK_RUNS = 1_000_000;

/** Runs one multi-row statement writes; a longer list goes out as several (the caller never chunks). */
export const BULK_CHUNK_RUNS = 10_000;

export type ResolveUnit = (name: string) => DispatchTarget | undefined;
export type ResolveSubscribers = (type: string, version: number) => readonly DispatchTarget[];

export type DispatchErrorCode =
  | 'RUN_CONTEXT_MISMATCH'
  | 'PAYLOAD_TOO_LARGE'
  | 'PAYLOAD_INVALID'
  | 'UNIT_NOT_REGISTERED'
  | 'RUN_ACTOR_REFUSED'
  | 'DISPATCH_DELAY_INVALID'
  | 'DISPATCH_BATCH_INVALID'
  | 'DISPATCH_BATCH_TOO_LARGE'
  | 'DISPATCH_UNIQUE_INVALID';

export class DispatchError extends CodedError<DispatchErrorCode> {
  /** Machine-readable facts for logs and error bodies; never payload values. */
  readonly details: Record<string, unknown>;
  constructor(code: DispatchErrorCode, message: string, details: Record<string, unknown> = {}, options?: ErrorOptions) {
    super(code, message, options);
    this.name = 'DispatchError';
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

export interface DispatchOptions<P = unknown> extends UniqueDispatchOptions<P> {
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

/** A dispatched run as the runtime holds it: the public DispatchedRun and the envelope its outbox row carries. */
export interface DispatchedRun extends PublicDispatchedRun {
  envelope: Envelope;
}

export interface Dispatcher {
  /** Writes run, trail, actor and outbox rows for one task. */
  dispatchTask(tx: TxSql, name: string, payload: unknown, options: DispatchOptions): Promise<DispatchedRun>;
  // With a unique key (options.uniqueKey), both return the run the key already has (deduplicated: true) instead of writing one.
  /** One run per payload in a few multi-row statements; all or nothing, a refusal names each bad index. */
  dispatchMany(tx: TxSql, name: string, payloads: readonly unknown[], options: DispatchOptions): Promise<DispatchedRun[]>;
  /** Writes one run + outbox row per subscriber, each with its own run id; [] without subscribers. */
  publishEvent(tx: TxSql, type: string, version: number, payload: unknown, options: DispatchOptions): Promise<DispatchedRun[]>;
  /** publishEvent for many events of one type and version: one run per subscriber per payload, all or nothing. */
  publishMany(tx: TxSql, type: string, version: number, payloads: readonly unknown[], options: DispatchOptions): Promise<DispatchedRun[]>;
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

/**
 * Size cap, then the unit's schema; returns the payload to store (the caller's, once the schema accepts
 * it) or the issues. The worker parses the stored payload with the same schema, so storing the schema's
 * output would run its transforms twice (an output is not an input: `z.string().transform(Number)` then
 * refuses the number for good); defaults are applied by the worker's parse the same way.
 */
function payloadIssues(target: DispatchTarget, payload: unknown): { ok: true; value: unknown } | { ok: false; issues: PayloadIssue[] } {
  checkSize(target.name, payload);
  const check = target.payload ? zodPayloadCheck(target.payload) : target.check;
  const result = check ? check(payload) : ({ ok: true } as const);
  if (!result.ok) return result;
  if (target.serialKey) {
    const serial = serialKeyOf(target.serialKey, payload);
    if ('problem' in serial) return { ok: false, issues: [{ path: target.serialKey, rule: `must be a string of 1 to ${MAX_SERIAL_KEY_LENGTH} characters or a finite number: it orders the runs (serialKey)` }] };
  }
  return { ok: true, value: payload ?? null };
}

function describeIssues(issues: readonly PayloadIssue[]): string {
  const shown = issues.slice(0, 5).map((i) => `${i.path || '(payload)'} ${i.rule}`);
  return shown.join('; ') + (issues.length > 5 ? `; and ${issues.length - 5} more` : '');
}

function checkPayload(target: DispatchTarget, payload: unknown): unknown {
  const result = payloadIssues(target, payload);
  if (!result.ok) {
    // Paths and rules only: payload values may be personal data.
    throw new DispatchError('PAYLOAD_INVALID', `the payload of ${target.name} does not match its schema: ${describeIssues(result.issues)}`, {
      unit: target.name,
      issues: result.issues,
    });
  }
  return result.value;
}

/**
 * Checks every payload of a bulk dispatch before anything is written; refuses the whole batch, naming
 * the index of each bad payload (at most 20 listed in the message, all in details).
 */
function checkPayloads(target: DispatchTarget, payloads: readonly unknown[]): unknown[] {
  const out: unknown[] = [];
  const invalid: Array<{ index: number; issues: PayloadIssue[] }> = [];
  const tooLarge: number[] = [];
  payloads.forEach((payload, index) => {
    try {
      const result = payloadIssues(target, payload);
      if (result.ok) out.push(result.value);
      else invalid.push({ index, issues: result.issues });
    } catch (error) {
      if (error instanceof DispatchError && error.code === 'PAYLOAD_TOO_LARGE') tooLarge.push(index);
      else if (error instanceof DispatchError) invalid.push({ index, issues: [{ path: '', rule: 'is not serializable as JSON' }] });
      else throw error;
    }
  });
  if (invalid.length > 0 || tooLarge.length > 0) {
    const parts = [
      ...invalid.slice(0, 20).map((b) => `#${b.index}: ${describeIssues(b.issues)}`),
      ...tooLarge.slice(0, 20).map((i) => `#${i}: over ${MAX_PAYLOAD_BYTES} bytes`),
    ];
    throw new DispatchError(
      invalid.length > 0 ? 'PAYLOAD_INVALID' : 'PAYLOAD_TOO_LARGE',
      `${invalid.length + tooLarge.length} of ${payloads.length} payloads of ${target.name} were refused, so none of the ${payloads.length} was dispatched: ${parts.join(' | ')}`,
      { unit: target.name, invalid, tooLarge, maxBytes: MAX_PAYLOAD_BYTES },
    );
  }
  return out;
}

function checkBatch(name: string, payloads: unknown): readonly unknown[] {
  if (!Array.isArray(payloads)) {
    throw new DispatchError('DISPATCH_BATCH_INVALID', `the payloads of ${name} must be an array`, { unit: name });
  }
  if (payloads.length > MAX_BULK_RUNS) {
    throw new DispatchError(
      'DISPATCH_BATCH_TOO_LARGE',
      `${payloads.length} payloads of ${name} in one call, so none was dispatched; at most ${MAX_BULK_RUNS} are accepted: split the list over several transactions`,
      { unit: name, count: payloads.length, max: MAX_BULK_RUNS },
    );
  }
  return payloads;
}

function checkDelay(name: string, delaySeconds: number | undefined): number {
  const delay = delaySeconds ?? 0;
  if (!Number.isFinite(delay) || delay < 0) {
    throw new DispatchError('DISPATCH_DELAY_INVALID', `delaySeconds of ${name} must be a finite number of seconds, at least 0`, {
      unit: name,
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
  /** Recorded in the `queued` event's detail, where a later unique dispatch finds the run (unique-dispatch.ts). */
  uniqueKey?: string;
}

/** `serial_key` of the `queued` detail: where a delivery finds the earlier runs of its key (src/work/runtime/execute/serial-turn.ts). */
function serialDetail(w: RunWrite): { serial_key?: string } {
  if (!w.target.serialKey) return {};
  const serial = serialKeyOf(w.target.serialKey, w.payload);
  return 'key' in serial && serial.key !== undefined ? { serial_key: serial.key } : {};
}

function envelopeOf(w: RunWrite, runId: string): Envelope {
  return {
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
}

/**
 * What a dispatch's statement writes before the `queued` events and outbox rows: its CTEs (each named,
 * `RETURNING 1`, followed by a comma) and, in the order they are to run, the select-list counts that read them.
 */
interface LeadingWrites {
  ctes: SqlPiece;
  counts: SqlPiece | SqlText;
}

const NO_LEAD: LeadingWrites = { ctes: piece``, counts: NO_SQL };

/**
 * The `queued` trail events and the outbox rows of runs (with `lead`, the run rows and their user-actor
 * rows too), in ONE statement whatever the number of runs (arrays unnested server-side). Each write is a
 * CTE, and the select list reads them in their order (a writing CTE runs when its count is first read,
 * left to right): runs, user actors, events, outbox, as when they were four statements. One
 * statement where there were four is three fewer a dispatch for PostgreSQL to parse, bind, execute and
 * answer with a ReadyForQuery (each a wake-up of the client). All writes share one scope.
 */
async function writeTrailsAndOutbox(
  tx: TxSql,
  instance: string,
  writes: readonly RunWrite[],
  runIds: readonly string[],
  lead: LeadingWrites = NO_LEAD,
): Promise<DispatchedRun[]> {
  const tenantId = writes[0]!.tenantId;
  const scope: RunScope = tenantId === null ? 'platform' : 'tenant';
  const envelopes = writes.map((w, i) => envelopeOf(w, runIds[i]!));
  const queues = writes.map((w) => w.target.queue);
  const details = writes.map((w) =>
    JSON.stringify({
      trigger: w.trigger,
      ...(w.delaySeconds > 0 ? { delay_seconds: w.delaySeconds } : {}),
      ...(w.event ? { event: w.event.type, version: w.event.version } : {}),
      ...(w.uniqueKey !== undefined ? { unique_key: w.uniqueKey } : {}),
      ...serialDetail(w),
    }),
  );
  const envelopeTexts = envelopes.map((e) => JSON.stringify(e));
  const delays = writes.map((w) => w.delaySeconds);
  const ids = runIds as string[];
  const events = trailRows(
    scope,
    {
      runId: sqlText('r'), tenantId: piece`${tenantId}::bigint`, event: sqlText(`'queued'`), attempt: sqlText('0'), queue: sqlText('q'),
      workerInstance: instance, detail: sqlText('d::jsonb'),
    },
    piece`FROM unnest(${ids}::uuid[], ${queues}::text[], ${details}::text[]) WITH ORDINALITY AS u(r, q, d, n) ORDER BY n`,
    RETURNING_ONE,
  );
  const written = scoped(tx)`WITH ${lead.ctes}
    e AS (${events}),
    o AS (INSERT INTO ${scopeTables(scope).outbox} (${tenantText(scope, 'tenant_id,')} run_id, queue, envelope, available_at)
      SELECT ${tenantOnly(scope, piece`${tenantId}::bigint,`)} r, q, e::jsonb, clock_timestamp() + make_interval(secs => s)
        FROM unnest(${ids}::uuid[], ${queues}::text[], ${envelopeTexts}::text[], ${delays}::float8[]) WITH ORDINALITY AS u(r, q, e, s, n) ORDER BY n
      RETURNING 1)
    SELECT ${lead.counts} (SELECT count(*) FROM e)::int AS events, (SELECT count(*) FROM o)::int AS outbox`.execute();
  // In a unit of work the statement's answer goes to its COMMIT, which follows it in the same write
  // (src/db/pipelined-begin.ts deferToCommit): a unit of work that ends with a dispatch costs one round
  // trip. Its failure then fails the unit of work with its error, and nothing of it commits.
  if (!deferToCommit(tx, written)) await written;
  return writes.map((w, i) => ({
    runId: runIds[i]!,
    scope,
    tenantId,
    name: w.target.name,
    queue: w.target.queue,
    kind: w.kind,
    envelope: envelopes[i]!,
  }));
}

/**
 * Writes runs (queued), their user-actor rows, `queued` events and outbox rows: one statement per chunk
 * of BULK_CHUNK_RUNS (10,000) runs (writeTrailsAndOutbox). All writes share one tenant (or none) and one actor.
 * Each run reads the database clock once for queued_at and updated_at (two column defaults would read
 * it twice, and a run whose updated_at came out later would count as sent in the in-flight indexes of
 * sql/work/0018_tenant-fairness.sql before the relay sent it), as insertRun does. The reading is taken
 * as the insert pulls the row (above the sort, in a subquery PostgreSQL does not flatten: its target
 * list is volatile), so each row gets the clock at its own insert, as a column default would.
 */
async function writeRuns(tx: TxSql, instance: string, writes: readonly RunWrite[]): Promise<DispatchedRun[]> {
  if (writes.length <= BULK_CHUNK_RUNS) return writeRunChunk(tx, instance, writes);
  // One statement per chunk, all in the caller's transaction: a failure of any aborts it, so a refused
  // list leaves nothing written whatever chunk failed.
  const runs: DispatchedRun[] = [];
  for (let at = 0; at < writes.length; at += BULK_CHUNK_RUNS) {
    for (const run of await writeRunChunk(tx, instance, writes.slice(at, at + BULK_CHUNK_RUNS))) runs.push(run);
  }
  return runs;
}

/** writeRuns for at most BULK_CHUNK_RUNS writes. */
async function writeRunChunk(tx: TxSql, instance: string, writes: readonly RunWrite[]): Promise<DispatchedRun[]> {
  if (writes.length === 0) return [];
  const first = writes[0]!;
  const tenantId = first.tenantId;
  const runIds = writes.map(() => newRunId());
  const names = writes.map((w) => w.target.name);
  const queues = writes.map((w) => w.target.queue);
  const triggers = writes.map((w) => w.trigger);
  const correlations = writes.map((w) => w.correlationId);
  const causations = writes.map((w) => w.causationId);
  const scope: RunScope = tenantId === null ? 'platform' : 'tenant';
  const runs = piece`r AS (INSERT INTO ${scopeTables(scope).runs} (run_id, ${tenantText(scope, 'tenant_id,')} name, queue, trigger, actor_kind, actor_label,
        correlation_id, causation_id, queued_at, updated_at)
      SELECT r, ${tenantOnly(scope, piece`${tenantId}::bigint,`)} n, q, t, ${first.actorKind}, ${first.actorLabel}, c, k, at, at
        FROM (SELECT u.*, clock_timestamp() AS at
                FROM (SELECT * FROM unnest(${runIds}::uuid[], ${names}::text[], ${queues}::text[], ${triggers}::text[], ${correlations}::uuid[], ${causations}::uuid[])
                                    WITH ORDINALITY AS u(r, n, q, t, c, k, o) ORDER BY o) AS u) AS u
      RETURNING 1),`;
  const lead: LeadingWrites =
    tenantId !== null && first.user
      ? {
          ctes: piece`${runs}
            a AS (INSERT INTO task_run_user_actors (run_id, tenant_id, user_id, membership_id)
              SELECT r, ${tenantId}::bigint, ${first.user.userId}::bigint, ${first.user.membershipId}::bigint FROM unnest(${runIds}::uuid[]) AS u(r)
              RETURNING 1),`,
          counts: sqlText('(SELECT count(*) FROM r)::int AS runs, (SELECT count(*) FROM a)::int AS actors,'),
        }
      : { ctes: runs, counts: sqlText('(SELECT count(*) FROM r)::int AS runs,') };
  return writeTrailsAndOutbox(tx, instance, writes, runIds, lead);
}

/** The run a unique key already has, as a dispatch returns it. */
function keyedRun(target: DispatchTarget, tenantId: string | null, found: KeyedRun): DispatchedRun {
  return {
    runId: found.runId,
    scope: tenantId === null ? 'platform' : 'tenant',
    tenantId,
    name: target.name,
    queue: found.queue as DispatchTarget['queue'],
    kind: 'task',
    // Its outbox row's envelope; once that row is purged, the envelope rebuilt without the payload.
    envelope: found.envelope ?? {
      run_id: found.runId,
      kind: 'task',
      name: target.name,
      ...(tenantId !== null ? { tenant_id: tenantId } : {}),
      payload: null,
      correlation_id: found.correlationId,
      causation_id: found.causationId,
    },
    deduplicated: true,
  };
}

/**
 * writeRuns for task dispatches that may carry unique keys: locks the keys and finds their runs first
 * (unique-dispatch.ts), returns those runs for their payloads, and writes only the rest, once per key
 * (a later payload of the batch with a key written here gets the same run). `inputs`: the caller's
 * payloads, which the key function sees.
 */
async function writeTaskRuns(
  tx: TxSql,
  instance: string,
  writes: readonly RunWrite[],
  inputs: readonly unknown[],
  options: DispatchOptions,
): Promise<DispatchedRun[]> {
  const refuse = (message: string) =>
    new DispatchError('DISPATCH_UNIQUE_INVALID', `unique dispatch of ${writes[0]?.target.name ?? 'a task'}: ${message}`, { unit: writes[0]?.target.name ?? '' });
  if (options.uniqueKey === undefined) {
    if (options.debounceSeconds !== undefined || options.debouncePayload !== undefined) throw refuse('debounceSeconds needs a uniqueKey');
    return writeRuns(tx, instance, writes);
  }
  const rule = uniqueRule(options);
  if (typeof rule === 'string') throw refuse(rule);
  if (writes.length === 0) return writeRuns(tx, instance, writes);
  const { target, tenantId } = writes[0]!;
  const keys = uniqueKeys(options.uniqueKey, inputs);
  if (typeof keys === 'string') throw refuse(keys);
  const debounce = rule.debounce;
  // Debounced runs are due that many seconds after the dispatch that wrote (or last moved) them.
  const due = (w: RunWrite): RunWrite => (debounce ? { ...w, delaySeconds: debounce.seconds } : w);
  const keyed = keys.filter((k): k is string => k !== undefined);
  if (keyed.length === 0) return writeRuns(tx, instance, writes.map(due));
  const scope: RunScope = tenantId === null ? 'platform' : 'tenant';
  const { isolation, runs } = await claimUniqueKeys(tx, scope, tenantId, target.name, keyed, rule);
  if (isolation !== 'read committed') {
    throw refuse(`it needs a READ COMMITTED transaction (this one is ${isolation}): a run committed while the dispatch waited on its key would be invisible to it`);
  }
  if (debounce && runs.size > 0) {
    // Each found run moved once, carrying its key's last payload of this batch when the payload follows.
    const lastPayload = new Map<string, unknown>();
    writes.forEach((w, i) => keys[i] !== undefined && lastPayload.set(keys[i], w.payload));
    const found = [...runs];
    const moved = await debounceRuns(
      tx,
      scope,
      found.map(([, run]) => run.runId),
      debounce.seconds,
      debounce.payload === 'last' ? found.map(([key]) => lastPayload.get(key)) : undefined,
    );
    // A run the relay sent meanwhile no longer holds its key: the key gets a new run.
    for (const [key, run] of found) {
      if (!moved.has(run.runId)) runs.delete(key);
      else if (debounce.payload === 'last' && run.envelope) runs.set(key, { ...run, envelope: { ...run.envelope, payload: lastPayload.get(key) } });
    }
  }
  // A run written by this batch is queued, so it holds its key for the batch's later payloads exactly
  // when a queued run would hold it for a later dispatch.
  const batchHolds = rule.states.includes('queued') || rule.forSeconds > 0;
  const fresh: RunWrite[] = [];
  const firstOfKey = new Map<string, number>();
  const plan = writes.map((w, i): { existing: KeyedRun } | { fresh: number; again: boolean } => {
    const key = keys[i];
    if (key === undefined) return { fresh: fresh.push(due(w)) - 1, again: false };
    const existing = runs.get(key);
    if (existing) return { existing };
    const seen = firstOfKey.get(key);
    if (seen !== undefined && batchHolds) {
      // Debounce with the last payload: the batch's run carries its key's last one.
      if (debounce?.payload === 'last') fresh[seen] = { ...fresh[seen]!, payload: w.payload };
      return { fresh: seen, again: true };
    }
    const at = fresh.push({ ...due(w), uniqueKey: key }) - 1;
    firstOfKey.set(key, at);
    return { fresh: at, again: false };
  });
  const written = await writeRuns(tx, instance, fresh);
  return plan.map((p) => {
    if ('existing' in p) return keyedRun(target, tenantId, p.existing);
    return p.again ? { ...written[p.fresh]!, deduplicated: true } : written[p.fresh]!;
  });
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
  const [run] = await writeRuns(tx, instance, [{
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
  }]);
  return run!;
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

  /** One write per payload; each run gets its own correlation id unless the options name one. */
  function taskWrites(target: DispatchTarget, tenantId: string | null, payloads: readonly unknown[], options: DispatchOptions, delaySeconds: number): RunWrite[] {
    const actor = actorFields(options.actor);
    return payloads.map((payload) => {
      const correlationId = options.correlationId ?? randomUUID();
      return {
        target,
        kind: 'task',
        trigger: 'dispatch',
        payload,
        tenantId,
        ...actor,
        correlationId,
        causationId: options.causationId ?? correlationId,
        delaySeconds,
      };
    });
  }

  async function publish(tx: TxSql, type: string, version: number, payloads: readonly unknown[], options: DispatchOptions, bulk: boolean) {
    const targets = subscribers(type, version);
    const tenantId = actorTenant(options.actor, type);
    const delaySeconds = checkDelay(type, options.delaySeconds);
    // Check every subscriber before writing anything: a refusal leaves no partial publish behind.
    const checked = targets.map((target) => {
      checkContext(target, tenantId);
      return { target, payloads: bulk ? checkPayloads(target, payloads) : [checkPayload(target, payloads[0])] };
    });
    const actor = actorFields(options.actor);
    // One correlation id per published event, shared by its subscribers' runs.
    const correlations = payloads.map(() => options.correlationId ?? randomUUID());
    const writes: RunWrite[] = [];
    for (const { target, payloads: ps } of checked) {
      ps.forEach((payload, i) =>
        writes.push({
          target,
          kind: 'event',
          trigger: 'event',
          payload,
          tenantId,
          ...actor,
          correlationId: correlations[i]!,
          causationId: options.causationId ?? correlations[i]!,
          delaySeconds,
          event: { type, version },
        }),
      );
    }
    return writeRuns(tx, instance, writes);
  }

  return {
    async dispatchTask(tx, name, payload, options) {
      const target = resolveTask(name);
      const tenantId = actorTenant(options.actor, name);
      checkContext(target, tenantId);
      const delaySeconds = checkDelay(name, options.delaySeconds);
      const checked = checkPayload(target, payload);
      const [run] = await writeTaskRuns(tx, instance, taskWrites(target, tenantId, [checked], options, delaySeconds), [payload], options);
      return run!;
    },

    async dispatchMany(tx, name, payloads, options) {
      const target = resolveTask(name);
      const batch = checkBatch(name, payloads);
      const tenantId = actorTenant(options.actor, name);
      checkContext(target, tenantId);
      const delaySeconds = checkDelay(name, options.delaySeconds);
      const checked = checkPayloads(target, batch);
      return writeTaskRuns(tx, instance, taskWrites(target, tenantId, checked, options, delaySeconds), batch, options);
    },

    async publishEvent(tx, type, version, payload, options) {
      return publish(tx, type, version, [payload], options, false);
    },

    async publishMany(tx, type, version, payloads, options) {
      return publish(tx, type, version, checkBatch(type, payloads), options, true);
    },

    async dispatchScheduled(tx, name, payload, options) {
      const target = resolveTask(name);
      checkContext(target, null);
      const checked = checkPayload(target, payload);
      const correlationId = options.correlationId ?? randomUUID();
      const runId = newRunId();
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
        await insertRun(sp, 'platform', {
          runId,
          name: target.name,
          queue: target.queue,
          trigger: 'schedule',
          actorKind: 'scheduler',
          actorLabel: write.actorLabel,
          correlationId,
          causationId: correlationId,
        });
        const inserted = await insertScheduleOrigin(sp, {
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
      const [run] = await writeTrailsAndOutbox(tx, instance, [write], [runId]);
      return run!;
    },
  };
}

class MomentTaken extends Error {}

// ───────────── typed dispatch, where unit code is importable ─────────────

/** Options of typed dispatch: those of DispatchOptions plus the trail's instance label. */
export interface UnitDispatchOptions<P = unknown> extends DispatchOptions<P> {
  /** Names this process in trail rows (1..128 chars); default `<hostname>:<pid>`. */
  instance?: string;
}

/** What dispatch needs from a unit definition (its schema included, so the worker's own check runs here). */
export function targetOfUnit(unit: WorkUnit): DispatchTarget {
  return { name: unit.name, queue: unit.queue, context: unit.context, payload: unit.payload, ...(unit.kind === 'task' && unit.serialKey ? { serialKey: unit.serialKey } : {}) };
}

function unitDispatcher(unit: WorkUnit, instance: string | undefined): Dispatcher {
  if (!isWorkUnit(unit) || unit.kind !== 'task') {
    const name = (unit as { name?: unknown })?.name;
    throw new DispatchError('UNIT_NOT_REGISTERED', `${String(name)} is not a task built by defineTask: dispatch tasks; publish events to reach subscribers`, {
      unit: String(name),
    });
  }
  return createDispatcher({ resolve: (name) => (name === unit.name ? targetOfUnit(unit) : undefined), ...(instance ? { instance } : {}) });
}

/**
 * Dispatches `unit` with a payload TypeScript checks against the unit's schema (its input type):
 *   await dispatchTask(tx, sendInvoice, { invoiceId }, { actor });
 * The name form (`dispatcher.dispatchTask(tx, 'billing.send_invoice', ...)`) stays for the API.
 */
export async function dispatchTask<S extends ZodType>(
  tx: TxSql,
  unit: TaskUnit<S>,
  payload: z.input<S>,
  options: UnitDispatchOptions<z.input<S>>,
): Promise<DispatchedRun> {
  // The key function sees the caller's payload, typed here by the unit's schema.
  return unitDispatcher(unit, options.instance).dispatchTask(tx, unit.name, payload, options as DispatchOptions);
}

/**
 * Dispatches one run of `unit` per payload in a few multi-row statements: all or nothing (a refusal
 * lists the index of each bad payload in `payloads` and nothing is written). Any length up to MAX_BULK_RUNS
 * (1,000,000): longer lists are written in chunks inside the caller's transaction, never split by the caller.
 * Signal the relay once after commit (`afterCommit`), not once per run.
 */
export async function dispatchMany<S extends ZodType>(
  tx: TxSql,
  unit: TaskUnit<S>,
  payloads: ReadonlyArray<z.input<S>>,
  options: UnitDispatchOptions<z.input<S>>,
): Promise<DispatchedRun[]> {
  return unitDispatcher(unit, options.instance).dispatchMany(tx, unit.name, payloads, options as DispatchOptions);
}
