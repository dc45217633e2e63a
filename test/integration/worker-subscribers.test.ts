// One event, two subscribers, through the worker runtime on real services: each subscriber is a run
// of its own, so a subscriber failing permanently leaves the other's run, effect and message untouched.
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import { idempotencyKeyOf } from '../../src/work/runtime/store/idempotency.ts';
import { createDispatcher, type DispatchTarget } from '../../src/work/runtime/produce/dispatch.ts';
import { defineSubscriber, type SubscriberUnit, type WorkUnit } from '../../src/work/define/unit.ts';
import { ValidationFailure } from '../../src/work/define/unit-errors.ts';
import { RUNTIME_UNITS } from '../fixtures/units/runtime-units.ts';
import { events, SYSTEM_ACTOR, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';

const EVENT = { type: 'fixture.happened', version: 1 };
const payload = z.object({ key: z.string().min(1) });

/** Writes its effect, then refuses the event: a permanent failure. */
const refusingSubscriber = defineSubscriber({
  name: 'fixture.sub_refuses',
  event: EVENT,
  queue: 'default',
  context: 'system',
  timeoutSeconds: 5,
  payload,
  async handler(p, run) {
    await run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`;
    throw new ValidationFailure('this subscriber refuses the event');
  },
});

/** Writes its effect and succeeds. */
const acceptingSubscriber = defineSubscriber({
  name: 'fixture.sub_accepts',
  event: EVENT,
  queue: 'default',
  context: 'system',
  timeoutSeconds: 5,
  payload,
  async handler(p, run) {
    await run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`;
    return { accepted: p.key };
  },
});

const SUBSCRIBERS: SubscriberUnit[] = [refusingSubscriber, acceptingSubscriber];
const UNITS: ReadonlyMap<string, WorkUnit> = new Map([...RUNTIME_UNITS, ...SUBSCRIBERS.map((u) => [u.name, u] as const)]);
const target = (u: WorkUnit): DispatchTarget => ({ name: u.name, queue: u.queue, context: u.context, payload: u.payload });
const dispatcher = createDispatcher({
  resolve: () => undefined,
  subscribers: (type, version) => SUBSCRIBERS.filter((s) => s.event.type === type && s.event.version === version).map(target),
  instance: 'test-dispatcher',
});

let h: WorkHarness;

beforeAll(async () => {
  h = await workHarness({ units: UNITS });
  await h.startWorkers();
});
afterAll(async () => h?.close());

describe('event subscribers are independent', () => {
  it('R-OBX-09 R-WRK-03 one subscriber failing permanently is dead-lettered; the other subscriber of the same event succeeds untouched', async () => {
    const runs = await inUnitOfWork(h.sql, SYSTEM_ACTOR, (tx) =>
      dispatcher.publishEvent(tx, EVENT.type, EVENT.version, { key: 'obx09' }, { actor: SYSTEM_ACTOR }),
    );
    const refused = runs.find((r) => r.name === 'fixture.sub_refuses')!;
    const accepted = runs.find((r) => r.name === 'fixture.sub_accepts')!;
    expect(runs).toHaveLength(2);
    await h.relay();

    const failedRun = await h.waitForStatus(refused.runId, ['failed', 'succeeded']);
    const okRun = await h.waitForStatus(accepted.runId, ['failed', 'succeeded']);
    expect(failedRun).toMatchObject({ status: 'failed', attempts: 1 });
    expect(okRun).toMatchObject({ status: 'succeeded', attempts: 1, progress: 100, outcome: { accepted: 'obx09' } });

    // The failing run: failed and dead-lettered; its effect rolled back.
    const failedTrail = (await h.waitForEvent(refused.runId, 'dead_lettered')).filter((t) => t.event !== 'sent');
    expect(events(failedTrail)).toEqual(['queued', 'received', 'started', 'failed', 'dead_lettered']);
    expect(failedTrail.find((t) => t.event === 'failed')).toMatchObject({ error_code: 'VALIDATION_FAILED' });
    // The other run: its own trail only, no failure, no dead letter; its effect committed once.
    const okTrail = (await h.trail(accepted.runId)).filter((t) => t.event !== 'sent');
    expect(events(okTrail)).toEqual(['queued', 'received', 'started', 'succeeded']);
    const effects = await h.sql<{ run_id: string }[]>`SELECT run_id FROM fixture_effects WHERE key = 'obx09'`;
    expect(effects.map((e) => e.run_id)).toEqual([accepted.runId]);

    // Only the failing subscriber's message reached the dead-letter queue.
    const dlq = await h.drainDlq('default');
    const deadRuns = dlq.map((m) => (JSON.parse(m.body) as { run_id: string }).run_id);
    expect(deadRuns).toContain(refused.runId);
    expect(deadRuns).not.toContain(accepted.runId);
    // Each run's idempotency ledger row settled on its own.
    const ledgerStatus = async (name: string, runId: string) => {
      const [row] = await h.sql<{ status: string }[]>`
        SELECT status FROM platform_idempotency_keys WHERE idempotency_key = ${idempotencyKeyOf(name, runId)}`;
      return row?.status;
    };
    expect(await ledgerStatus(refused.name, refused.runId)).toBe('failed_permanent');
    expect(await ledgerStatus(accepted.name, accepted.runId)).toBe('completed');
  });
});
