// Finishes that meet (src/work/runtime/execute/finish-coalescer.ts) on real PostgreSQL, Redis and SQS:
// the runs of a default unit whose handlers sent nothing and returned while others were finishing
// commit their finishes together, each run's key, status and `started`/`succeeded` rows in one
// commit; a handler that wrote keeps its finish in its own effect transaction, with its effect. And
// the shared statement on its own: all or nothing, refused when one run left `running` or one key
// has a ledger row.
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import { finishFreshDeliveries, isFinishTogetherRefused, startDeliveries, transitionRun, type FreshFinish } from '../../src/work/runtime/store/run-store.ts';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import { idempotencyKeyOf } from '../../src/work/runtime/store/idempotency.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { createTenant } from './work-tables-support.ts';

const payload = z.object({
  key: z.string().min(1),
  together: z.number().int().min(1),
  /** After the meeting, the run is moved to `failed` behind the worker's back (as a cancel does): its finish must be refused. */
  failBehind: z.boolean().optional(),
});

/**
 * The handlers wait until `together` of them are running, then all return in the same turn (bounded
 * by a timer of their own): their finishes are under way at the same time.
 */
const waiting: Array<() => void> = [];
function meet(together: number): Promise<void> {
  return new Promise<void>((resolve) => {
    waiting.push(resolve);
    if (waiting.length >= together) for (const go of waiting.splice(0)) go();
    setTimeout(resolve, 8_000).unref();
  });
}

/** A unit of the bulk queue whose handler meets the others of its payload's `together`, then does `after`. */
function meetingUnit(name: string, context: 'tenant' | 'system', after: (p: z.infer<typeof payload>, run: Parameters<WorkUnit['handler']>[1]) => Promise<void>): WorkUnit {
  return defineTask({
    name, queue: 'bulk', context, concurrency: 10, timeoutSeconds: 15, payload,
    async handler(p, run) {
      await meet(p.together);
      await after(p, run);
      return { key: p.key };
    },
  });
}

/** Sends nothing on run.transaction (failBehind: moves its own run to `failed` from another connection). */
const quiet = meetingUnit('fixture.finish_quiet', 'tenant', async (p, run) => {
  // `queued` while its registration waits for its finish (src/work/runtime/execute/deferred-registration.ts).
  if (p.failBehind) await inUnitOfWork(h.sql, actor(), (tx) => transitionRun(tx, 'tenant', { runId: run.runId, tenantId, to: 'failed', from: ['queued', 'running'] }));
});

/** Writes its effect through run.transaction. */
const writing = meetingUnit('fixture.finish_writing', 'tenant', async (p, run) => {
  await run.transaction`INSERT INTO finish_effects (run_id, key) VALUES (${run.runId}, ${p.key})`;
});

/** A platform run's unit (no tenant): the statement's platform form (its runs are registered and finished by hand). */
const system = meetingUnit('fixture.finish_system', 'system', async () => {});

const UNITS: ReadonlyMap<string, WorkUnit> = new Map([quiet, writing, system].map((u) => [u.name, u]));

let h: WorkHarness;
let tenantId: string;

beforeAll(async () => {
  h = await workHarness({ units: UNITS });
  tenantId = await createTenant(h.sql);
  await h.sql`CREATE TABLE finish_effects (run_id uuid NOT NULL, key text NOT NULL)`;
});
afterAll(async () => h?.close());
afterEach(async () => h?.stopWorkers());

const actor = () => ({ kind: 'system' as const, tenantId, label: 'test' });

/** The transaction (xmin) of each row a run's finish writes: its run row, its ledger row, its `started` and `succeeded`. */
async function finishCommits(unit: string, runId: string): Promise<{ run: string; ledger: string | undefined; started: string; succeeded: string }> {
  const [run] = await h.sql<{ x: string }[]>`SELECT xmin::text AS x FROM task_runs WHERE run_id = ${runId}`;
  const rows = await h.sql<{ event: string; x: string }[]>`SELECT event, xmin::text AS x FROM task_run_events WHERE run_id = ${runId} AND event IN ('started', 'succeeded')`;
  // A task's key is its run id (R-IDM-10).
  const [ledger] = await h.sql<{ x: string }[]>`
    SELECT xmin::text AS x FROM idempotency_keys WHERE tenant_id = ${tenantId} AND idempotency_key = ${idempotencyKeyOf(unit, runId)} AND status = 'completed'`;
  return { run: run!.x, ledger: ledger?.x, started: rows.find((r) => r.event === 'started')!.x, succeeded: rows.find((r) => r.event === 'succeeded')!.x };
}

