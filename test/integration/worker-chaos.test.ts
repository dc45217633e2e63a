// Chaos: a burst of runs of a unit writing one effect row per run, while worker
// processes are SIGKILLed and restarted and Redis is frozen (SIGSTOP) in the middle. Every run ends
// final with exactly one effect, none is stuck, and every trail reads causally. Twice: for a unit with
// a transaction per run, and for a `groupCommit` unit, whose slot runs up to 40 runs in one effect
// transaction and whose workers hold up to 40 messages per slot, so a kill takes whole groups.
// CHAOS_RUNS (default 300) and CHAOS_FREEZE_MS (default 3000) size each.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signalOutbox } from '../../src/kv/wake.ts';
import type { QueueName } from '../../src/queue/names.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
import { CHAOS_GROUP_UNITS } from '../fixtures/units/runtime-units.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import type { ChildUnits } from '../fixtures/worker-child.ts';
import { stoppableRedis, type StoppableRedis } from '../support/stoppable-redis.ts';
import { waitFor } from '../support/wait-for.ts';

const RUNS = Number(process.env.CHAOS_RUNS ?? 300);
const FREEZE_MS = Number(process.env.CHAOS_FREEZE_MS ?? 3_000);
const CHILDREN = 2;
const COMMAND_TIMEOUT_MS = 300;

let h: WorkHarness;
let redis: StoppableRedis;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  h = await workHarness({ redis: false, units: CHAOS_GROUP_UNITS });
  redis = await stoppableRedis('chaos', { commandTimeoutMs: COMMAND_TIMEOUT_MS });
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await h?.close();
  await redis?.close();
});

function startChild(childUnits: ChildUnits): Promise<ChildProcess> {
  const script = path.resolve(import.meta.dirname, '..', 'fixtures', 'worker-child.ts');
  const proc = spawn(process.execPath, [script], {
    env: {
      ...process.env,
      CHILD_DATABASE_URL: h.db.url,
      CHILD_REDIS_URL: redis.url,
      CHILD_REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS),
      CHILD_REDIS_PROBE_INTERVAL_MS: '250',
      CHILD_SQS_ENDPOINT: h.endpoint,
      CHILD_QUEUE_URL_PREFIX: h.queueUrlPrefix,
      CHILD_UNITS: childUnits,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
  return new Promise((resolve, reject) => {
    proc.once('exit', (code, signal) => reject(new Error(`worker child exited early (${code ?? signal})`)));
    proc.stdout.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('consuming')) resolve(proc);
    });
  });
}

interface ChaosScenario {
  /** The unit the burst dispatches (one effect row per run). */
  unit: string;
  /** Its queue, the one the survivor and the children consume. */
  queue: QueueName;
  /** The children's unit set (CHILD_UNITS of worker-child.ts), which must consume `queue`. */
  childUnits: ChildUnits;
  /** Dispatches per wake signal of the relay: 10 puts a group's worth on the queue at once. */
  signalEvery: number;
  /** The pause after every 10 dispatches: the chaos lasts as long as the burst, so this paces both. */
  pauseMs: number;
}

/**
 * A burst of CHAOS_RUNS runs of the unit while the children are SIGKILLed and replaced and Redis is
 * frozen; asserts every run succeeded with exactly one effect and a causal trail. Stops its workers
 * after; returns the runs.
 */
