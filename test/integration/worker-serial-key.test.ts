// Runs in order per key (`serialKey` in defineTask): at most one run of a key executes at a time, in
// dispatch order, across workers processes (here two runtimes, each with several slots, sharing the queue);
// a run whose turn has not come goes back to the queue without spending a receive. Each handler records,
// in its own effect transaction, when it started and ended (the database clock): overlap or disorder
// within a key would show there.
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import { defineTask, unitProblems, type WorkUnit } from '../../src/work/define/unit.ts';
import { dispatchMany, dispatchTask } from '../../src/work/runtime/produce/dispatch.ts';
import { showRun } from '../../src/work/operate/show-run.ts';
import { runPage } from '../../src/console/console-pages.ts';
import type { WorkerRuntime } from '../../src/work/runtime/worker-runtime.ts';
import { SYSTEM_ACTOR, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { refusal } from '../support/refusal.ts';
import { waitFor } from '../support/wait-for.ts';

const serialTask = defineTask({
  name: 'fixture.serial',
  queue: 'default',
  context: 'system',
  concurrency: 6,
  timeoutSeconds: 10,
  serialKey: 'account',
  payload: z.object({ account: z.union([z.string(), z.number()]).optional(), seq: z.number().int(), sleepMs: z.number().int() }),
  async handler(p, run) {
    await run.transaction`INSERT INTO fixture_serial (account, seq, started) VALUES (${String(p.account ?? '-')}, ${p.seq}, clock_timestamp())`;
    await sleep(p.sleepMs);
    await run.transaction`UPDATE fixture_serial SET ended = clock_timestamp() WHERE account = ${String(p.account ?? '-')} AND seq = ${p.seq}`;
  },
});

const KEYS = 10;
const PER_KEY = 100;

let h: WorkHarness;
const runtimes: WorkerRuntime[] = [];

beforeAll(async () => {
  h = await workHarness({ units: new Map<string, WorkUnit>([[serialTask.name, serialTask]]) });
  await h.sql`CREATE TABLE fixture_serial (account text NOT NULL, seq int NOT NULL, started timestamptz NOT NULL, ended timestamptz, PRIMARY KEY (account, seq))`;
}, 120_000);

afterAll(async () => {
  for (const r of runtimes) await r.stop().catch(() => {});
  await h?.close();
});

describe('serialKey: runs in order per key', () => {
  it(`${KEYS * PER_KEY} runs of ${KEYS} keys over two workers processes never overlap within a key, keep dispatch order, and spend no receive on waiting`, async () => {
    // One bulk dispatch, the keys interleaved: dispatch order is the list's order.
    const payloads = Array.from({ length: KEYS * PER_KEY }, (_, i) => ({ account: `acct-${i % KEYS}`, seq: i, sleepMs: 15 }));
    const runs = await inUnitOfWork(h.sql, SYSTEM_ACTOR, (tx) => dispatchMany(tx, serialTask, payloads, { actor: SYSTEM_ACTOR }));
    const runIds = runs.map((r) => r.runId);
    for (let i = 0; i < 2; i++) runtimes.push(await h.startWorkers({ queues: ['default'] }));
    await waitFor(
      async () => {
        // A relay pass sends a batch: the test relays until every run is sent.
        await h.relay();
        const [row] = await h.sql<[{ n: number }]>`SELECT count(*)::int AS n FROM platform_task_runs WHERE run_id = ANY(${runIds}::uuid[]) AND status = 'succeeded'`;
        return row.n === runIds.length;
      },
      360_000,
      { what: 'every serial run succeeded' },
    );
    const rows = await h.sql<Array<{ account: string; seq: number; started: Date; ended: Date }>>`
      SELECT account, seq, started, ended FROM fixture_serial ORDER BY account, started`;
    expect(rows).toHaveLength(KEYS * PER_KEY);
    for (let k = 0; k < KEYS; k++) {
      const ofKey = rows.filter((r) => r.account === `acct-${k}`);
      // Started in dispatch order...
      expect(ofKey.map((r) => r.seq)).toEqual(Array.from({ length: PER_KEY }, (_, j) => k + j * KEYS));
      // ...and each only after the one before it had ended.
      for (let j = 1; j < ofKey.length; j++) expect(ofKey[j]!.started.getTime(), `acct-${k} #${j}`).toBeGreaterThanOrEqual(ofKey[j - 1]!.ended.getTime());
    }
    // Different keys did run at the same time (the order is per key, not per unit).
    const all = [...rows].sort((a, b) => a.started.getTime() - b.started.getTime());
    expect(all.some((r, i) => i > 0 && r.started.getTime() < all[i - 1]!.ended.getTime())).toBe(true);
    // Waiting spent no receive: one attempt and one `received` per run, however often it went back.
    const [counts] = await h.sql<[{ attempts: number; received: number }]>`
      SELECT (SELECT max(attempts) FROM platform_task_runs WHERE run_id = ANY(${runIds}::uuid[]))::int AS attempts,
             (SELECT count(*) FROM platform_task_run_events WHERE run_id = ANY(${runIds}::uuid[]) AND event = 'received')::int AS received`;
    expect(counts).toEqual({ attempts: 1, received: runIds.length });
    // The key is recorded with each run, where a delivery looks for the earlier ones.
    const [keyed] = await h.sql<[{ n: number }]>`
      SELECT count(*)::int AS n FROM platform_task_run_events WHERE run_id = ANY(${runIds}::uuid[]) AND event = 'queued' AND detail ->> 'serial_key' LIKE 'acct-%'`;
    expect(keyed.n).toBe(runIds.length);
  }, 420_000);

  it('a later run of a key waits while an earlier one is not final, and runs once it is; other keys and payloads without the field do not wait', async () => {
    const dispatch = (payload: { account?: string | number; seq: number; sleepMs: number }) =>
      inUnitOfWork(h.sql, SYSTEM_ACTOR, (tx) => dispatchTask(tx, serialTask, payload, { actor: SYSTEM_ACTOR }));
    // The earlier run of key 'slow' holds its turn for a while; a later one of the same key must wait for it.
    const first = await dispatch({ account: 'slow', seq: 1000, sleepMs: 4_000 });
    const second = await dispatch({ account: 'slow', seq: 1001, sleepMs: 0 });
    const other = await dispatch({ account: 42, seq: 1002, sleepMs: 0 });
    const free = await dispatch({ seq: 1003, sleepMs: 0 });
    await h.relay();
    await h.waitForStatus(other.runId, ['succeeded'], 30_000);
    await h.waitForStatus(free.runId, ['succeeded'], 30_000);
    await h.waitForStatus(first.runId, ['succeeded'], 30_000);
    await h.waitForStatus(second.runId, ['succeeded'], 30_000);
    // The later one (no sleep) started only once the earlier (4 s) had ended; the others meanwhile.
    const [a, b] = await h.sql<Array<{ started: Date; ended: Date }>>`SELECT started, ended FROM fixture_serial WHERE account = 'slow' ORDER BY seq`;
    expect(b!.started.getTime()).toBeGreaterThanOrEqual(a!.ended.getTime());
    const [o] = await h.sql<Array<{ ended: Date }>>`SELECT ended FROM fixture_serial WHERE account = '42'`;
    expect(o!.ended.getTime()).toBeLessThan(a!.ended.getTime());
    const [numeric] = await h.sql<[{ key: string }]>`SELECT detail ->> 'serial_key' AS key FROM platform_task_run_events WHERE run_id = ${other.runId} AND event = 'queued'`;
    expect(numeric.key).toBe('42');
    // `svc runs show` says which key orders a run.
    expect((await showRun(h.sql, second.runId)).serialKey).toBe('slow');
    expect((await showRun(h.sql, free.runId)).serialKey).toBeNull();
    // So does the console's run page.
    const html = runPage(await showRun(h.sql, second.runId), { writable: false, viewer: { operator: null } });
    expect(html).toContain('<tr><th>serial key</th><td><code>slow</code></td></tr>');
    expect(runPage(await showRun(h.sql, free.runId), { writable: false, viewer: { operator: null } })).not.toContain('serial key');
    const [none] = await h.sql<[{ n: number }]>`SELECT count(*)::int AS n FROM platform_task_run_events WHERE run_id = ${free.runId} AND event = 'queued' AND detail ? 'serial_key'`;
    expect(none.n).toBe(0);
  }, 120_000);

  it('refuses a serial key value that cannot order runs at dispatch, naming the field, and nothing is written', async () => {
    const loose = defineTask({
      name: serialTask.name,
      queue: 'default',
      context: 'system',
      serialKey: 'account',
      payload: z.object({ account: z.unknown(), seq: z.number().int(), sleepMs: z.number().int() }),
      async handler() {},
    });
    const before = await h.sql<[{ n: number }]>`SELECT count(*)::int AS n FROM platform_task_runs WHERE name = 'fixture.serial'`;
    for (const account of [{ nested: true }, '', 'x'.repeat(256), Number.POSITIVE_INFINITY]) {
      const error = await refusal(inUnitOfWork(h.sql, SYSTEM_ACTOR, (tx) => dispatchTask(tx, loose, { account, seq: 1, sleepMs: 0 }, { actor: SYSTEM_ACTOR })));
      expect(error.code).toBe('PAYLOAD_INVALID');
      expect(error.message).toMatch(/account must be a string of 1 to 255 characters or a finite number: it orders the runs \(serialKey\)/);
    }
    const after = await h.sql<[{ n: number }]>`SELECT count(*)::int AS n FROM platform_task_runs WHERE name = 'fixture.serial'`;
    expect(after[0].n).toBe(before[0].n);
  });

  it('tasks:check refuses a serialKey that is not a payload field, is not a field name, or comes with groupCommit', () => {
    const base = { name: 'fixture.serial_check', queue: 'default' as const, context: 'system' as const, payload: z.object({ account: z.string() }), async handler() {} };
    expect(unitProblems(defineTask({ ...base, serialKey: 'account' }))).toEqual([]);
    expect(unitProblems(defineTask({ ...base, serialKey: 'acount' as never }))).toEqual([`serialKey 'acount' is not a field of the payload schema (account)`]);
    expect(unitProblems(defineTask({ ...base, serialKey: 'a.b' as never }))).toEqual([`serialKey must name a top-level payload field (letters, digits, _), not "a.b"`]);
    expect(unitProblems(defineTask({ ...base, serialKey: 'account', groupCommit: true }))).toEqual([
      'serialKey does not combine with groupCommit: a group runs its members together, a serial key one at a time',
    ]);
  });
});
