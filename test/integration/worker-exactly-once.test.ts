// Exactly-once holes of the work runtime (issue 11, items 1 and 2), on real services: a handler that
// writes after its attempt ended, and a duplicate delivery past the fifth receive or for a unit this
// worker does not know while another delivery executes the run.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTask, type WorkUnit } from '../../src/work/unit.ts';
import { RUNTIME_UNITS } from '../fixtures/units/runtime-units.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';

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

const units: ReadonlyMap<string, WorkUnit> = new Map([...RUNTIME_UNITS, [lateWriter.name, lateWriter]]);

let h: WorkHarness;

beforeAll(async () => {
  h = await workHarness({ units });
  await h.startWorkers();
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
});
