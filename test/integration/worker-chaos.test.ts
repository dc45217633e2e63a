// Chaos (issue 11, done-when): a burst of runs of a unit writing one effect row per run, while worker
// processes are SIGKILLed and restarted and Redis is frozen (SIGSTOP) in the middle. Every run ends
// final with exactly one effect, none is stuck, and every trail reads causally.
// CHAOS_RUNS (default 300) and CHAOS_FREEZE_MS (default 3000) size it.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signalOutbox } from '../../src/kv/wake.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { stoppableRedis, type StoppableRedis } from '../support/stoppable-redis.ts';

const RUNS = Number(process.env.CHAOS_RUNS ?? 300);
const FREEZE_MS = Number(process.env.CHAOS_FREEZE_MS ?? 3_000);
const CHILDREN = 2;
const COMMAND_TIMEOUT_MS = 300;

let h: WorkHarness;
let redis: StoppableRedis;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  h = await workHarness({ redis: false });
  redis = await stoppableRedis('chaos', { commandTimeoutMs: COMMAND_TIMEOUT_MS });
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await h?.close();
  await redis?.close();
});

function startChild(): Promise<ChildProcess> {
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
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
  return new Promise((resolve, reject) => {
    proc.once('exit', (code, signal) => reject(new Error(`worker child exited early (${code ?? signal})`)));
    proc.stdout!.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('consuming')) resolve(proc);
    });
  });
}

describe('chaos', () => {
  it('R-OBX-16 R-WRK-07 R-IDM-09 runs under worker SIGKILLs and a Redis freeze: every run final, one effect each, every trail causal', async () => {
    // The survivor: consumes and relays, like a workers service with SVC_RELAY=true.
    await h.startWorkers({ redis: redis.redis, queues: ['default'], relay: { sweepIntervalMs: 500 }, redisTimeoutMs: COMMAND_TIMEOUT_MS, redisProbeIntervalMs: 250 });
    for (let i = 0; i < CHILDREN; i++) await startChild();

    const prefix = `chaos-${randomUUID().slice(0, 8)}`;
    const runIds: string[] = [];
    let kills = 0;
    let frozen = false;
    const started = Date.now();
    const burst = (async () => {
      for (let i = 0; i < RUNS; i++) {
        const { runId } = await h.dispatch('fixture.effect', { key: `${prefix}-${i}`, sleepMs: i % 7 === 0 ? 300 : 20 });
        runIds.push(runId);
        await signalOutbox(redis.redis);
        if (i % 10 === 9) await sleep(50);
      }
    })();
    // Chaos while the burst runs: a child SIGKILLed and replaced every ~1.2 s, Redis frozen midway.
    const chaos = (async () => {
      while (runIds.length < RUNS) {
        await sleep(1_200);
        const victim = [...children][kills % Math.max(1, children.size)];
        if (victim) {
          victim.kill('SIGKILL');
          kills++;
          await startChild();
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
    console.log(`chaos: ${RUNS} runs, ${kills} worker kills, Redis frozen ${FREEZE_MS} ms, burst ${dispatchedMs} ms, all final after ${Date.now() - started} ms`);
  }, 150_000);
});
