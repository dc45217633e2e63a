// Schedules: a scheduled task is dispatched once per scheduled moment as a platform run with trigger
// `schedule` and actor `scheduler`, plus its schedule-origin row. The origin is unique on (schedule
// name, moment), so any number of schedulers (the in-process one, cron calling `svc schedule fire`, a
// cloud scheduler) yield one run per moment. With overlap `skip` a moment whose previous execution is
// still active gets a run that goes straight from `queued` to `skipped` (no message is sent); with
// `allow` it is dispatched regardless.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Sql, TxSql } from '../../../db/client.ts';
import { inUnitOfWork } from '../../../db/unit-of-work.ts';
import { signalOutbox } from '../../../kv/wake.ts';
import { evictRunStatus } from '../../../kv/run-status-cache.ts';
import { CodedError } from '../../../errors/coded-error.ts';
import { createDispatcher, defaultInstanceLabel, targetOfUnit } from '../produce/dispatch.ts';
import {
  ACTIVE_RUN_STATUSES,
  insertRun,
  insertScheduleOrigin,
  transitionRun,
} from '../store/run-store.ts';
import { appendTrailEvent } from '../store/trail.ts';
import { parseScheduleExpression, scheduledMomentAt } from '../../define/schedule-expression.ts';
import type { TaskUnit, WorkUnit } from '../../define/unit.ts';

export const SCHEDULER_ACTOR_LABEL = 'scheduler';

export class ScheduleError extends CodedError<'SCHEDULE_NOT_FOUND' | 'SCHEDULE_INVALID'> {}

export type FireResult =
  | { result: 'dispatched'; runId: string; scheduledFor: string }
  | { result: 'skipped'; runId: string; scheduledFor: string; activeRunId: string }
  | { result: 'already_fired'; scheduledFor: string };

export interface FireOptions {
  /** Identifies this firing in the origin row (1..128 chars). Default a new uuid. */
  executionId?: string;
  /** Names the firing process in the trail. Default `<hostname>:<pid>`. */
  instance?: string;
  /** Pushes the wake signal after commit. */
  redis?: Redis | undefined;
}

/** A task with a valid schedule, or a coded error naming what is wrong. */
export function scheduledTask(units: ReadonlyMap<string, WorkUnit>, name: string): TaskUnit & { schedule: string } {
  const unit = units.get(name);
  if (!unit || unit.kind !== 'task' || unit.schedule === null) {
    const known = [...units.values()].filter((u) => u.kind === 'task' && u.schedule !== null).map((u) => u.name);
    throw new ScheduleError('SCHEDULE_NOT_FOUND', `no scheduled task named '${name}'; scheduled tasks: ${known.join(', ') || '(none)'}`);
  }
  return unit as TaskUnit & { schedule: string };
}

/** The database clock in ms since the epoch: every scheduler agrees on it. */
export async function databaseNowMs(sql: Sql | TxSql): Promise<number> {
  const [row] = await sql<{ ms: number }[]>`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms`;
  return row!.ms;
}

/**
 * Fires one scheduled moment of `unit`. `at` defaults to the database clock; the moment is the latest
 * moment of the schedule not after `at` (schedule-expression.ts scheduledMomentAt).
 */
export async function fireSchedule(sql: Sql, unit: TaskUnit, at: Date | undefined, options: FireOptions = {}): Promise<FireResult> {
  if (unit.schedule === null) throw new ScheduleError('SCHEDULE_NOT_FOUND', `task '${unit.name}' has no schedule`);
  const rate = parseScheduleExpression(unit.schedule);
  const instance = options.instance ?? defaultInstanceLabel();
  const executionId = (options.executionId ?? randomUUID()).slice(0, 128);
  const dispatcher = createDispatcher({
    resolve: (name) => (name === unit.name ? targetOfUnit(unit) : undefined),
    instance,
  });
  const result = await inUnitOfWork(sql, { kind: 'scheduler', label: SCHEDULER_ACTOR_LABEL }, async (tx): Promise<FireResult> => {
    const atMs = at ? at.getTime() : await databaseNowMs(tx);
    const scheduledFor = new Date(scheduledMomentAt(rate, atMs)).toISOString();
    // One firing of this schedule at a time, so the overlap check and the insert see the same state.
    await tx`SELECT pg_advisory_xact_lock(hashtextextended(${`svc:schedule:${unit.name}`}, 0))`;
    const taken = await tx`SELECT 1 FROM platform_task_run_schedule_origins
                            WHERE schedule_name = ${unit.name} AND scheduled_for = ${scheduledFor}`;
    if (taken.length > 0) return { result: 'already_fired', scheduledFor };
    if (unit.overlap !== 'allow') {
      const [active] = await tx<{ run_id: string }[]>`
        SELECT run_id FROM platform_task_runs
         WHERE name = ${unit.name} AND status = ANY(${ACTIVE_RUN_STATUSES as string[]}::text[])
         ORDER BY queued_at DESC LIMIT 1`;
      if (active) {
        const runId = await recordSkipped(tx, unit, scheduledFor, executionId, instance, active.run_id);
        return runId === null
          ? { result: 'already_fired', scheduledFor }
          : { result: 'skipped', runId, scheduledFor, activeRunId: active.run_id };
      }
    }
    const run = await dispatcher.dispatchScheduled(tx, unit.name, {}, { scheduleName: unit.name, executionId, scheduledFor });
    return run === null ? { result: 'already_fired', scheduledFor } : { result: 'dispatched', runId: run.runId, scheduledFor };
  });
  if (result.result === 'dispatched') await signalOutbox(options.redis);
  if (result.result !== 'already_fired') await evictRunStatus(options.redis, result.runId);
  return result;
}

