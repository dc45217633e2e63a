// The unit author's test helper (public module: import it from 'src/work/testing.ts'):
//
//   const { outcome, error, run, trail } = await testUnit(sendInvoice, { invoiceId: '7' }, { sql, tenant });
//
// runs the handler once against a real database, without SQS, Redis or the relay: the payload is
// dispatched as any dispatch would (a real queued run, its `queued` event and outbox row), the attempt
// is registered (`running`, `received`), then the handler runs in the effect transaction with the
// same UnitRun a worker builds (run.transaction, run.progress, run.dispatch, run.publish, run.signal,
// the unit's timeout). Success commits the effect with `started` and `succeeded`; a failure rolls the
// effect back and settles the run as the worker would on the unit's last allowed receive when it is
// permanent (`failed`) and as a scheduled retry otherwise (`retrying`), and returns the classified
// error (unit-errors.ts classifyFailure) instead of throwing. Nothing is sent: the outbox rows stay
// pending, and there is no idempotency ledger or Redis gate (those are the runtime's, not the unit's).
import type { Sql, TxSql } from '../db/client.ts';
import { inUnitOfWork, type Actor } from '../db/unit-of-work.ts';
import { retryDelaySeconds } from './runtime/complete/backoff.ts';
import { createDispatcher, targetOfUnit } from './runtime/produce/dispatch.ts';
import { createFollowUps } from './runtime/produce/follow-up.ts';
import { appendTrailEvent, readRun, readTrail, setRunProgress, transitionRun, type RunRow, type RunScope, type TrailEvent, type TrailEventName } from './runtime/store/run-store.ts';
import { classifyFailure, UnitTimedOut, ValidationFailure } from './define/unit-errors.ts';
import type { DispatchedRun, UnitOutcome, UnitRun, WorkUnit } from './define/unit.ts';
import type { z } from 'zod';
import pino from 'pino';
import { raceAbort } from './runtime/execute/race-abort.ts';

export interface TestUnitOptions {
  sql: Sql;
  /** Tenant id of a tenant unit's run (needed unless `actor` carries one); omit for platform and system units. */
  tenant?: string;
  /** Who dispatches the run; default a system process (`test-unit`) bound to `tenant`. */
  actor?: Actor;
  /** Units `run.publish` reaches (the subscribers among them); default the unit alone. */
  units?: Iterable<WorkUnit>;
  /** Names the process in trail rows; default `test-unit`. */
  instance?: string;
}

/** A failure as the runtime classifies it. */
export type ClassifiedFailure = ReturnType<typeof classifyFailure>;

/** A trail event of the run, in causal order. */
export type TrailRow = TrailEvent;

export interface TestUnitResult {
  /** The handler's outcome as stored on the run; null when it failed. */
  outcome: UnitOutcome | null;
  /** The classified failure; null on success. */
  error: ClassifiedFailure | null;
  /** The run row after the attempt. */
  run: RunRow;
  /** The run's trail in order. */
  trail: TrailRow[];
  /** Follow-up runs the handler dispatched or published (committed with its effect on success). */
  followUps: DispatchedRun[];
}

