// Graceful shutdown, health endpoints and the schema gate of the worker runtime.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/kv/redis-server.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { waitFor } from '../support/wait-for.ts';

let h: WorkHarness;

beforeAll(async () => {
  h = await workHarness();
});
afterAll(async () => h?.close());

async function get(port: number, path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('worker shutdown', () => {
  it('R-WRK-09 R-WRK-10 R-TRL-08 work unfinished at the end of the drain window is released to the queue and later succeeds', async () => {
    const runtime = await h.startWorkers({ queues: ['default'], drainMs: 800, healthPort: 0 });
    const { runId } = await h.dispatch('fixture.effect', { key: 'slow-shutdown', sleepMs: 20_000, sleepUntilAttempt: 1 });
    await h.relay();
    await h.waitForStatus(runId, ['running']);
    const stopping = runtime.stop();
    // Stopping: not ready, draining, still alive.
    await waitFor(() => runtime.state().draining, 5_000, { what: 'the runtime draining' });
    expect(runtime.state()).toMatchObject({ ready: false, draining: true });
    const health = await get(runtime.healthPort!, '/healthz');
    expect(health).toMatchObject({ status: 200, body: { ready: false, draining: true } });
    expect((await get(runtime.healthPort!, '/readyz')).status).toBe(503);
    await stopping;
    const released = await h.run(runId);
    expect(released!.status).toBe('queued');
    expect(released!.finished_at).toBeNull();
    const trail = (await h.trail(runId)).filter((t) => t.event !== 'sent');
    expect(events(trail)).toEqual(['queued', 'received', 'started', 'released_on_shutdown']);
    expect(await h.effects('slow-shutdown')).toBe(0);
    // The message is visible again at once: the next worker runs it (attempt 2 does not sleep).
    await h.startWorkers({ queues: ['default'] });
    const run = await h.waitForStatus(runId, ['succeeded', 'failed']);
    expect(run.status).toBe('succeeded');
    expect(run.attempts).toBe(2);
    expect(await h.effects('slow-shutdown')).toBe(1);
    expect(events((await h.trail(runId)).filter((t) => t.event !== 'sent'))).toEqual([
      'queued', 'received', 'started', 'released_on_shutdown', 'received', 'started', 'succeeded',
    ]);
  });

  it('R-WRK-09 work that finishes within the drain window completes before the process stops', async () => {
    const runtime = await h.startWorkers({ queues: ['critical'], drainMs: 5_000 });
    const { runId } = await h.dispatch('fixture.timeout', { key: 'drains', sleepMs: 400 });
    await h.relay();
    await h.waitForStatus(runId, ['running']);
    await runtime.stop();
    expect((await h.run(runId))!.status).toBe('succeeded');
    expect(await h.effects('drains')).toBe(1);
  });

  it('R-WRK-12 /healthz answers 200 with ready, draining and latestMigration; the schema gate holds consuming until the migration arrives', async () => {
    const port = await freePort();
    const migration = `9999_not_yet_${Date.now()}`;
    const runtime = await h.startWorkers(
      { queues: ['bulk'], healthPort: port, latestMigration: migration, schemaPollIntervalMs: 100 },
      { waitConsuming: false },
    );
    expect(runtime.healthPort).toBe(port);
    const waiting = await get(port, '/healthz');
    expect(waiting).toEqual({ status: 200, body: { ready: false, draining: false, latestMigration: migration, redis: 'up' } });
    const notReady = await get(port, '/readyz');
    expect(notReady.status).toBe(503);
    expect(String(notReady.body.reason)).toContain(migration);
    // The migrator of this version records the migration: the workers start consuming without a restart.
    await h.sql`INSERT INTO mikro_orm_migrations (name) VALUES (${migration})`;
    await runtime.consuming;
    expect(await get(port, '/healthz')).toEqual({ status: 200, body: { ready: true, draining: false, latestMigration: migration, redis: 'up' } });
    expect((await get(port, '/readyz')).status).toBe(200);
    await runtime.stop();
  });

  it('R-WRK-09 an idle worker stops within 2 s of a stop, though its long poll waits 20 s: the receive under way is aborted', async () => {
    const runtime = await h.startWorkers({ queues: ['bulk'], waitSeconds: 20, drainMs: 25_000 });
    // Wait until a long poll is under way (the consumer polls as soon as it starts).
    await waitFor(() => runtime.state().ready && runtime.polling(), 5_000, { what: 'a long poll under way' });
    const t0 = Date.now();
    await runtime.stop();
    expect(Date.now() - t0).toBeLessThan(2_000);
    // A message sent after the stop is still there for the next worker: nothing was taken by the aborted poll.
    const { runId } = await h.dispatch('fixture.effect', { key: 'after-idle-stop' });
    await h.relay();
    await h.startWorkers({ queues: ['default'] });
    expect((await h.waitForStatus(runId, ['succeeded'])).status).toBe('succeeded');
  });
});
