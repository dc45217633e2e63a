// Schedules: one platform run per scheduled moment (trigger schedule, actor scheduler, origin row),
// overlap skip and allow, the in-process scheduler, and `svc schedule fire` for external schedulers.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTask } from '../../src/work/define/unit.ts';
import { waitFor } from '../support/wait-for.ts';
import { captureLogger } from '../../src/logging/logger.ts';
import { fireSchedule, startLocalScheduler, scheduledTask } from '../../src/work/runtime/maintain/scheduler.ts';
import { workersConfig } from '../../src/config/workers.ts';
import { ConfigError } from '../../src/config/parse.ts';
import { RUNTIME_UNITS, scheduledAllowTask, scheduledSkipTask } from '../fixtures/units/runtime-units.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';

let h: WorkHarness;
beforeAll(async () => {
  h = await workHarness();
});
afterAll(async () => h?.close());

const at = (iso: string) => new Date(iso);

describe('schedules', () => {
  it('a cron schedule fires at the minutes it matches (UTC): a firing between them belongs to the latest, once', async () => {
    const quarterly = defineTask({ name: 'fixture.scheduled_cron', queue: 'maintenance', context: 'system', schedule: 'cron(*/15 9-17 * * *)', overlap: 'allow', payload: z.object({}), handler: async () => ({}) });
    expect(await fireSchedule(h.sql, quarterly, at('2030-01-01T10:14:59Z'))).toMatchObject({ result: 'dispatched', scheduledFor: '2030-01-01T10:00:00.000Z' });
    expect(await fireSchedule(h.sql, quarterly, at('2030-01-01T10:05:00Z'))).toEqual({ result: 'already_fired', scheduledFor: '2030-01-01T10:00:00.000Z' });
    expect(await fireSchedule(h.sql, quarterly, at('2030-01-01T10:15:00Z'))).toMatchObject({ result: 'dispatched', scheduledFor: '2030-01-01T10:15:00.000Z' });
    // Outside the hours it names, a firing belongs to the last moment of the day before.
    expect(await fireSchedule(h.sql, quarterly, at('2030-01-02T03:00:00Z'))).toMatchObject({ result: 'dispatched', scheduledFor: '2030-01-01T17:45:00.000Z' });
    const origins = await h.sql`SELECT scheduled_for FROM platform_task_run_schedule_origins WHERE schedule_name = 'fixture.scheduled_cron' ORDER BY scheduled_for`;
    expect(origins.map((o) => new Date(o.scheduled_for as string).toISOString())).toEqual(['2030-01-01T10:00:00.000Z', '2030-01-01T10:15:00.000Z', '2030-01-01T17:45:00.000Z']);
  });

  it('R-SCH-04 a firing writes a scheduler run with its origin; a second firing of the same moment yields no second run', async () => {
    const first = await fireSchedule(h.sql, scheduledAllowTask, at('2030-01-01T10:00:30Z'));
    expect(first).toMatchObject({ result: 'dispatched', scheduledFor: '2030-01-01T10:00:00.000Z' });
    const again = await fireSchedule(h.sql, scheduledAllowTask, at('2030-01-01T10:00:59Z'));
    expect(again).toEqual({ result: 'already_fired', scheduledFor: '2030-01-01T10:00:00.000Z' });
    const runId = (first as { runId: string }).runId;
    const [run] = await h.sql`SELECT r.trigger, r.actor_kind, r.status, o.schedule_name, o.scheduled_for
                                FROM platform_task_runs r JOIN platform_task_run_schedule_origins o USING (run_id) WHERE run_id = ${runId}`;
    expect(run).toMatchObject({ trigger: 'schedule', actor_kind: 'scheduler', status: 'queued', schedule_name: 'fixture.scheduled_allow' });
    expect(new Date(run!.scheduled_for as string).toISOString()).toBe('2030-01-01T10:00:00.000Z');
    const [outbox] = await h.sql`SELECT count(*)::int AS n FROM platform_outbox_messages WHERE run_id = ${runId}`;
    expect(outbox!.n).toBe(1);
  });

  it('R-SCH-02 R-TRL-08 overlap skip: a moment whose previous execution is still active gets a skipped run, finished, with nothing sent', async () => {
    const first = await fireSchedule(h.sql, scheduledSkipTask, at('2030-01-01T11:00:00Z'));
    expect(first.result).toBe('dispatched');
    // The first run is still queued (no worker consumed it): the next moment is skipped.
    const second = await fireSchedule(h.sql, scheduledSkipTask, at('2030-01-01T11:01:00Z'));
    expect(second).toMatchObject({ result: 'skipped', activeRunId: (first as { runId: string }).runId });
    const skippedId = (second as { runId: string }).runId;
    const run = await h.run(skippedId);
    expect(run).toMatchObject({ status: 'skipped', attempts: 0 });
    expect(run!.finished_at).not.toBeNull();
    const trail = await h.trail(skippedId);
    expect(events(trail)).toEqual(['queued', 'skipped']);
    expect(trail[1]!.detail).toMatchObject({ overlap: 'skip' });
    const [outbox] = await h.sql`SELECT count(*)::int AS n FROM platform_outbox_messages WHERE run_id = ${skippedId}`;
    expect(outbox!.n).toBe(0);
  });

  it('R-SCH-03 overlap allow: an execution overlapping a still-active one is dispatched and runs', async () => {
    const a = await fireSchedule(h.sql, scheduledAllowTask, at('2030-01-01T12:00:00Z'));
    const b = await fireSchedule(h.sql, scheduledAllowTask, at('2030-01-01T12:01:00Z'));
    expect([a.result, b.result]).toEqual(['dispatched', 'dispatched']);
    await h.startWorkers({ queues: ['maintenance'] });
    await h.relay();
    for (const r of [a, b]) {
      const run = await h.waitForStatus((r as { runId: string }).runId, ['succeeded', 'failed']);
      expect(run.status).toBe('succeeded');
    }
  });

  it('R-SCH-01 R-SCH-04 the in-process scheduler fires the current moment once, even with two schedulers running', async () => {
    const { logger } = captureLogger('warn');
    const units = new Map([[scheduledAllowTask.name, scheduledAllowTask]]);
    const [s1, s2] = [1, 2].map((i) => startLocalScheduler({ sql: h.sql, units, tickMs: 30, logger, instance: `scheduler-${i}` }));
    const fired = () => h.sql`SELECT o.scheduled_for FROM platform_task_run_schedule_origins o
                              WHERE o.schedule_name = 'fixture.scheduled_allow' AND o.scheduled_for BETWEEN now() - interval '2 minutes' AND now()`;
    // Both tick every 30 ms from the same start: once the moment has its run, each has tried to fire it.
    await waitFor(async () => (await fired()).length >= 1, 10_000, { what: 'the current moment fired' });
    await Promise.all([s1!.stop(), s2!.stop()]);
    const rows = await fired();
    expect(rows.length).toBeGreaterThanOrEqual(1);
    expect(rows.length).toBeLessThanOrEqual(2); // a minute boundary may fall while they run
    expect(new Set(rows.map((r) => String(r.scheduled_for))).size).toBe(rows.length);
  });

  it('R-SCH-01 R-SCH-05 SVC_LOCAL_SCHEDULER=true is refused when NODE_ENV=production (staging runs as production: no in-process purge)', () => {
    const env = { QUEUES: 'default', SVC_SQS_ENDPOINT: 'http://127.0.0.1:1', SVC_LOCAL_SCHEDULER: 'true', NODE_ENV: 'production' };
    expect(() => workersConfig(env)).toThrow(ConfigError);
    expect(() => workersConfig(env)).toThrow(/SVC_LOCAL_SCHEDULER/);
    expect(() => workersConfig({ ...env, NODE_ENV: 'development' })).not.toThrow();
  });

  it('R-SCH-04 `svc schedule fire <name> --at <iso>` fires one moment for an external scheduler', () => {
    const root = path.resolve(import.meta.dirname, '..', '..');
    const runCli = () =>
      spawnSync(process.execPath, [path.join(root, 'src/main/cli.ts'), 'schedule', 'fire', 'fixture.scheduled_allow', '--at', '2031-05-05T05:05:05Z'], {
        env: { ...process.env, DATABASE_URL: h.db.url, REDIS_URL: h.redisUrl!, SVC_UNITS_ROOT: path.join(root, 'test/fixtures'), SVC_UNITS_DIR: 'units/schedulable' },
        encoding: 'utf8',
      });
    const first = runCli();
    expect(first.stderr).toBe('');
    expect(first.status).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ schedule: 'fixture.scheduled_allow', result: 'dispatched', scheduledFor: '2031-05-05T05:05:00.000Z' });
    const second = runCli();
    expect(JSON.parse(second.stdout)).toMatchObject({ result: 'already_fired' });
    expect(() => scheduledTask(RUNTIME_UNITS, 'fixture.effect')).toThrow(/no scheduled task/);
  });
});
