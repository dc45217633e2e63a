// The finish coalescer's logic: which finishes share a statement, how a group's next statement waits
// for the one that is out, and that a failed statement sends each delivery back to its own transaction.
// The statement is a stub here (pure logic); the real one runs against PostgreSQL in
// worker-finish-together.test.ts.
import { describe, expect, it } from 'vitest';
import type { Sql } from '../../src/db/client.ts';
import { FinishCoalescer, type FinishStatement } from '../../src/work/runtime/execute/finish-coalescer.ts';
import type { FreshFinish } from '../../src/work/runtime/store/run-store.ts';
import { withStageBounds } from '../../src/db/stage-deadline.ts';
import { waitFor } from '../support/wait-for.ts';

const sql = {} as Sql;
const actor = { tenantId: '1', userId: '', process: 'worker:unit' };
const group = { tenantId: '1', workerInstance: 'w1', retentionMs: 86_400_000 };

function finishOf(runId: string): FreshFinish {
  return { runId, attempt: 1, receiveCount: 1, queue: 'default', outcome: {}, key: Buffer.alloc(32, 1), fingerprint: Buffer.alloc(32, 2), startedAt: '2026-11-29 00:00:00+00' };
}

/** A statement whose calls are recorded and answered by hand. */
function manual() {
  const calls: Array<{ ids: string[]; tenant: string | null; resolve: () => void; reject: (e: Error) => void }> = [];
  const statement: FinishStatement = (_sql, _scope, a, g, members) =>
    new Promise<void>((resolve, reject) => {
      calls.push({ ids: members.map((m) => m.runId), tenant: `${a.tenantId}/${g.tenantId}`, resolve, reject });
    });
  return { calls, statement };
}

const turn = () => new Promise((r) => setImmediate(r));

