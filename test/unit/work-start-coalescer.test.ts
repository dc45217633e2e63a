// The registration coalescer's fallback: when the shared statement fails, each delivery registers alone
// and meets its own error; a failure no delivery repeats alone (the shared statement itself broken) is
// said once per process. The statements are stubs here (pure logic); the real ones are exercised by the
// worker integration tests (worker-registration).
import { describe, expect, it } from 'vitest';
import type { Sql } from '../../src/db/client.ts';
import { StartCoalescer, type StartStatements } from '../../src/work/runtime/execute/start-coalescer.ts';
import type { StartedDelivery } from '../../src/work/runtime/store/run-store.ts';
import { withStageBounds } from '../../src/db/stage-deadline.ts';
import { waitFor } from '../support/wait-for.ts';

const actor = { tenantId: '1', userId: '', process: 'worker' };
const sql = {} as Sql;

function registered(runId: string): StartedDelivery {
  return { runId } as unknown as StartedDelivery;
}

function statements(o: { shared: () => Promise<never>; oneFails?: (runId: string) => boolean }) {
  const calls = { shared: 0, one: [] as string[] };
  const s: StartStatements = {
    shared: async () => {
      calls.shared += 1;
      return o.shared();
    },
    one: async (_sql, _scope, _actor, d) => {
      calls.one.push(d.runId);
      if (o.oneFails?.(d.runId)) throw new Error(`run ${d.runId} refused`);
      return registered(d.runId);
    },
  };
  return { s, calls };
}

function recorder() {
  const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
  return { warnings, log: { warn: (fields: Record<string, unknown>, message: string) => void warnings.push({ fields, message }) } };
}

/** Three deliveries in one event-loop turn: one shared statement. */
function startThree(c: StartCoalescer, prefix: string) {
  return ['a', 'b', 'c'].map((n) =>
    c.start('tenant', actor, '1', 'w1', { runId: `${prefix}-${n}`, receiveCount: 1, messageId: `m-${prefix}-${n}` }).then(
      (v) => ({ ok: true as const, v }),
      (e: unknown) => ({ ok: false as const, e }),
    ),
  );
}

describe('registration coalescer fallback', () => {
  it('a shared statement that fails while every delivery registers alone is warned about once per process', async () => {
    const { warnings, log } = recorder();
    const { s, calls } = statements({ shared: async () => Promise.reject(new Error('syntax error in the shared statement')) });
    const c = new StartCoalescer(sql, log as never, s);

    const first = await Promise.all(startThree(c, 'r1'));
    expect(first.map((r) => r.ok && (r.v as unknown as { runId: string }).runId)).toEqual(['r1-a', 'r1-b', 'r1-c']);
    const second = await Promise.all(startThree(c, 'r2'));
    expect(second.every((r) => r.ok)).toBe(true);

    expect(calls.shared).toBe(2);
    expect(calls.one).toHaveLength(6);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.message).toMatch(/registered alone/);
    expect(warnings[0]!.fields.deliveries).toBe(3);
    expect(String(warnings[0]!.fields.err)).toMatch(/syntax error in the shared statement/);
  });

  it("a shared failure that one delivery's own registration repeats is that delivery's error, not a warning", async () => {
    const { warnings, log } = recorder();
    const { s, calls } = statements({ shared: async () => Promise.reject(new Error('run r1-b refused')), oneFails: (id) => id === 'r1-b' });
    const c = new StartCoalescer(sql, log as never, s);

    const results = await Promise.all(startThree(c, 'r1'));
    expect(results.map((r) => r.ok)).toEqual([true, false, true]);
    expect(String((results[1] as { e: unknown }).e)).toMatch(/run r1-b refused/);
    expect(calls.one).toEqual(['r1-a', 'r1-b', 'r1-c']);
    expect(warnings).toHaveLength(0);
  });

  it('a shared statement that failed in passing (a deadlock, a lost connection) is not warned about, and leaves the warning for a real breakage', async () => {
    const { warnings, log } = recorder();
    const failures = [Object.assign(new Error('deadlock detected'), { code: '40P01' }), Object.assign(new Error('write CONNECTION_CLOSED'), { code: 'CONNECTION_CLOSED' }), Object.assign(new Error('column "x" does not exist'), { code: '42703' })];
    const { s } = statements({ shared: async () => Promise.reject(failures.shift()!) });
    const c = new StartCoalescer(sql, log as never, s);
    for (const round of ['r1', 'r2']) expect((await Promise.all(startThree(c, round))).every((r) => r.ok)).toBe(true);
    expect(warnings).toHaveLength(0);
    expect((await Promise.all(startThree(c, 'r3'))).every((r) => r.ok)).toBe(true);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.fields.code).toBe('42703');
  });

  it('a lone delivery never takes the shared statement', async () => {
    const { warnings, log } = recorder();
    const { s, calls } = statements({ shared: async () => Promise.reject(new Error('never called')) });
    const c = new StartCoalescer(sql, log as never, s);
    const started = await c.start('tenant', actor, '1', 'w1', { runId: 'solo', receiveCount: 1, messageId: 'm' });
    expect(started).toEqual(registered('solo'));
    expect(calls.shared).toBe(0);
    expect(warnings).toHaveLength(0);
  });

  it("while a group's statement is out, its next registrations wait for it and then go together", async () => {
    const answers: Array<() => void> = [];
    const shared: Array<string[]> = [];
    const s: StartStatements = {
      shared: (_sql, _scope, _actor, _tenant, _worker, deliveries) =>
        new Promise((resolve) => {
          shared.push(deliveries.map((d) => d.runId));
          answers.push(() => resolve(new Map(deliveries.map((d) => [d.runId, registered(d.runId)]))));
        }),
      one: async (_sql, _scope, _actor, d) => registered(d.runId),
    };
    const c = new StartCoalescer(sql, undefined, s);
    const first = startThree(c, 'r1');
    await new Promise((r) => setImmediate(r));
    const second = [...startThree(c, 'r2'), ...startThree(c, 'r3')];
    await new Promise((r) => setImmediate(r));
    expect(shared).toHaveLength(1);
    answers[0]!();
    expect((await Promise.all(first)).every((r) => r.ok)).toBe(true);
    await waitFor(() => shared.length === 2, 2_000);
    expect(shared[1]).toEqual(['r2-a', 'r2-b', 'r2-c', 'r3-a', 'r3-b', 'r3-c']);
    answers[1]!();
    expect((await Promise.all(second)).every((r) => r.ok)).toBe(true);
  });

  it('a statement the driver never answers holds the next ones no longer than a stage deadline', async () => {
    const shared: Array<string[]> = [];
    const s: StartStatements = {
      shared: (_sql, _scope, _actor, _tenant, _worker, deliveries) => {
        shared.push(deliveries.map((d) => d.runId));
        // The first never settles; the next ones answer.
        return shared.length === 1 ? new Promise(() => {}) : Promise.resolve(new Map(deliveries.map((d) => [d.runId, registered(d.runId)])));
      },
      one: async (_sql, _scope, _actor, d) => registered(d.runId),
    };
    const c = new StartCoalescer(sql, undefined, s);
    const bounds = { ms: 50, missed: () => {}, met: () => {} };
    void withStageBounds(bounds, () => startThree(c, 'hung'));
    await waitFor(() => shared.length === 1, 2_000);
    const later = withStageBounds(bounds, () => startThree(c, 'next'));
    expect((await Promise.all(later)).every((r) => r.ok)).toBe(true);
    expect(shared[1]).toEqual(['next-a', 'next-b', 'next-c']);
  });
});
