// Work units: a task (a command with exactly one handler) or an event subscriber (one of zero or more
// handlers of a fact). A schedule is not a unit of its own: it is the `schedule` option of a task and
// only dispatches that task. Each file under units/ named `*.task.ts` or `*.handler.ts` exports one
// definition built by `defineTask` or `defineSubscriber`; these functions only attach defaults and a
// brand, and `unitProblems` says what is wrong with a definition so `tasks:check` can name the file.
import type { z } from 'zod';
import type { Logger } from 'pino';
import type { TxSql } from '../../db/client.ts';
import { GROUP_COMMIT_MAX_RUNS, MAX_BACKOFF_MS, QUEUE_NAMES, RUNTIME_MAX_RECEIVES, type QueueName } from '../../config/limits.ts';
import { scheduleExpressionProblem } from './schedule-expression.ts';
import { RateLimitInvalid } from './unit-errors.ts';

/** Queues a unit may name (the spec's four; each has a dead-letter queue). */
export const UNIT_QUEUES = QUEUE_NAMES;
export type UnitQueue = QueueName;

export const UNIT_CONTEXTS = ['tenant', 'platform', 'system'] as const;
/** `tenant` runs belong to a tenant (task_runs); `platform` and `system` runs have none (platform_task_runs). */
export type UnitContext = (typeof UNIT_CONTEXTS)[number];

export type Overlap = 'skip' | 'allow';

/** Dot-separated segments of `[a-z][a-z0-9_]*`, at most 64 characters (and the database's own rule). */
export const UNIT_NAME_RULE = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/;
export const UNIT_NAME_DB_RULE = /^[a-z][a-z0-9._-]{1,63}$/;
export const UNIT_NAME_MAX = 64;

/** JSON object a handler may return; stored as the run's `outcome` (at most 2048 bytes). */
export type UnitOutcome = Record<string, unknown>;

/** What a handler receives besides its payload. */
export interface UnitRun {
  runId: string;
  name: string;
  /**
   * 1 for the first execution, counting every handler execution started. After a crash of PostgreSQL
   * an execution whose registration the crash took back runs again under the same number
   * (src/db/commit-without-flush.ts): key external side effects by `runId`, never by the attempt.
   */
  attempt: number;
  /** ISO instant of the scheduled moment for scheduled runs, otherwise null. */
  scheduledFor: string | null;
  /** The tenant of a tenant run, otherwise null. */
  tenantId: string | null;
  correlationId: string;
  /** The database clock (never the machine's). */
  now(): Promise<Date>;
  logger: Logger;
  /** Commits 0..100 on the run in its own short transaction, visible while the effect is still open. */
  progress(percent: number): Promise<void>;
  /**
   * The effect transaction, bound to the run's tenant and a system-process flag. Whatever the handler
   * writes through it commits together with the run's `started` and `succeeded` events.
   */
  transaction: TxSql;
  /** Aborted when the unit exceeds timeoutSeconds or the worker releases the run on shutdown. */
  signal: AbortSignal;
  /**
   * Dispatches a follow-up task through the effect transaction: it commits with the effect or not at
   * all. causation_id is this run, the correlation id is this run's; the task's context must match
   * this run's (RUN_CONTEXT_MISMATCH otherwise). The payload is checked by the task's schema.
   */
  dispatch<S extends z.ZodType>(unit: TaskUnit<S>, payload: z.input<S>, options?: FollowUpOptions & UniqueDispatchOptions<z.input<S>>): Promise<DispatchedRun>;
  /** Publishes a domain event to its subscribers (loaded in this worker) the same way as dispatch. */
  publish(event: { type: string; version: number }, payload: unknown, options?: FollowUpOptions): Promise<DispatchedRun[]>;
}

/** A run written by a dispatch (typed, bulk, or `run.dispatch`/`run.publish` from a handler). */
export interface DispatchedRun {
  runId: string;
  /** `tenant` for a run of a tenant, `platform` for a platform or system run. */
  scope: 'tenant' | 'platform';
  /** Tenant of a tenant run, null for platform/system runs. */
  tenantId: string | null;
  name: string;
  queue: QueueName;
  kind: 'task' | 'event';
  /** True when a unique key found this live run of its key and the dispatch wrote nothing; absent otherwise. */
  deduplicated?: true;
}