/** Handlers log through run.logger; in a unit test those lines go nowhere. */
const silentLogger = pino({ level: 'silent' });

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Runs `unit`'s handler once on `payload` against the database of `options.sql`; see the file header. */
export async function testUnit<S extends z.ZodType>(
  unit: WorkUnit & { payload: S },
  payload: z.input<S>,
  options: TestUnitOptions,
): Promise<TestUnitResult> {
  const { sql } = options;
  const instance = options.instance ?? 'test-unit';
  const tenantId = options.actor ? (options.actor.kind === 'scheduler' ? null : (options.actor.tenantId ?? null)) : (options.tenant ?? null);
  const actor: Actor = options.actor ?? { kind: 'system', tenantId, label: 'test-unit' };
  const scope: RunScope = tenantId === null ? 'platform' : 'tenant';
  const units = new Map([...(options.units ?? [unit])].map((u) => [u.name, u]));
  units.set(unit.name, unit);

  // 1. Dispatch, exactly as the API or a use case would (the payload is checked here: a bad one throws).
  const dispatched = await inUnitOfWork(sql, actor, async (tx) => {
    // A subscriber under test gets its run through a publish that reaches it alone.
    const dispatcher = createDispatcher({
      resolve: (name) => (name === unit.name && unit.kind === 'task' ? targetOfUnit(unit) : undefined),
      subscribers: () => (unit.kind === 'subscriber' ? [targetOfUnit(unit)] : []),
      instance,
    });
    if (unit.kind === 'task') return dispatcher.dispatchTask(tx, unit.name, payload, { actor });
    const [run] = await dispatcher.publishEvent(tx, unit.event.type, unit.event.version, payload, { actor });
    return run!;
  });
  const runId = dispatched.runId;
  const key = { runId, tenantId };
  // The worker's own actor for every later statement: the worker process, bound to the run's tenant.
  const workerActor: Actor = { kind: 'system', tenantId, label: `worker:${unit.name}`.slice(0, 128) };
  const trail = (tx: TxSql, event: TrailEventName, extra: { errorCode?: string; errorType?: string; detail?: Record<string, unknown> } = {}) =>
    appendTrailEvent(tx, scope, { runId, tenantId, event, attempt: 1, receiveCount: 1, queue: unit.queue, workerInstance: instance, ...extra });

  // 2. Registration, in its own transaction as in the worker (progress() commits beside the effect).
  const running = await inUnitOfWork(sql, workerActor, async (tx) => {
    const row = await transitionRun(tx, scope, { ...key, to: 'running', from: ['queued'], attempts: 'increment' });
    await trail(tx, 'received');
    return row!;
  });

  // 3. The effect transaction: handler, then `succeeded` with the outcome, one commit.
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new UnitTimedOut(unit.name, unit.timeoutSeconds)), unit.timeoutSeconds * 1000);
  let followUpRuns: DispatchedRun[] = [];
  try {
    const outcome = await inUnitOfWork(sql, workerActor, async (tx) => {
      await tx`SELECT set_config('statement_timeout', ${String(unit.timeoutSeconds * 1000)}, true)`;
      await trail(tx, 'started');
      const parsed = unit.payload.safeParse(dispatched.envelope.payload);
      if (!parsed.success) throw new ValidationFailure(`payload of '${unit.name}' is invalid: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(payload)'} ${i.message}`).join('; ')}`);
      const followUps = createFollowUps({ tx, runId, correlationId: running.correlationId, tenantId, units, instance });
      const recorded: DispatchedRun[] = [];
      const runObject: UnitRun = {
        runId,
        name: unit.name,
        attempt: 1,
        scheduledFor: null,
        tenantId,
        correlationId: running.correlationId,
        async now() {
          const [row] = await sql<{ ms: number }[]>`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms`;
          return new Date(row!.ms);
        },
        logger: silentLogger,
        async progress(percent) {
          if (!Number.isFinite(percent) || percent < 0 || percent > 100) throw new ValidationFailure(`progress must be a number from 0 to 100, got ${String(percent)}`);
          const value = Math.round(percent);
          await inUnitOfWork(sql, workerActor, async (ptx) => {
            if (await setRunProgress(ptx, scope, key, value)) await appendTrailEvent(ptx, scope, { runId, tenantId, event: 'progress', attempt: 1, receiveCount: 1, queue: unit.queue, workerInstance: instance, detail: { percent: value } });
          });
        },
        transaction: tx,
        signal: controller.signal,
        async dispatch(u, p, o) {
          const run = await followUps.api.dispatch(u, p, o);
          recorded.push(run);
          return run;
        },
        async publish(e, p, o) {
          const runs = await followUps.api.publish(e, p, o);
          recorded.push(...runs);
          return runs;
        },
      };
      const returned = await raceAbort(Promise.resolve().then(() => unit.handler(parsed.data as never, runObject)), controller.signal);
      const result = returned === undefined ? {} : returned;
      if (!isPlainObject(result)) throw new ValidationFailure(`handler of '${unit.name}' must return a JSON object or nothing`);
      const done = await transitionRun(tx, scope, { ...key, to: 'succeeded', from: ['running'], outcome: result, progress: 100 });
      if (!done) throw new ValidationFailure(`run ${runId} left running while its handler ran`);
      await trail(tx, 'succeeded');
      followUpRuns = recorded;
      return result;
    });
    return { outcome, error: null, run: (await readRunOf(sql, scope, workerActor, key))!, trail: await readTrail(sql, scope, runId), followUps: followUpRuns };
  } catch (thrown) {
    const cause = controller.signal.aborted ? controller.signal.reason : thrown;
    const error = classifyFailure(cause);
    // 4. Settlement of the rolled-back attempt, as the worker records it.
    await inUnitOfWork(sql, workerActor, async (tx) => {
      const errorFields = { errorCode: error.code, errorType: error.type };
      if (error.permanent) {
        await transitionRun(tx, scope, { ...key, to: 'failed', from: ['running'] });
        await trail(tx, 'failed', { ...errorFields, detail: { message: error.message.slice(0, 1000), permanent: true } });
      } else {
        const retryInSeconds = retryDelaySeconds(unit, 1, {});
        await transitionRun(tx, scope, { ...key, to: 'retrying', from: ['running'] });
        await trail(tx, 'retry_scheduled', { ...errorFields, detail: { message: error.message.slice(0, 1000), retryInSeconds } });
      }
    });
    return { outcome: null, error, run: (await readRunOf(sql, scope, workerActor, key))!, trail: await readTrail(sql, scope, runId), followUps: [] };
  } finally {
    clearTimeout(timer);
  }
}

async function readRunOf(sql: Sql, scope: RunScope, actor: Actor, key: { runId: string; tenantId: string | null }): Promise<RunRow | null> {
  return inUnitOfWork(sql, actor, (tx) => readRun(tx, scope, key));
}