async function runTogether(unit: string, prefix: string, n: number, failBehind: number[] = []): Promise<string[]> {
  await h.fenceAbandonedPolls('bulk');
  const runIds: string[] = [];
  for (let i = 0; i < n; i++) {
    runIds.push((await h.dispatch(unit, { key: `${prefix}-${i}`, together: n, ...(failBehind.includes(i) ? { failBehind: true } : {}) }, actor())).runId);
  }
  await h.relay();
  await h.startWorkers({ queues: ['bulk'] });
  for (const [i, id] of runIds.entries()) if (!failBehind.includes(i)) await h.waitForEvent(id, 'succeeded', 20_000);
  return runIds;
}

describe('finishes that meet', () => {
  it('R-WRK-02 R-TRL-08 R-IDM-08 runs whose handlers wrote nothing and returned together share their finishes\' commit, each run\'s key, status and trail rows committed together', async () => {
    const runIds = await runTogether('fixture.finish_quiet', 'quiet', 6);
    const commits = await Promise.all(runIds.map((id) => finishCommits('fixture.finish_quiet', id)));
    for (const [i, c] of commits.entries()) {
      // One run's rows: one commit (its key completed, its status, its started and succeeded).
      expect(c.ledger, `run ${i}: its completed key in the commit of its status`).toBe(c.run);
      expect([c.started, c.succeeded], `run ${i}`).toEqual([c.run, c.run]);
      expect(await h.run(runIds[i]!)).toMatchObject({ status: 'succeeded', progress: 100, outcome: { key: `quiet-${i}` } });
      expect(events(await h.trail(runIds[i]!))).toEqual(['queued', 'sent', 'received', 'started', 'succeeded']);
    }
    // Six runs, fewer commits: the finishes under way at once went together.
    expect(new Set(commits.map((c) => c.run)).size).toBeLessThan(6);
  });

  it('R-WRK-02 a run that left `running` while its handler ran has its finish refused, and the runs finishing with it still succeed, once each', async () => {
    const runIds = await runTogether('fixture.finish_quiet', 'behind', 5, [3]);
    for (const [i, id] of runIds.entries()) {
      if (i === 3) continue;
      expect((await h.run(id))?.status).toBe('succeeded');
      expect(events(await h.trail(id)).filter((e) => e === 'started' || e === 'succeeded')).toEqual(['started', 'succeeded']);
    }
    const victim = runIds[3]!;
    // Nothing of its finish committed.
    expect((await h.run(victim))?.status).toBe('failed');
    expect(events(await h.trail(victim))).not.toContain('succeeded');
    const [key] = await h.sql`SELECT status FROM idempotency_keys WHERE tenant_id = ${tenantId} AND idempotency_key = ${idempotencyKeyOf('fixture.finish_quiet', victim)}`;
    expect(key?.status).not.toBe('completed');
  });

  it('R-IDM-08 R-UNT-09 a handler that wrote keeps its finish in its own effect transaction, with its effect, however many finish at once', async () => {
    const runIds = await runTogether('fixture.finish_writing', 'writing', 4);
    const commits = await Promise.all(runIds.map((id) => finishCommits('fixture.finish_writing', id)));
    for (const [i, c] of commits.entries()) {
      const [effect] = await h.sql<{ x: string }[]>`SELECT xmin::text AS x FROM finish_effects WHERE run_id = ${runIds[i]!}`;
      expect([c.ledger, c.started, c.succeeded], `run ${i}: its finish in the commit of its effect`).toEqual([effect!.x, effect!.x, effect!.x]);
    }
    expect(new Set(commits.map((c) => c.run)).size).toBe(4);
  });
});