/** A run's state (task_runs.status). */
export type RunState = 'queued' | 'running' | 'retrying' | 'succeeded' | 'failed' | 'skipped';

/**
 * Unique dispatch (typed dispatchTask, dispatchMany, `run.dispatch`): at most one live run of a unit per
 * key and tenant. All absent: every dispatch writes its run.
 */
export interface UniqueDispatchOptions<P = unknown> {
  /**
   * The key (1..255 characters), or a function of the caller's payload and its index in a bulk call
   * (null/undefined: no key for it). While a run of the unit and tenant with the key is in
   * `uniqueStates` or younger than `uniqueFor`, the dispatch returns that run (`deduplicated: true`) and
   * writes nothing; a bulk call also dedups its own payloads. Default none.
   */
  uniqueKey?: string | ((payload: P, index: number) => string | null | undefined);
  /** Seconds after its dispatch during which a keyed run holds its key whatever its state; default 0. */
  uniqueFor?: number;
  /** States in which a keyed run holds its key; default the unfinished ones: queued, running, retrying. */
  uniqueStates?: readonly RunState[];
  /**
   * Debounce (with `uniqueKey`; not with `uniqueFor`, `uniqueStates` or `delaySeconds`): the run is due
   * this many seconds after the dispatch, and a later dispatch of the key while the run still waits to
   * be sent moves it to that many seconds after itself instead of writing a run. Once the run was sent,
   * the next dispatch of the key writes a new one. A burst thus runs once, after it goes quiet.
   */
  debounceSeconds?: number;
  /** With `debounceSeconds`: the payload the run keeps, the first dispatch's (default) or the last one's. */
  debouncePayload?: 'first' | 'last';
}

/** Options of a follow-up dispatch from inside a handler. */
export interface FollowUpOptions {
  /** Seconds before the relay may send the follow-up (after the effect commits); default 0. */
  delaySeconds?: number;
}

/** Whom a rate limit counts: every run of the unit together, or each tenant's runs apart. */
export const RATE_LIMIT_SCOPES = ['unit', 'tenant'] as const;
export type RateLimitScope = (typeof RATE_LIMIT_SCOPES)[number];

/**
 * At most `max` executions of the unit start per `perSeconds`, across every workers process
 * (src/work/runtime/consume/rate-limit.ts, docs/rate-limits.md). A delivery over the limit goes back
 * to the queue until the window has room, without spending a receive.
 */
export interface RateLimit {
  /** Executions started per window: a whole number from 1 to RATE_LIMIT_MAX. */
  max: number;
  /** Length of the window, seconds: above 0 (at least 1 ms), at most RATE_LIMIT_MAX_PER_SECONDS (a day). */
  perSeconds: number;
  /** `unit` (default): one limit for all the unit's runs; `tenant`: one per tenant (tenant units only). */
  scope?: RateLimitScope;
}

/** The largest `rateLimit.max`. */
export const RATE_LIMIT_MAX = 1_000_000;
/** The longest `rateLimit.perSeconds`: a day. */
export const RATE_LIMIT_MAX_PER_SECONDS = 86_400;

/** A top-level payload field, by name (any name when the payload's type is not an object). */
export type SerialKeyField<P> = P extends Record<string, unknown> ? Extract<keyof P, string> : string;

/** Longest serial key value, in characters (it is stored in the detail of the run's `queued` event). */
export const MAX_SERIAL_KEY_LENGTH = 255;

/**
 * The serial key of a payload for a unit ordered by `field`: its value as text, undefined when the
 * payload has none (the run is not ordered), or a sentence saying why the value cannot be one.
 */
export function serialKeyOf(field: string, payload: unknown): { key: string | undefined } | { problem: string } {
  const value = typeof payload === 'object' && payload !== null ? (payload as Record<string, unknown>)[field] : undefined;
  if (value === undefined || value === null) return { key: undefined };
  const key = typeof value === 'string' ? value : typeof value === 'number' && Number.isFinite(value) ? String(value) : undefined;
  if (key === undefined || key.length < 1 || key.length > MAX_SERIAL_KEY_LENGTH || key.includes('\u0000')) {
    return { problem: `serialKey field '${field}' must hold a string of 1 to ${MAX_SERIAL_KEY_LENGTH} characters (without NUL) or a finite number` };
  }
  return { key };
}

