// The trail of a run, read ordered by occurred_at then id, tells a causal story on every path of the
// runtime (issue 11, item 4): sent before received, received before started, started before progress
// and before the attempt's end, the final status event at exactly the run's finished_at, nothing of an
// attempt after its end. And a delivery whose outbox row is still pending (the relay died between
// SendMessageBatch and its commit) records the send itself, so the relay does not send it again.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { relayPass } from '../../src/work/relay.ts';
import { fireSchedule } from '../../src/work/scheduler.ts';
import { defineTask, type WorkUnit } from '../../src/work/unit.ts';
import { effectPayload, effectTask, RUNTIME_UNITS, scheduledSkipTask } from '../fixtures/units/runtime-units.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';

/** fixture.effect on `bulk`, which only the releasing runtime of the release path consumes. */
const bulkEffect = defineTask({ name: 'fixture.bulk_effect', queue: 'bulk', context: 'system', timeoutSeconds: 30, payload: effectPayload, handler: effectTask.handler as never });
const units: ReadonlyMap<string, WorkUnit> = new Map([...RUNTIME_UNITS, [bulkEffect.name, bulkEffect]]);

let h: WorkHarness;

beforeAll(async () => {
  h = await workHarness({ units });
  // `maintenance` is left unconsumed: a scheduled run stays active there, so the next moment skips.
  await h.startWorkers({ queues: ['critical', 'default'] });
});
afterAll(async () => h?.close());

interface CausalRow {
  event: string;
  attempt: number;
  detail: Record<string, unknown>;
  at_finish: boolean | null;
}

const ATTEMPT_ENDS = new Set(['retry_scheduled', 'failed', 'succeeded', 'released_on_shutdown']);
const FINAL = new Set(['succeeded', 'failed', 'skipped']);

/** Reads the trail as the issue says a reader does, and lists every break of causality (empty: causal). */
async function causalProblems(runId: string): Promise<{ problems: string[]; events: string[] }> {
  const rows = await h.sql<CausalRow[]>`
    SELECT e.event, e.attempt, e.detail, e.occurred_at = r.finished_at AS at_finish
      FROM (SELECT run_id, event, attempt, detail, occurred_at, id FROM platform_task_run_events WHERE run_id = ${runId}
            UNION ALL SELECT run_id, event, attempt, detail, occurred_at, id FROM task_run_events WHERE run_id = ${runId}) e
      JOIN (SELECT run_id, finished_at, status FROM platform_task_runs UNION ALL SELECT run_id, finished_at, status FROM task_runs) r USING (run_id)
     ORDER BY e.occurred_at, e.id`;
  const [run] = await h.sql<{ status: string; finished: boolean }[]>`
    SELECT status, finished_at IS NOT NULL AS finished FROM platform_task_runs WHERE run_id = ${runId}
    UNION ALL SELECT status, finished_at IS NOT NULL FROM task_runs WHERE run_id = ${runId}`;
  const problems: string[] = [];
  const seen: CausalRow[] = [];
  let finalSeen = false;
  rows.forEach((row, i) => {
    const where = `#${i} ${row.event}(${row.attempt})`;
    const before = (event: string, attempt?: number) => seen.some((s) => s.event === event && (attempt === undefined || s.attempt === attempt));
    if (i === 0 && row.event !== 'queued') problems.push(`${where}: the trail does not start with queued`);
    if (row.event === 'received' && !before('sent') && !before('skipped')) problems.push(`${where}: received before any sent`);
    if (row.event === 'started' && !before('received', row.attempt)) problems.push(`${where}: started before its received`);
    if (row.event === 'progress' && !before('started', row.attempt)) problems.push(`${where}: progress before started`);
    if (ATTEMPT_ENDS.has(row.event) && row.attempt > 0 && !row.detail.replayed && !before('started', row.attempt)) {
      problems.push(`${where}: the attempt ended before it started`);
    }
    if ((row.event === 'started' || row.event === 'progress') && seen.some((s) => ATTEMPT_ENDS.has(s.event) && s.attempt === row.attempt && row.attempt > 0)) {
      problems.push(`${where}: after the end of its attempt`);
    }
    if (row.event === 'dead_lettered' && !before('failed')) problems.push(`${where}: dead_lettered before failed`);
    if (FINAL.has(row.event)) {
      if (finalSeen) problems.push(`${where}: a second final event`);
      finalSeen = true;
      if (row.at_finish !== true) problems.push(`${where}: the final event is not at the run's finished_at`);
    } else if (finalSeen && !['dead_lettered', 'received'].includes(row.event)) {
      problems.push(`${where}: after the final event`);
    }
    seen.push(row);
  });
  if (run && FINAL.has(run.status) && !finalSeen) problems.push(`the run is ${run.status} but its trail has no final event`);
  if (run && run.finished !== FINAL.has(run.status)) problems.push(`finished_at does not match status ${run.status}`);
  return { problems, events: rows.map((r) => `${r.event}(${r.attempt})`) };
}