async function chaos(s: ChaosScenario): Promise<{ runIds: string[]; prefix: string; receivedAgain: number }> {
  // The survivor: consumes and relays, like a workers service with SVC_RELAY=true.
  const survivor = await h.startWorkers({ redis: redis.redis, queues: [s.queue], relay: { sweepIntervalMs: 500 }, redisTimeoutMs: COMMAND_TIMEOUT_MS, redisProbeIntervalMs: 250 });
  try {
    for (let i = 0; i < CHILDREN; i++) await startChild(s.childUnits);

    const prefix = `chaos-${randomUUID().slice(0, 8)}`;
    const runIds: string[] = [];
    let kills = 0;
    let frozen = false;
    const started = Date.now();
    const burst = (async () => {
      for (let i = 0; i < RUNS; i++) {
        // The burst waits for the chaos at its thirds: the kills strike while runs are still coming,
        // however fast the dispatches go (a faster dispatch once ended the burst before the second kill).
        for (const k of [1, 2]) if (i === Math.floor((RUNS * k) / 3)) await waitFor(() => kills >= k, 30_000, { what: `kill ${k} of the chaos` });
        // Every handler sleeps well below the unit's timeout (5 s), its turn in a group included.
        const { runId } = await h.dispatch(s.unit, { key: `${prefix}-${i}`, sleepMs: i % 7 === 0 ? 300 : 20 });
        runIds.push(runId);
        if (i % s.signalEvery === s.signalEvery - 1 || i === RUNS - 1) await signalOutbox(redis.redis);
        if (i % 10 === 9) await sleep(s.pauseMs);
      }
    })();
    // Chaos while the burst runs: a child SIGKILLed and replaced every ~1.2 s, Redis frozen midway. The
    // victim is a child with a run of the burst running (its `received` row names it, `child:<pid>`),
    // looked for during up to 600 ms, so a kill takes work in flight even when load leaves the children
    // idle at the instant a blind pick would strike; else the children take turns.
    const holdingRuns = async (): Promise<ChildProcess | undefined> => {
      const rows = await h.sql<{ instance: string }[]>`
        SELECT DISTINCT e.worker_instance AS instance FROM platform_task_runs r
          JOIN platform_task_run_events e ON e.run_id = r.run_id AND e.event = 'received' AND e.attempt = r.attempts
         WHERE r.run_id = ANY(${runIds}::uuid[]) AND r.status = 'running'`;
      const busy = new Set(rows.map((r) => r.instance));
      return [...children].find((c) => busy.has(`child:${c.pid}`));
    };
    const chaos = (async () => {
      while (runIds.length < RUNS) {
        await sleep(1_200);
        let victim: ChildProcess | undefined;
        for (const until = Date.now() + 600; !victim && Date.now() < until; await sleep(20)) victim = await holdingRuns();
        victim ??= [...children][kills % Math.max(1, children.size)];
        if (victim) {
          victim.kill('SIGKILL');
          kills++;
          await startChild(s.childUnits);
        }
        if (!frozen && runIds.length >= RUNS / 2) {
          frozen = true;
          redis.freeze();
          await sleep(FREEZE_MS);
          redis.thaw();
        }
      }
    })();
    await Promise.all([burst, chaos]);
    if (!frozen) {
      redis.freeze();
      await sleep(FREEZE_MS);
      redis.thaw();
    }
    const dispatchedMs = Date.now() - started;

    // None stuck: every run final within the deadline.
    const deadline = Date.now() + 60_000;
    let open: number;
    for (;;) {
      const [row] = await h.sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM platform_task_runs WHERE run_id = ANY(${runIds}::uuid[]) AND status NOT IN ('succeeded', 'failed', 'skipped')`;
      open = row!.n;
      if (open === 0 || Date.now() > deadline) break;
      await sleep(200);
    }
    expect(open, `runs not final ${Date.now() - started} ms after the burst began`).toBe(0);
    const statuses = await h.sql<{ status: string; n: number }[]>`
      SELECT status, count(*)::int AS n FROM platform_task_runs WHERE run_id = ANY(${runIds}::uuid[]) GROUP BY status`;
    expect(statuses).toEqual([{ status: 'succeeded', n: RUNS }]);
    // Exactly one effect per run.
    const effects = await h.sql<{ key: string; n: number }[]>`
      SELECT key, count(*)::int AS n FROM fixture_effects WHERE key LIKE ${prefix + '-%'} GROUP BY key HAVING count(*) <> 1`;
    expect(effects).toEqual([]);
    const [total] = await h.sql<{ n: number }[]>`SELECT count(DISTINCT key)::int AS n FROM fixture_effects WHERE key LIKE ${prefix + '-%'}`;
    expect(total!.n).toBe(RUNS);
    // Every trail causal.
    const broken: Array<{ runId: string; problems: string[]; events: string[] }> = [];
    for (const runId of runIds) {
      const verdict = await causalProblems(h.sql, runId);
      if (verdict.problems.length > 0) broken.push({ runId, ...verdict });
    }
    expect(broken.slice(0, 5)).toEqual([]);
    expect(kills).toBeGreaterThanOrEqual(2);
    // Runs the chaos reached: received more than once (a kill took their message, or a freeze held it).
    const [again] = await h.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM (
        SELECT run_id FROM platform_task_run_events WHERE run_id = ANY(${runIds}::uuid[]) AND event = 'received' GROUP BY run_id HAVING count(*) > 1) r`;
    console.log(`chaos ${s.unit}: ${RUNS} runs, ${kills} worker kills, Redis frozen ${FREEZE_MS} ms, burst ${dispatchedMs} ms, all final after ${Date.now() - started} ms, ${again!.n} runs received again`);
    return { runIds, prefix, receivedAgain: again!.n };
  } finally {
    redis.thaw(); // in case a failure left it frozen
    // Gone before the next scenario picks its victims among `children`.
    await Promise.all(
      [...children].map((c) => {
        c.kill('SIGKILL');
        return once(c, 'exit');
      }),
    );
    await survivor.stop();
  }
}

describe('chaos', () => {
  it('R-OBX-16 R-WRK-07 R-IDM-09 runs under worker SIGKILLs and a Redis freeze: every run final, one effect each, every trail causal', async () => {
    await chaos({ unit: 'fixture.effect', queue: 'default', childUnits: 'runtime', signalEvery: 1, pauseMs: 50 });
  }, 150_000);

  it('R-UNT-09 R-OBX-16 R-WRK-07 R-IDM-09 a group-commit unit under worker SIGKILLs and a Redis freeze: every run final, one effect each committed with its started and succeeded, every trail causal', async () => {
    const { runIds, prefix, receivedAgain } = await chaos({ unit: 'fixture.group_effect', queue: 'bulk', childUnits: 'group', signalEvery: 10, pauseMs: 200 });
    // Each run's one effect is its succeeding attempt's, whose started and succeeded rows one transaction
    // wrote (the xmin of a row is its transaction's; the effect's is the member's savepoint's, so the
    // attempt ties it to them).
    const apart = await h.sql<{ key: string; effect_attempt: number; succeeded_attempt: number }[]>`
      SELECT f.key, f.attempt AS effect_attempt, s.attempt AS succeeded_attempt
        FROM fixture_effects f JOIN platform_task_run_events s ON s.run_id = f.run_id AND s.event = 'succeeded'
       WHERE f.key LIKE ${prefix + '-%'}
         AND (s.attempt <> f.attempt
           OR NOT EXISTS (SELECT 1 FROM platform_task_run_events e WHERE e.run_id = f.run_id AND e.event = 'started' AND e.attempt = f.attempt AND e.xmin = s.xmin))`;
    expect(apart).toEqual([]);
    // Groups formed: transactions that carried several runs (the xmin of their succeeded rows).
    const groups = await h.sql<{ runs: number; transactions: number }[]>`
      SELECT runs, count(*)::int AS transactions FROM (
        SELECT count(*)::int AS runs FROM platform_task_run_events WHERE run_id = ANY(${runIds}::uuid[]) AND event = 'succeeded' GROUP BY xmin::text) g
       GROUP BY runs ORDER BY runs`;
    console.log(`chaos fixture.group_effect: runs per transaction ${groups.map((g) => `${g.runs}×${g.transactions}`).join(' ')}`);
    expect(Math.max(...groups.map((g) => g.runs)), 'no transaction carried more than one run: no group formed').toBeGreaterThan(1);
    // The chaos reached groups in flight (a child, killed about once a second, holds one most of the time).
    expect(receivedAgain, 'no run was received twice: the chaos reached no group in flight').toBeGreaterThan(0);
  }, 150_000);
});