export type UnitHandler<P> = (payload: P, run: UnitRun) => Promise<UnitOutcome | void>;

/** Per-unit retry policy; every field is optional. */
export interface RetryPolicy {
  /** Receives the handler may run on, 1..5 (the runtime's cap); the last one fails for good. Default 5. */
  maxReceives?: number;
  backoff?: {
    /** Delay bound after the first receive, ms, at least 1000. Default SVC_BACKOFF_BASE_MS (2000). */
    baseMs?: number;
    /**
     * Upper bound of any delay, ms (at most 12 h, SQS's visibility limit). A delay is also clamped to what
     * is left of the 12 h the message's visibility may reach past its receipt (src/work/runtime/complete/backoff.ts), and
     * the trail's retry_scheduled says the delay applied. Default SVC_BACKOFF_CAP_MS (300000).
     */
    capMs?: number;
    /** `full` (default): a uniform random delay from 0 to the exponential bound; `none`: the bound itself. */
    jitter?: 'full' | 'none';
  };
}

interface CommonOptions<S extends z.ZodType> {
  name: string;
  queue: UnitQueue;
  /** Simultaneous executions of this unit per worker process. Default 1. */
  concurrency?: number;
  /** Of those, at most this many for one tenant (fair share; see docs/fairness.md). Default none. */
  tenantConcurrency?: number;
  /** Execution deadline in seconds; past it the handler is aborted (transient failure). Default 60. */
  timeoutSeconds?: number;
  /** Default `tenant`. */
  context?: UnitContext;
  /** zod schema of the payload; validated at dispatch and again before the handler runs. */
  payload: S;
  /**
   * Business idempotency key; by default the run id is the key. Two runs with the same business key
   * and the same payload execute once (the second replays the first's outcome).
   */
  idempotencyKey?: (payload: z.output<S>) => string;
  /** Receives and backoff of transient failures; default 5 receives, SVC_BACKOFF_* with full jitter. */
  retry?: RetryPolicy;
  /**
   * Runs of this unit (same tenant) that reach execution together share one effect transaction and one
   * commit, each handler in its own savepoint, one after another: for handlers that finish in
   * milliseconds (docs/group-commit.md). Such a group takes one slot of `concurrency`, and the workers
   * hold up to GROUP_COMMIT_MAX_RUNS (40) messages per slot. Default false.
   */
  groupCommit?: boolean;
  /** At most `max` executions per `perSeconds` across every workers process, per unit or per tenant. Default none. */
  rateLimit?: RateLimit;
  handler: UnitHandler<z.output<S>>;
}

export interface TaskOptions<S extends z.ZodType> extends CommonOptions<S> {
  /**
   * Runs in order per key: the name of a top-level payload field (a string or a number). At most one run
   * of this unit with a given value (per tenant) executes at a time, in dispatch order, across every
   * workers process; a payload without the field runs freely (docs/serial-runs.md). Default none.
   */
  serialKey?: SerialKeyField<z.input<S>>;
  /** `rate(<n> <unit>)` or `cron(<min> <hour> <dom> <mon> <dow>)` in UTC: the schedule dispatches this task at each moment. Default none. */
  schedule?: string;
  /** Only for scheduled tasks: `skip` (default) skips a moment while an earlier run is active. */
  overlap?: Overlap;
}

export interface SubscriberOptions<S extends z.ZodType> extends CommonOptions<S> {
  event: { type: string; version: number };
}

export const UNIT_BRAND: unique symbol = Symbol.for('svc.work.unit') as never;

interface UnitBase<S extends z.ZodType = z.ZodType> {
  readonly [UNIT_BRAND]: true;
  name: string;
  queue: UnitQueue;
  concurrency: number;
  /** Per-tenant share of `concurrency` in one process; null: not limited per tenant. */
  tenantConcurrency: number | null;
  timeoutSeconds: number;
  context: UnitContext;
  payload: S;
  idempotencyKey: ((payload: never) => string) | null;
  /** null: the runtime's defaults. */
  retry: RetryPolicy | null;
  /** Several runs may share one effect transaction (src/work/runtime/execute/group-commit.ts). */
  groupCommit: boolean;
  /** The unit's rate limit (scope filled in); null: not limited. */
  rateLimit: Required<RateLimit> | null;
  handler: UnitHandler<never>;
}

