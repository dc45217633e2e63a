// Redis is never authoritative: with it stopped mid-flow, runs still complete through the relay's
// sweep and the database ledger, and a concurrent duplicate still has one effect (the advisory lock of
// the key stands in for the gate).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisServer, type RedisServer } from '../../src/kv/redis-server.ts';
import type { Redis } from 'ioredis';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { connectedRedis } from '../support/services.ts';

let h: WorkHarness;
let server: RedisServer;
let redis: Redis;

beforeAll(async () => {
  h = await workHarness({ redis: false });
  server = await startRedisServer();
  redis = await connectedRedis(server.url, { name: 'redis-down-test' });
});
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
  await h?.close();
});

describe('workers with Redis stopped', () => {
  it('R-IDM-13 R-IDM-11 runs started with Redis up complete after Redis stops, and later runs complete on the sweep and the ledger', async () => {
    await h.startWorkers({ redis, relay: { sweepIntervalMs: 200 } });
    const before = await h.dispatch('fixture.effect', { key: 'redis-mid-flow', sleepMs: 800 });
    await h.waitForStatus(before.runId, ['running']);
    await server.stop();
    const run = await h.waitForStatus(before.runId, ['succeeded', 'failed']);
    expect(run.status).toBe('succeeded');
    expect(await h.effects('redis-mid-flow')).toBe(1);
    // Nothing signals the relay now: its sweep picks the rows up.
    const later = await Promise.all([1, 2, 3].map((i) => h.dispatch('fixture.effect', { key: `redis-down-${i}` })));
    for (const { runId } of later) expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    for (const i of [1, 2, 3]) expect(await h.effects(`redis-down-${i}`)).toBe(1);
  });

  it('R-IDM-08 R-OBX-16 without Redis a concurrent duplicate delivery still has one effect', async () => {
    const { runId, envelope } = await h.dispatch('fixture.effect', { key: 'no-redis-dup', sleepMs: 1_000 });
    await h.sendRaw('default', envelope);
    await h.sendRaw('default', envelope);
    await h.waitForStatus(runId, ['succeeded']);
    // Relay copy + two raw copies: every copy is received, one executes.
    await h.waitForReceives(runId, 4);
    const trail = await h.trail(runId);
    expect(trail.filter((t) => t.event === 'started')).toHaveLength(1);
    expect(trail.some((t) => t.event === 'received' && t.detail.held === 'ledger')).toBe(true);
    expect(await h.effects('no-redis-dup')).toBe(1);
    const [ledger] = await h.sql`SELECT count(*)::int AS n FROM platform_idempotency_keys WHERE status = 'completed' AND outcome->>'key' = 'no-redis-dup'`;
    expect(ledger!.n).toBe(1);
  });
});
