// Exactly-once holes of the work runtime, on real services: a handler that
// writes after its attempt ended, and a duplicate delivery past the fifth receive or for a unit this
// worker does not know while another delivery executes the run.
import { ChangeMessageVisibilityCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { queueUrl } from '../../src/queue/names.ts';
import { fingerprintOf, idempotencyKeyOf } from '../../src/work/runtime/store/idempotency.ts';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import { RUNTIME_UNITS } from '../fixtures/units/runtime-units.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { waitFor } from '../support/wait-for.ts';

/** What the late-writing handler saw when it wrote after its attempt ended. */
const lateErrors: Array<{ use: string; code: unknown }> = [];

const lateWriter = defineTask({
  name: 'fixture.late_writer',
  queue: 'critical',
  context: 'system',
  concurrency: 2,
  timeoutSeconds: 1,
  payload: z.object({ key: z.string() }),
  async handler(p, run) {
    if (run.attempt === 1) {
      // Ignores run.signal: sleeps past its 1 s deadline, then writes as if nothing happened.
      await sleep(1600);
      for (const [use, write] of [
        ['transaction', () => run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`],
        ['unsafe', () => run.transaction.unsafe('INSERT INTO fixture_effects (run_id, key, attempt) VALUES ($1, $2, $3)', [run.runId, p.key, run.attempt])],
        ['savepoint', () => run.transaction.savepoint((sp) => sp`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`)],
        ['progress', () => run.progress(50)],
      ] as const) {
        try {
          await write();
          lateErrors.push({ use, code: 'none' });
        } catch (error) {
          lateErrors.push({ use, code: (error as { code?: unknown }).code });
        }
      }
      return { late: true };
    }
    await run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`;
    return { attempt: run.attempt };
  },
});

/** Attempt 1 writes its effect, then swallows a failed statement and returns as if all went well. */
const swallower = defineTask({
  name: 'fixture.swallower',
  queue: 'critical',
  context: 'system',
  concurrency: 2,
  timeoutSeconds: 5,
  payload: z.object({ key: z.string() }),
  async handler(p, run) {
    await run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`;
    if (run.attempt === 1) await run.transaction`SELECT 1 / 0`.catch(() => {});
    return { attempt: run.attempt };
  },
});

/** One execution at a time per worker on `bulk`: a busy worker does not receive the duplicate. */
const slowBulk = defineTask({
  name: 'fixture.slow_bulk',
  queue: 'bulk',
  context: 'system',
  concurrency: 1,
  timeoutSeconds: 8,
  payload: z.object({ key: z.string(), sleepMs: z.number() }),
  async handler(p, run) {
    await run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`;
    await sleep(p.sleepMs, undefined, { signal: run.signal });
    return { attempt: run.attempt };
  },
});

/** Its own statement fails with a cast error whose text is the finish's refusal of a key claimed meanwhile. */
const lookalike = defineTask({
  name: 'fixture.refusal_lookalike',
  queue: 'critical',
  context: 'system',
  concurrency: 2,
  timeoutSeconds: 5,
  payload: z.object({ text: z.string() }),
  async handler(p, run) {
    await run.transaction`SELECT ${p.text}::text::int`;
    return {};
  },
});

const units: ReadonlyMap<string, WorkUnit> = new Map([
  ...RUNTIME_UNITS,
  [lateWriter.name, lateWriter],
  [slowBulk.name, slowBulk],
  [swallower.name, swallower],
  [lookalike.name, lookalike],
]);

let h: WorkHarness;

beforeAll(async () => {
  h = await workHarness({ units });
  // `bulk` is left to the duplicate tests, which start their own runtimes on it.
  await h.startWorkers({ queues: ['critical', 'default', 'maintenance'] });
});
afterAll(async () => h?.close());

describe('exactly once', () => {
  it('R-UNT-03 R-OBX-16 a timed-out attempt that writes through run.transaction afterwards gets RUN_TRANSACTION_CLOSED and leaves no effect', async () => {
    const { runId } = await h.dispatch('fixture.late_writer', { key: 'late-write' });
    await h.relay();
    const run = await h.waitForStatus(runId, ['succeeded']);
    expect(run.outcome).toEqual({ attempt: 2 });
    // Wait until attempt 1 made every late use (it wakes 1.6 s after its start).
    const deadline = Date.now() + 10_000;
    while (lateErrors.length < 4 && Date.now() < deadline) await sleep(50);
    expect(lateErrors).toEqual([
      { use: 'transaction', code: 'RUN_TRANSACTION_CLOSED' },
      { use: 'unsafe', code: 'RUN_TRANSACTION_CLOSED' },
      { use: 'savepoint', code: 'RUN_TRANSACTION_CLOSED' },
      { use: 'progress', code: 'RUN_TRANSACTION_CLOSED' },
    ]);
    expect(await h.effects('late-write')).toBe(1);
    const [row] = await h.sql<{ attempt: number }[]>`SELECT attempt FROM fixture_effects WHERE key = 'late-write'`;
    expect(row!.attempt).toBe(2);
    // The late progress never reached the run.
    expect(events(await h.trail(runId))).not.toContain('progress');
  });

  it('a statement whose failure the handler swallows still fails the attempt: nothing of it commits, and the retry’s effect is the only one', async () => {
    const { runId } = await h.dispatch('fixture.swallower', { key: 'swallowed' });
    await h.relay();
    const run = await h.waitForStatus(runId, ['succeeded', 'failed']);
    expect(run.status).toBe('succeeded');
    expect(run.outcome).toEqual({ attempt: 2 });
    const rows = await h.sql<{ attempt: number }[]>`SELECT attempt FROM fixture_effects WHERE key = 'swallowed'`;
    expect(rows).toEqual([{ attempt: 2 }]);
    // Attempt 1 failed on the aborted transaction (its finish refused with 25P02), not as a commit.
    const retried = (await h.trail(runId)).filter((e) => e.event === 'retry_scheduled');
    expect(retried).toHaveLength(1);
    expect(JSON.stringify(retried[0])).toContain('25P02');
  });

  it('R-IDM-10 R-IDM-12 R-OBX-16 a key another execution records while the handler runs (after the opening looked) refuses the finish: nothing commits, and the retry replays that record', async () => {
    // The usual delivery claims a key new to the ledger in its finish. An execution that claimed the key
    // and let its lock go just as this one's opening looked is what the test's insert stands for.
    const { runId, envelope } = await h.dispatch('fixture.effect', { key: 'claimed-meanwhile', sleepMs: 1_500, sleepUntilAttempt: 1 });
    await h.relay();
    await h.waitForStatus(runId, ['running']);
    await h.sql`INSERT INTO platform_idempotency_keys (idempotency_key, request_fingerprint, status, outcome, expires_at)
                VALUES (${idempotencyKeyOf('fixture.effect', runId)}, ${fingerprintOf(envelope.payload)}, 'completed', ${h.sql.json({ by: 'elsewhere' })}, now() + interval '1 hour')`;
    const run = await h.waitForStatus(runId, ['succeeded', 'failed']);
    expect(run.status).toBe('succeeded');
    expect(run.outcome).toEqual({ by: 'elsewhere' });
    expect(run.attempts).toBe(2);
    // Attempt 1's effect rolled back with its refused finish; the retry replayed without running the handler.
    expect(await h.effects('claimed-meanwhile')).toBe(0);
    const trail = (await h.trail(runId)).filter((e) => e.event !== 'sent');
    expect(events(trail)).toEqual(['queued', 'received', 'started', 'retry_scheduled', 'received', 'succeeded']);
    expect(trail[3]).toMatchObject({ error_code: 'IDEMPOTENCY_KEY_CLAIMED_MEANWHILE' });
    expect(trail[5]!.detail).toEqual({ replayed: true });
  });

  it("a handler's own error that reads like the finish's refusal stays the permanent error it is", async () => {
    const { runId } = await h.dispatch('fixture.refusal_lookalike', { text: 'the key of run x was claimed by another execution before now' });
    await h.relay();
    const run = await h.waitForStatus(runId, ['succeeded', 'failed']);
    expect(run.status).toBe('failed');
    expect(run.attempts).toBe(1);
    const failed = (await h.trail(runId)).find((e) => e.event === 'failed');
    expect(failed).toMatchObject({ error_code: 'PG_22P02' });
  });

  it('R-WRK-06 R-OBX-16 a delivery that cannot take its run\'s execution lock writes `started` before its handler: its row locks the run row while the handler runs', async () => {
    // The lock held elsewhere (a delivery that will not execute holds it while it registers, or a run
    // whose id hashes alike): the run's execution then shows through the `started` row's lock instead.
    const { runId } = await h.dispatch('fixture.effect', { key: 'run-lock-held', sleepMs: 3_000 });
    const holder = await h.sql.reserve();
    try {
      await holder`SELECT pg_advisory_lock(hashtext('svc.run-executing'), hashtext(${runId}::text))`;
      await h.relay();
      await h.waitForStatus(runId, ['running']);
      // Within the handler's 3 s: the row is locked (a fresh claim in the finish would leave it free).
      const locked = async () => (await h.sql.begin((tx) => tx`SELECT 1 FROM platform_task_runs WHERE run_id = ${runId} FOR UPDATE SKIP LOCKED`)).length === 0;
      await waitFor(locked, 2_500, { what: 'the run row locked by its `started` row' });
      expect(await h.effects('run-lock-held')).toBe(0);
    } finally {
      await holder`SELECT pg_advisory_unlock_all()`;
      holder.release();
    }
    expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    expect(events((await h.trail(runId)).filter((e) => e.event !== 'sent'))).toEqual(['queued', 'received', 'started', 'succeeded']);
  });

  /** Starts a runtime on `bulk` that executes `runId`, and waits until it is executing it. */
  async function executing(runId: string) {
    const executor = await h.startWorkers({ queues: ['bulk'], workerInstance: 'executor' });
    await h.relay();
    await h.waitForStatus(runId, ['running']);
    return executor;
  }

  it('R-WRK-05 R-OBX-16 a duplicate past the fifth receive never fails a run another delivery is executing', async () => {
    const { runId, envelope } = await h.dispatch('fixture.slow_bulk', { key: 'dup-exhausted', sleepMs: 5_000 });
    // The duplicate: received five times by hand (workers crashing), then hidden until we release it.
    const url = queueUrl(h.queueUrlPrefix, 'bulk');
    await h.sendRaw('bulk', envelope);
    let handle = '';
    for (let received = 0; received < 5; ) {
      const out = await h.sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1, WaitTimeSeconds: 1, VisibilityTimeout: 0 }));
      for (const m of out.Messages ?? []) {
        received++;
        handle = m.ReceiptHandle!;
        await h.sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: handle, VisibilityTimeout: received < 5 ? 0 : 600 }));
      }
    }
    const executor = await executing(runId);
    const other = await h.startWorkers({ queues: ['bulk'], workerInstance: 'duplicate' });
    await h.sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: handle, VisibilityTimeout: 0 }));
    const trail = await h.waitForReceives(runId, 2);
    expect(trail.find((t) => t.event === 'received' && t.receive_count === 6)).toMatchObject({ worker_instance: 'duplicate', detail: { held: 'executing' } });
    const run = await h.waitForStatus(runId, ['succeeded', 'failed']);
    expect(run.status).toBe('succeeded');
    expect(await h.effects('dup-exhausted')).toBe(1);
    expect(events(await h.trail(runId))).not.toContain('failed');
    expect(events(await h.trail(runId))).not.toContain('dead_lettered');
    await Promise.all([executor.stop(), other.stop()]);
  });

  it('R-WRK-06 R-OBX-16 a worker that lacks the unit (rolling deploy) never moves a run another worker is executing', async () => {
    const { runId, envelope } = await h.dispatch('fixture.slow_bulk', { key: 'dup-unknown', sleepMs: 5_000 });
    const executor = await executing(runId);
    const old = await h.startWorkers({ queues: ['bulk'], workerInstance: 'old-build', units: RUNTIME_UNITS });
    await h.sendRaw('bulk', envelope);
    const trail = await h.waitForReceives(runId, 2);
    expect(trail.find((t) => t.event === 'received' && t.worker_instance === 'old-build')).toMatchObject({ detail: { held: 'executing' } });
    const run = await h.waitForStatus(runId, ['succeeded', 'failed']);
    expect(run.status).toBe('succeeded');
    expect(run.attempts).toBe(1);
    expect(await h.effects('dup-unknown')).toBe(1);
    expect(events(await h.trail(runId))).not.toContain('retry_scheduled');
    await Promise.all([executor.stop(), old.stop()]);
  });
});