/**
 * Messages the workers hold per slot of a unit: GROUP_COMMIT_MAX_RUNS for a `groupCommit` unit, whose
 * slot runs a whole group, one after another (src/work/runtime/execute/group-commit.ts), so the next groups form
 * while its slots are busy; one for any other unit.
 */
export function messagesPerSlot(unit: Pick<UnitBase, 'groupCommit'>): number {
  return unit.groupCommit ? GROUP_COMMIT_MAX_RUNS : 1;
}

/** Messages the workers hold at once for one unit: its slots' worth (the consumer's share, the relay's lone room). */
export function messagesPerUnit(unit: Pick<UnitBase, 'concurrency' | 'groupCommit'>): number {
  return unit.concurrency * messagesPerSlot(unit);
}

/** A task; `S` is its payload schema, so typed dispatch checks a payload against it at compile time. */
export interface TaskUnit<S extends z.ZodType = z.ZodType> extends UnitBase<S> {
  kind: 'task';
  /** The payload field whose value orders this unit's runs (one at a time per value); null: none. */
  serialKey: string | null;
  schedule: string | null;
  overlap: Overlap | null;
}

export interface SubscriberUnit<S extends z.ZodType = z.ZodType> extends UnitBase<S> {
  kind: 'subscriber';
  event: { type: string; version: number };
}

export type WorkUnit = TaskUnit | SubscriberUnit;

export const DEFAULT_CONCURRENCY = 1;
export const DEFAULT_TIMEOUT_SECONDS = 60;

export function defineTask<S extends z.ZodType>(options: TaskOptions<S>): TaskUnit<S> {
  const schedule = options.schedule ?? null;
  const context = options.context ?? 'tenant';
  return {
    [UNIT_BRAND]: true,
    kind: 'task',
    name: options.name,
    queue: options.queue,
    concurrency: options.concurrency ?? DEFAULT_CONCURRENCY,
    tenantConcurrency: options.tenantConcurrency ?? null,
    timeoutSeconds: options.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS,
    context,
    schedule,
    serialKey: (options.serialKey as string | undefined) ?? null,
    // `overlap` means nothing without a schedule; an explicit value there is reported by unitProblems.
    overlap: options.overlap ?? (schedule ? 'skip' : null),
    payload: options.payload,
    idempotencyKey: (options.idempotencyKey as UnitBase['idempotencyKey']) ?? null,
    retry: options.retry ?? null,
    groupCommit: options.groupCommit ?? false,
    rateLimit: checkedRateLimit(options.name, options.rateLimit, context),
    handler: options.handler,
  };
}

export function defineSubscriber<S extends z.ZodType>(options: SubscriberOptions<S>): SubscriberUnit<S> {
  const context = options.context ?? 'tenant';
  return {
    [UNIT_BRAND]: true,
    kind: 'subscriber',
    name: options.name,
    event: { type: options.event?.type, version: options.event?.version },
    queue: options.queue,
    concurrency: options.concurrency ?? DEFAULT_CONCURRENCY,
    tenantConcurrency: options.tenantConcurrency ?? null,
    timeoutSeconds: options.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS,
    context,
    payload: options.payload,
    idempotencyKey: (options.idempotencyKey as UnitBase['idempotencyKey']) ?? null,
    retry: options.retry ?? null,
    groupCommit: options.groupCommit ?? false,
    rateLimit: checkedRateLimit(options.name, options.rateLimit, context),
    handler: options.handler,
  };
}

/**
 * The rate limit with its default scope, or null. A wrong one throws RateLimitInvalid at definition:
 * the unit file then fails to load, and tasks:check and the workers name the file and the problem.
 */
function checkedRateLimit(name: string, rateLimit: RateLimit | undefined, context: UnitContext): Required<RateLimit> | null {
  if (rateLimit === undefined || rateLimit === null) return null;
  const problems = rateLimitProblems(rateLimit, context);
  if (problems.length > 0) throw new RateLimitInvalid(name, problems);
  return { max: rateLimit.max, perSeconds: rateLimit.perSeconds, scope: rateLimit.scope ?? 'unit' };
}

