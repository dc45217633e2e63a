// A Redis that hangs (its process frozen with SIGSTOP: connections open, nothing answers, like a
// network black hole) must not stall the work runtime: every Redis call is bounded, the relay's sweep
// keeps its own clock, the after-commit wake never holds its caller past the command timeout, and the
// workers say in /healthz that they run without Redis (one log line on entering, one on leaving).
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis } from '../../src/kv/client.ts';
import { signalOutbox } from '../../src/kv/wake.ts';
import { startRedisServer } from '../../src/kv/redis-server.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { stoppableRedis, type StoppableRedis } from '../support/stoppable-redis.ts';

const COMMAND_TIMEOUT_MS = 300;
const SWEEP_MS = 1_000;
const FREEZE_MS = Number(process.env.TEST_REDIS_FREEZE_MS ?? 5_000);

let h: WorkHarness;
let frozen: StoppableRedis;

beforeAll(async () => {
  h = await workHarness({ redis: false });
  frozen = await stoppableRedis('freeze-test', { commandTimeoutMs: COMMAND_TIMEOUT_MS });
});
afterAll(async () => {
  await h?.close();
  await frozen?.close();
});

describe('workers with Redis frozen', () => {
  it('R-IDM-13 R-OBX-16 runs keep being sent and finishing during a Redis freeze, each within the timeout plus one sweep; nothing lost or duplicated', async () => {
    const runtime = await h.startWorkers({
      redis: frozen.redis,
      relay: { sweepIntervalMs: SWEEP_MS },
      redisTimeoutMs: COMMAND_TIMEOUT_MS,
      redisProbeIntervalMs: 250,
    });
    const keys: string[] = [];
    const runIds: string[] = [];
    const dispatchOne = async (label: string) => {
      const key = `freeze-${label}-${keys.length}`;
      const { runId } = await h.dispatch('fixture.effect', { key });
      keys.push(key);
      runIds.push(runId);
      const t0 = Date.now();
      await signalOutbox(frozen.redis);
      return { runId, wakeMs: Date.now() - t0, dispatchedAt: Date.now() };
    };
    // Warm: with Redis answering, the wake makes a run finish well within a sweep.
    const warm = await dispatchOne('warm');
    await h.waitForStatus(warm.runId, ['succeeded']);
    expect(runtime.state().redis).toBe('up');

    frozen.freeze();
    const frozenAt = Date.now();
    const during: Array<{ runId: string; wakeMs: number; finishedInMs: number }> = [];
    try {
      while (Date.now() - frozenAt < FREEZE_MS) {
        const one = await dispatchOne('frozen');
        // Bounded by the command timeout (plus scheduling slack on a busy machine).
        expect(one.wakeMs).toBeLessThan(COMMAND_TIMEOUT_MS + 700);
        await h.waitForStatus(one.runId, ['succeeded'], 15_000);
        during.push({ runId: one.runId, wakeMs: one.wakeMs, finishedInMs: Date.now() - one.dispatchedAt });
      }
      // The workers say they run without Redis (the probe runs every 250 ms).
      expect(runtime.state().redis).toBe('down');
    } finally {
      frozen.thaw();
    }
    // Several runs went through the whole freeze, each within timeout + one sweep interval (+ slack for a busy machine).
    expect(during.length).toBeGreaterThanOrEqual(3);
    for (const d of during) expect(d.finishedInMs).toBeLessThan(COMMAND_TIMEOUT_MS + SWEEP_MS + 1_500);

    // After the thaw: back to Redis, and the mode change was logged once each way.
    const deadline = Date.now() + 10_000;
    while (runtime.state().redis !== 'up' && Date.now() < deadline) await sleep(50);
    expect(runtime.state().redis).toBe('up');
    const after = await dispatchOne('after');
    await h.waitForStatus(after.runId, ['succeeded']);
    expect(h.logs().match(/running without redis/g)?.length).toBe(1);
    expect(h.logs().match(/redis answers again/g)?.length).toBe(1);

    // Nothing lost, nothing duplicated.
    for (const key of keys) expect(await h.effects(key)).toBe(1);
    for (const runId of runIds) expect((await h.run(runId))?.status).toBe('succeeded');
    await runtime.stop();
  });

  it('R-OBX-16 signalOutbox on a client that is still connecting waits for it (within its bound) instead of dropping the wake', async () => {
    const server = await startRedisServer();
    const fresh = createRedis(server.url, { name: 'fresh-client' });
    try {
      expect(fresh.status).not.toBe('ready');
      expect(await signalOutbox(fresh)).toBe(true);
      const listener = createRedis(server.url, { name: 'fresh-listener' });
      await new Promise((resolve) => listener.once('ready', resolve));
      expect(await listener.llen('svc:outbox:wake')).toBe(1);
      listener.disconnect();
    } finally {
      fresh.disconnect();
      await server.stop();
    }
  });
});