describe('finish coalescer', () => {
  it('finishes of one turn share one statement; while it is out, the next ones wait for it and then go together', async () => {
    const { calls, statement } = manual();
    const c = new FinishCoalescer(sql, undefined, statement);
    const first = ['a', 'b', 'c'].map((id) => c.finish('tenant', actor, group, finishOf(id)));
    await turn();
    expect(calls.map((x) => x.ids)).toEqual([['a', 'b', 'c']]);

    const later = ['d', 'e'].map((id) => c.finish('tenant', actor, group, finishOf(id)));
    await turn();
    await turn();
    // The group's statement is still out: d and e wait for it.
    expect(calls).toHaveLength(1);
    calls[0]!.resolve();
    expect(await Promise.all(first)).toEqual([true, true, true]);
    await waitFor(() => calls.length === 2, 2_000);
    expect(calls.map((x) => x.ids)).toEqual([['a', 'b', 'c'], ['d', 'e']]);
    calls[1]!.resolve();
    expect(await Promise.all(later)).toEqual([true, true]);
  });

  it('a failed statement answers false to each of its finishes (never a rejection), and the next statement is unaffected', async () => {
    const { calls, statement } = manual();
    const c = new FinishCoalescer(sql, undefined, statement);
    const first = ['a', 'b'].map((id) => c.finish('tenant', actor, group, finishOf(id)));
    await turn();
    const waiting = c.finish('tenant', actor, group, finishOf('c'));
    calls[0]!.reject(new Error('the finishes are refused'));
    expect(await Promise.all(first)).toEqual([false, false]);
    await waitFor(() => calls.length === 2, 2_000);
    expect(calls[1]!.ids).toEqual(['c']);
    calls[1]!.resolve();
    expect(await waiting).toBe(true);
  });

  it('finishes of other tenants or actors go in statements of their own, at once', async () => {
    const { calls, statement } = manual();
    const c = new FinishCoalescer(sql, undefined, statement);
    void c.finish('tenant', actor, group, finishOf('a'));
    void c.finish('tenant', { ...actor, tenantId: '2' }, { ...group, tenantId: '2' }, finishOf('b'));
    void c.finish('tenant', { ...actor, process: 'worker:other' }, group, finishOf('c'));
    await turn();
    expect(calls.map((x) => [x.tenant, x.ids])).toEqual([
      ['1/1', ['a']],
      ['2/2', ['b']],
      ['1/1', ['c']],
    ]);
  });

  it('a run already waiting in the group is not added twice: the repeat answers false at once', async () => {
    const { calls, statement } = manual();
    const c = new FinishCoalescer(sql, undefined, statement);
    const first = c.finish('tenant', actor, group, finishOf('a'));
    expect(await c.finish('tenant', actor, group, finishOf('a'))).toBe(false);
    await turn();
    expect(calls.map((x) => x.ids)).toEqual([['a']]);
    calls[0]!.resolve();
    expect(await first).toBe(true);
  });

  it('a group carries at most 40 finishes a statement; the rest go in the next', async () => {
    const { calls, statement } = manual();
    const c = new FinishCoalescer(sql, undefined, statement);
    const all = Array.from({ length: 45 }, (_, i) => c.finish('tenant', actor, group, finishOf(`r${i}`)));
    await turn();
    expect(calls.map((x) => x.ids.length)).toEqual([40]);
    calls[0]!.resolve();
    await waitFor(() => calls.length === 2, 2_000);
    expect(calls.map((x) => x.ids.length)).toEqual([40, 5]);
    calls[1]!.resolve();
    expect((await Promise.all(all)).every(Boolean)).toBe(true);
  });

  it("a failed statement that is neither a refusal nor a failure in passing is the statement's own: warned about once per process", async () => {
    const warnings: string[] = [];
    const log = { warn: (_fields: Record<string, unknown>, message: string) => void warnings.push(message) };
    const { calls, statement } = manual();
    const c = new FinishCoalescer(sql, log as never, statement);
    const fail = async (error: Error) => {
      const n = calls.length;
      const pending = c.finish('tenant', actor, group, finishOf(`r${n}`));
      await waitFor(() => calls.length === n + 1, 2_000);
      calls[n]!.reject(error);
      expect(await pending).toBe(false);
    };
    // A refusal (a run moved on, a key taken) and a deadlock say nothing.
    await fail(Object.assign(new Error('of 2 finishes, 1 keys were new and 2 runs still running: the finishes are refused'), { name: 'PostgresError', code: '22P02' }));
    await fail(Object.assign(new Error('deadlock detected'), { name: 'PostgresError', code: '40P01' }));
    expect(warnings).toHaveLength(0);
    // A broken statement is said, once.
    await fail(Object.assign(new Error('column "nope" does not exist'), { name: 'PostgresError', code: '42703' }));
    await fail(Object.assign(new Error('column "nope" does not exist'), { name: 'PostgresError', code: '42703' }));
    expect(warnings).toEqual(['finishes that met could not be committed in one statement; each was finished in its own transaction (said once per process)']);
  });

  it('a finish is shared only while another finish of the runtime is under way', () => {
    const c = new FinishCoalescer(sql, undefined, manual().statement);
    const one = c.begin();
    expect(one.shared).toBe(false);
    const two = c.begin();
    expect(two.shared).toBe(true);
    one.done();
    one.done(); // idempotent: the count does not go below what is under way
    const three = c.begin();
    expect(three.shared).toBe(true);
    two.done();
    three.done();
    expect(c.begin().shared).toBe(false);
  });

  it('a statement the driver never answers holds the next ones no longer than a stage deadline', async () => {
    const { calls, statement } = manual();
    const c = new FinishCoalescer(sql, undefined, statement);
    const bounds = { ms: 50, missed: () => {}, met: () => {} };
    void withStageBounds(bounds, () => c.finish('tenant', actor, group, finishOf('hung')));
    await waitFor(() => calls.length === 1, 2_000);
    // calls[0] is never answered.
    const next = withStageBounds(bounds, () => c.finish('tenant', actor, group, finishOf('next')));
    await waitFor(() => calls.length === 2, 2_000);
    expect(calls[1]!.ids).toEqual(['next']);
    calls[1]!.resolve();
    expect(await next).toBe(true);
  });
});