/** What is wrong with a rate limit (defineTask throws on any; unitProblems reports them). */
export function rateLimitProblems(rateLimit: RateLimit | null | undefined, context: UnitContext): string[] {
  if (rateLimit === null || rateLimit === undefined) return [];
  if (typeof rateLimit !== 'object') return ['rateLimit must be an object { max, perSeconds, scope? }'];
  const problems: string[] = [];
  if (!isWhole(rateLimit.max, 1, RATE_LIMIT_MAX)) {
    problems.push(`rateLimit.max must be a whole number from 1 to ${RATE_LIMIT_MAX}, not ${String(rateLimit.max)}`);
  }
  const per = rateLimit.perSeconds;
  // Windows are counted in whole milliseconds (src/kv/rate-limit.ts).
  if (typeof per !== 'number' || !Number.isFinite(per) || per < 0.001 || per > RATE_LIMIT_MAX_PER_SECONDS) {
    problems.push(`rateLimit.perSeconds must be a number of seconds above 0 (at least 0.001) and at most ${RATE_LIMIT_MAX_PER_SECONDS}, not ${String(per)}`);
  }
  const scope = rateLimit.scope ?? 'unit';
  if (!(RATE_LIMIT_SCOPES as readonly string[]).includes(scope)) {
    problems.push(`rateLimit.scope must be ${RATE_LIMIT_SCOPES.join(' or ')}, not '${String(scope)}'`);
  } else if (scope === 'tenant' && context !== 'tenant') {
    problems.push(`rateLimit.scope 'tenant' needs context 'tenant' (a ${String(context)} run belongs to no tenant): use scope 'unit'`);
  }
  return problems;
}

export function isWorkUnit(value: unknown): value is WorkUnit {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[UNIT_BRAND] === true;
}

export function unitNameProblem(name: unknown): string | null {
  if (typeof name !== 'string' || name.length === 0) return 'name is missing';
  if (name.length > UNIT_NAME_MAX) return `name '${name}' is longer than ${UNIT_NAME_MAX} characters`;
  if (!UNIT_NAME_RULE.test(name) || !UNIT_NAME_DB_RULE.test(name)) {
    return `name '${name}' breaks the rule: dot-separated segments of [a-z][a-z0-9_]*, at least 2 characters`;
  }
  return null;
}

/** Everything wrong with one definition; empty when it is valid. */
export function unitProblems(unit: WorkUnit): string[] {
  const problems: string[] = [];
  const nameProblem = unitNameProblem(unit.name);
  if (nameProblem) problems.push(nameProblem);
  if (!(UNIT_QUEUES as readonly string[]).includes(unit.queue)) {
    problems.push(`unknown queue '${String(unit.queue)}': use one of ${UNIT_QUEUES.join(', ')}`);
  }
  if (!(UNIT_CONTEXTS as readonly string[]).includes(unit.context)) {
    problems.push(`unknown context '${String(unit.context)}': use one of ${UNIT_CONTEXTS.join(', ')}`);
  }
  if (!Number.isInteger(unit.concurrency) || unit.concurrency < 1 || unit.concurrency > 1000) {
    problems.push('concurrency must be a whole number from 1 to 1000');
  }
  if (unit.tenantConcurrency !== null && (!Number.isInteger(unit.tenantConcurrency) || unit.tenantConcurrency < 1 || unit.tenantConcurrency > unit.concurrency)) {
    problems.push('tenantConcurrency must be a whole number from 1 to the unit\'s concurrency');
  }
  if (!Number.isInteger(unit.timeoutSeconds) || unit.timeoutSeconds < 1 || unit.timeoutSeconds > 43_200) {
    problems.push('timeoutSeconds must be a whole number from 1 to 43200');
  }
  if (typeof unit.groupCommit !== 'boolean') problems.push('groupCommit must be true or false');
  if (typeof unit.handler !== 'function') problems.push('handler must be a function');
  if (!unit.payload || typeof (unit.payload as { safeParse?: unknown }).safeParse !== 'function') {
    problems.push('payload must be a zod schema');
  }
  problems.push(...retryProblems(unit.retry).map((p) => `unit '${String(unit.name)}': ${p}`));
  problems.push(...rateLimitProblems(unit.rateLimit, unit.context).map((p) => `unit '${String(unit.name)}': ${p}`));
  if (unit.kind === 'task') {
    // The parser's reason (singular or plural, at least 1...), not a generic form: the author sees what to change.
    const scheduleProblem = unit.schedule === null ? null : scheduleExpressionProblem(unit.schedule);
    if (scheduleProblem !== null) problems.push(scheduleProblem);
    // A scheduled run is a platform run without a tenant (the scheduler has none to bind), so a tenant
    // task with a schedule would be refused with RUN_CONTEXT_MISMATCH at every firing.
    if (unit.schedule !== null && unit.context === 'tenant') {
      problems.push("a scheduled task must have context 'platform' or 'system', not 'tenant': scheduled runs belong to no tenant; set context or remove the schedule");
    }
    if (unit.serialKey !== null) {
      if (typeof unit.serialKey !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(unit.serialKey)) {
        problems.push(`serialKey must name a top-level payload field (letters, digits, _), not ${JSON.stringify(unit.serialKey)}`);
      } else {
        const shape = (unit.payload as { shape?: Record<string, unknown> } | undefined)?.shape;
        if (shape && typeof shape === 'object' && !(unit.serialKey in shape)) {
          problems.push(`serialKey '${unit.serialKey}' is not a field of the payload schema (${Object.keys(shape).join(', ') || 'no fields'})`);
        }
      }
      if (unit.groupCommit) problems.push('serialKey does not combine with groupCommit: a group runs its members together, a serial key one at a time');
    }
    if (unit.schedule === null && unit.overlap !== null) {
      problems.push('overlap is only for scheduled tasks: remove it or add a schedule');
    }
    if (unit.overlap !== null && unit.overlap !== 'skip' && unit.overlap !== 'allow') {
      problems.push(`overlap must be skip or allow, not '${String(unit.overlap)}'`);
    }
  } else {
    if (typeof unit.event?.type !== 'string' || !UNIT_NAME_RULE.test(unit.event.type)) {
      problems.push('event.type must be a dot-separated name such as identity.session_started');
    }
    if (!Number.isInteger(unit.event?.version) || unit.event.version < 1) {
      problems.push('event.version must be a whole number of at least 1');
    }
  }
  return problems;
}