async function expectCausal(path: string, runId: string) {
  const { problems, events } = await causalProblems(runId);
  expect({ path, problems, events }).toEqual({ path, problems: [], events });
}

describe('the trail is causal', () => {
  it('R-TRL-08 R-WRK-02 every path reads in causal order by occurred_at, and the final event is at finished_at', async () => {
    const paths: Array<[string, string]> = [];
    const dispatch = async (path: string, name: string, payload: unknown) => {
      const { runId } = await h.dispatch(name, payload);
      paths.push([path, runId]);
      return runId;
    };
    const success = await dispatch('success', 'fixture.effect', { key: `c-ok-${randomUUID()}`, progress: 40 });
    const transient = await dispatch('transient', 'fixture.effect', { key: `c-tr-${randomUUID()}`, progress: 30, fail: 'transient', failUntilAttempt: 1 });
    const permanent = await dispatch('permanent after progress', 'fixture.effect', { key: `c-pe-${randomUUID()}`, progress: 50, fail: 'permanent' });
    const timeout = await dispatch('timeout', 'fixture.timeout', { key: `c-to-${randomUUID()}`, progress: 20, sleepMs: 3_000, sleepUntilAttempt: 1 });
    const businessKey = `c-bk-${randomUUID()}`;
    const first = await dispatch('business key, first', 'fixture.business_key', { key: businessKey });
    await h.relay();
    await h.waitForStatus(first, ['succeeded']);
    const replay = await dispatch('replay', 'fixture.business_key', { key: businessKey });
    await h.relay();
    for (const runId of [success, transient, timeout, replay]) await h.waitForStatus(runId, ['succeeded'], 30_000);
    await h.waitForStatus(permanent, ['failed']);
    await h.waitForEvent(permanent, 'dead_lettered');

    // A duplicate of a finished run.
    const { envelope } = await h.dispatch('fixture.effect', { key: `c-dup-${randomUUID()}` });
    const duplicate = envelope.run_id;
    paths.push(['duplicate', duplicate]);
    await h.relay();
    await h.waitForStatus(duplicate, ['succeeded']);
    await h.sendRaw('default', envelope);
    await h.waitForReceives(duplicate, 2);

    // A scheduled moment skipped while an earlier run of the schedule is still active.
    const active = await fireSchedule(h.sql, scheduledSkipTask, new Date('2031-01-01T10:00:00Z'));
    const skipped = await fireSchedule(h.sql, scheduledSkipTask, new Date('2031-01-01T10:01:00Z'));
    expect([active.result, skipped.result]).toEqual(['dispatched', 'skipped']);
    if (skipped.result === 'skipped') paths.push(['skip', skipped.runId]);

    // A run released on shutdown (a runtime of its own with a short drain), then finished by another.
    const releasing = await h.startWorkers({ queues: ['bulk'], drainMs: 200, workerInstance: 'releasing' });
    const released = (await h.dispatch('fixture.bulk_effect', { key: `c-rel-${randomUUID()}`, progress: 10, sleepMs: 20_000, sleepUntilAttempt: 1 })).runId;
    paths.push(['release on shutdown', released]);
    await h.relay();
    await h.waitForEvent(released, 'progress');
    await releasing.stop();
    await h.waitForEvent(released, 'released_on_shutdown');

    // Every path judged at once, so a failure names all the broken ones.
    const verdicts = [];
    for (const [path, runId] of paths) verdicts.push({ path, ...(await causalProblems(runId)) });
    expect(verdicts.filter((v) => v.problems.length > 0)).toEqual([]);
    expect(verdicts.map((v) => v.path)).toHaveLength(9);
  });

  it('R-OBX-16 R-TRL-08 a delivery of a message whose outbox row is still pending records the send first, and the relay does not send it again', async () => {
    const { runId, envelope } = await h.dispatch('fixture.effect', { key: `c-crash-${randomUUID()}` });
    // As if the relay died after SendMessageBatch and before its commit: the message is in the queue,
    // the outbox row still pending.
    await h.sendRaw('default', envelope);
    await h.waitForStatus(runId, ['succeeded']);
    const [row] = await h.sql<{ sent: boolean }[]>`SELECT sent_at IS NOT NULL AS sent FROM platform_outbox_messages WHERE run_id = ${runId}`;
    expect(row!.sent).toBe(true);
    await relayPass(h.sql, h.sqs, h.queueUrlPrefix, { instance: 'test-relay' });
    const trail = await h.trail(runId);
    expect(trail.map((t) => t.event)).toEqual(['queued', 'sent', 'received', 'started', 'succeeded']);
    expect(trail[1]!.detail).toMatchObject({ recorded_by: 'delivery' });
    await expectCausal('sent by the delivery', runId);
  });
});