describe('the shared finish statement', () => {
  const settings = () => ({ tenantId, userId: '', process: 'worker:fixture.finish_quiet' });
  const group = () => ({ tenantId, workerInstance: 'finish-worker', retentionMs: 60_000 });

  const platform = { tenantId: '', userId: '', process: 'worker:fixture.finish_system' };

  /** Runs dispatched and registered (`running`), each with a fresh key: tenant runs, or platform runs. */
  async function running(n: number, scope: 'tenant' | 'platform' = 'tenant'): Promise<FreshFinish[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const dispatched = scope === 'tenant' ? h.dispatch('fixture.finish_quiet', { key: `stmt-${i}`, together: 1 }, actor()) : h.dispatch('fixture.finish_system', { key: `platform-${i}`, together: 1 });
      ids.push((await dispatched).runId);
    }
    const deliveries = ids.map((runId) => ({ runId, receiveCount: 1 }));
    const started = scope === 'tenant' ? await startDeliveries(h.sql, 'tenant', settings(), tenantId, 'finish-worker', deliveries) : await startDeliveries(h.sql, 'platform', platform, null, 'finish-worker', deliveries);
    return ids.map((runId) => ({
      runId, attempt: 1, receiveCount: 1, queue: 'bulk', outcome: { done: runId }, key: randomBytes(32), fingerprint: randomBytes(32), startedAt: started.get(runId)!.receivedAt,
    }));
  }

  async function untouched(members: FreshFinish[]): Promise<void> {
    for (const m of members) {
      expect((await h.run(m.runId))?.status).not.toBe('succeeded');
      expect(events(await h.trail(m.runId))).not.toContain('succeeded');
    }
    const hexes = members.map((m) => m.key.toString('hex'));
    const keys = await h.sql`SELECT 1 FROM idempotency_keys WHERE idempotency_key IN (SELECT decode(x, 'hex') FROM unnest(${hexes}::text[]) x) AND status = 'completed'`;
    expect(keys).toHaveLength(0);
  }

  it('R-WRK-02 R-TRL-08 finishes each run: key completed, run succeeded, started at its received instant, then succeeded', async () => {
    const members = await running(3);
    await finishFreshDeliveries(h.sql, 'tenant', settings(), group(), members);
    for (const m of members) {
      expect(await h.run(m.runId)).toMatchObject({ status: 'succeeded', progress: 100, outcome: { done: m.runId } });
      const trail = await h.sql<{ event: string; at: string; worker_instance: string }[]>`
        SELECT event, occurred_at::text AS at, worker_instance FROM task_run_events WHERE run_id = ${m.runId} ORDER BY id`;
      expect(trail.map((t) => t.event)).toEqual(['queued', 'sent', 'received', 'started', 'succeeded']);
      expect(trail[3]!.at).toBe(trail[2]!.at);
      expect(trail[4]!.worker_instance).toBe('finish-worker');
      const [key] = await h.sql<{ status: string; fingerprint: Buffer }[]>`
        SELECT status, request_fingerprint AS fingerprint FROM idempotency_keys WHERE idempotency_key = ${m.key} AND tenant_id = ${tenantId}`;
      expect(key!.status).toBe('completed');
      expect(key!.fingerprint.equals(m.fingerprint)).toBe(true);
    }
  });

  it('R-WRK-02 platform runs finish the same way: their keys in the platform ledger, no tenant anywhere', async () => {
    const members = await running(2, 'platform');
    await finishFreshDeliveries(h.sql, 'platform', platform, { tenantId: null, workerInstance: 'finish-worker', retentionMs: 60_000 }, members);
    for (const m of members) {
      expect(await h.run(m.runId)).toMatchObject({ status: 'succeeded', outcome: { done: m.runId } });
      expect(events(await h.trail(m.runId))).toEqual(['queued', 'sent', 'received', 'started', 'succeeded']);
      const [key] = await h.sql<{ status: string }[]>`SELECT status FROM platform_idempotency_keys WHERE idempotency_key = ${m.key}`;
      expect(key!.status).toBe('completed');
    }
  });

  it('R-WRK-02 one run no longer running (cancelled meanwhile) refuses the whole statement: nothing of it commits', async () => {
    const members = await running(3);
    await inUnitOfWork(h.sql, actor(), (tx) => transitionRun(tx, 'tenant', { runId: members[1]!.runId, tenantId, to: 'failed', from: ['running'] }));
    expect(isFinishTogetherRefused(await finishFreshDeliveries(h.sql, 'tenant', settings(), group(), members).then(() => null, (e: unknown) => e))).toBe(true);
    await untouched(members);
  });

  it('R-IDM-08 one key with a ledger row already refuses the whole statement: nothing of it commits, the row as it was', async () => {
    const members = await running(3);
    await h.sql`INSERT INTO idempotency_keys (tenant_id, idempotency_key, request_fingerprint, status, expires_at)
                VALUES (${tenantId}, ${members[2]!.key}, ${members[2]!.fingerprint}, 'processing', now() + interval '1 minute')`;
    expect(isFinishTogetherRefused(await finishFreshDeliveries(h.sql, 'tenant', settings(), group(), members).then(() => null, (e: unknown) => e))).toBe(true);
    await untouched(members);
    const [row] = await h.sql<{ status: string }[]>`SELECT status FROM idempotency_keys WHERE idempotency_key = ${members[2]!.key}`;
    expect(row!.status).toBe('processing');
  });
});