function isWhole(value: unknown, min: number, max: number): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max;
}

/** What is wrong with a retry policy (tasks:check refuses a unit with any). */
export function retryProblems(retry: RetryPolicy | null | undefined): string[] {
  if (retry === null || retry === undefined) return [];
  const problems: string[] = [];
  if (typeof retry !== 'object') return ['retry must be an object { maxReceives?, backoff? }'];
  if (retry.maxReceives !== undefined && !isWhole(retry.maxReceives, 1, RUNTIME_MAX_RECEIVES)) {
    problems.push(`retry.maxReceives must be a whole number from 1 to ${RUNTIME_MAX_RECEIVES} (the runtime's receive limit), not ${String(retry.maxReceives)}`);
  }
  const b = retry.backoff;
  if (b !== undefined) {
    if (typeof b !== 'object' || b === null) return [...problems, 'retry.backoff must be an object { baseMs?, capMs?, jitter? }'];
    // At least 1 s: the queue's visibility is whole seconds, so a shorter base would round to a retry at once.
    if (b.baseMs !== undefined && !isWhole(b.baseMs, 1000, MAX_BACKOFF_MS)) {
      problems.push(`retry.backoff.baseMs must be a whole number of ms from 1000 (the queue counts visibility in whole seconds) to ${MAX_BACKOFF_MS}, not ${String(b.baseMs)}`);
    }
    if (b.capMs !== undefined && !isWhole(b.capMs, 1000, MAX_BACKOFF_MS)) {
      problems.push(`retry.backoff.capMs must be a whole number of ms from 1000 to ${MAX_BACKOFF_MS} (12 h, the queue's visibility limit), not ${String(b.capMs)}`);
    }
    if (isWhole(b.baseMs, 1000, MAX_BACKOFF_MS) && isWhole(b.capMs, 1000, MAX_BACKOFF_MS) && b.baseMs! > b.capMs!) {
      problems.push(`retry.backoff.baseMs (${b.baseMs}) must not exceed retry.backoff.capMs (${b.capMs})`);
    }
    if (b.jitter !== undefined && b.jitter !== 'full' && b.jitter !== 'none') {
      problems.push(`retry.backoff.jitter must be full or none, not '${String(b.jitter)}'`);
    }
  }
  return problems;
}
