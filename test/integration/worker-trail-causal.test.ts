// The trail of a run, read ordered by occurred_at then id, tells a causal story on every path of the
// runtime: sent before received, received before started, started before progress
// and before the attempt's end, the final status event at exactly the run's finished_at, nothing of an
// attempt after its end. And a delivery whose outbox row is still pending (the relay died between
// SendMessageBatch and its commit) records the send itself, so the relay does not send it again.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { relayPass } from '../../src/work/runtime/produce/relay.ts';
import { fireSchedule } from '../../src/work/runtime/maintain/scheduler.ts';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import { effectPayload, effectTask, RUNTIME_UNITS, scheduledSkipTask } from '../fixtures/units/runtime-units.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
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

async function expectCausal(path: string, runId: string) {
  const { problems, events } = await causalProblems(h.sql, runId);
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
    for (const [path, runId] of paths) verdicts.push({ path, ...(await causalProblems(h.sql, runId)) });
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