/** The run of a skipped moment: queued, then skipped at once (finished_at set); nothing is sent. */
async function recordSkipped(
  tx: TxSql,
  unit: TaskUnit,
  scheduledFor: string,
  executionId: string,
  instance: string,
  activeRunId: string,
): Promise<string | null> {
  const runId = randomUUID();
  const correlationId = randomUUID();
  const inserted = await tx.savepoint(async (sp) => {
    const t = sp as unknown as TxSql;
    await insertRun(t, 'platform', {
      runId,
      name: unit.name,
      queue: unit.queue,
      trigger: 'schedule',
      actorKind: 'scheduler',
      actorLabel: SCHEDULER_ACTOR_LABEL,
      correlationId,
      causationId: correlationId,
    });
    if (!(await insertScheduleOrigin(t, { runId, scheduleName: unit.name, executionId, scheduledFor }))) throw new MomentTaken();
    return true;
  }).catch((error: unknown) => {
    if (error instanceof MomentTaken) return false;
    throw error;
  });
  if (!inserted) return null;
  const base = { runId, tenantId: null, attempt: 0, queue: unit.queue, workerInstance: instance };
  await appendTrailEvent(tx, 'platform', { ...base, event: 'queued', detail: { trigger: 'schedule' } });
  await transitionRun(tx, 'platform', { runId, to: 'skipped', from: ['queued'] });
  await appendTrailEvent(tx, 'platform', { ...base, event: 'skipped', detail: { overlap: 'skip', activeRunId, scheduledFor }, occurredAt: 'run_finished' });
  return runId;
}

class MomentTaken extends Error {}

export interface LocalScheduler {
  stop(): Promise<void>;
}

/**
 * The in-process scheduler (SVC_LOCAL_SCHEDULER=true, development only): every tick it fires the
 * current moment of each scheduled task once. A moment already fired (by this or any other
 * scheduler) is a no-op; moments missed while nothing ran are not replayed, only the current one.
 */
export function startLocalScheduler(options: {
  sql: Sql;
  redis?: Redis | undefined;
  units: ReadonlyMap<string, WorkUnit>;
  tickMs: number;
  logger: Logger;
  instance?: string;
}): LocalScheduler {
  const tasks = [...options.units.values()].filter((u): u is TaskUnit => u.kind === 'task' && u.schedule !== null);
  const lastFired = new Map<string, number>();
  let stopping = false;
  let timer: NodeJS.Timeout | undefined;
  let wake: (() => void) | undefined;

  async function tick(): Promise<void> {
    const nowMs = await databaseNowMs(options.sql);
    for (const unit of tasks) {
      if (stopping) return;
      const moment = scheduledMomentAt(parseScheduleExpression(unit.schedule!), nowMs);
      if (lastFired.get(unit.name) === moment) continue;
      const result = await fireSchedule(options.sql, unit, new Date(moment), { redis: options.redis, instance: options.instance });
      lastFired.set(unit.name, moment);
      if (result.result !== 'already_fired') options.logger.info({ schedule: unit.name, ...result }, 'schedule fired');
    }
  }

  const loop = (async () => {
    while (!stopping) {
      try {
        await tick();
      } catch (error) {
        options.logger.error({ err: error }, 'local scheduler tick failed; trying again next tick');
      }
      if (stopping) break;
      await new Promise<void>((resolve) => {
        wake = resolve;
        timer = setTimeout(resolve, options.tickMs);
      });
    }
  })();

  return {
    async stop() {
      stopping = true;
      clearTimeout(timer);
      wake?.();
      await loop;
    },
  };
}
