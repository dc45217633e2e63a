// A delivery whose idempotency key is `processing` under a live lease (an execution elsewhere that has
// not finished, or died without settling) must not run the handler; its message goes back to the queue
// and runs once the lease is over. Without Redis, so the database ledger alone decides.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import { fingerprintOf, idempotencyKeyOf } from '../../src/work/runtime/store/idempotency.ts';
import { SYSTEM_ACTOR, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';

let h: WorkHarness;

beforeAll(async () => {
  h = await workHarness({ redis: false });
});
afterAll(async () => {
  await h?.close();
});

/** How far out the stale execution's lease ends: long enough for the first delivery to land inside it. */
const LEASE_SECONDS = 5;

interface TimedEvent {
  event: string;
  occurred_at: Date;
}

describe('idempotency lease', () => {
  it('R-IDM-09 a delivery finding its key processing under a live lease does not run, and runs once after expires_at', async () => {
    await h.startWorkers();
    const key = 'lease-held';
    const payload = { key };
    // The run and its outbox row; the relay is not running, so nothing is delivered yet.
    const { runId, envelope } = await h.dispatch('fixture.effect', payload);
    expect(envelope.payload).toEqual(payload);
    // Another execution claimed this run's key and has not finished: its lease runs a few seconds on.
    // fixture.effect has no business key, so the key comes from the run id.
    const ledgerKey = idempotencyKeyOf('fixture.effect', runId);
    const [claimed] = await inUnitOfWork(h.sql, SYSTEM_ACTOR, (tx) =>
      tx<{ expires_at: Date }[]>`
        INSERT INTO platform_idempotency_keys (idempotency_key, request_fingerprint, status, expires_at)
        VALUES (${ledgerKey}, ${fingerprintOf(envelope.payload)}, 'processing', clock_timestamp() + make_interval(secs => ${LEASE_SECONDS}))
        RETURNING expires_at`,
    );
    const leaseEnd = claimed!.expires_at;
    await h.relay();

    // The first delivery arrives while the lease lives and is turned away: no `started`, no effect.
    // Watched through the whole lease window, on the database clock.
    await h.waitForEvent(runId, 'received');
    for (;;) {
      const [now] = await h.sql<{ left_ms: number }[]>`
        SELECT (extract(epoch FROM ${leaseEnd}::timestamptz - clock_timestamp()) * 1000)::float8 AS left_ms`;
      const trail = await h.trail(runId);
      expect(trail.map((t) => t.event)).not.toContain('started');
      if (now!.left_ms <= 0) break;
      expect(await h.effects(key)).toBe(0);
      await new Promise((r) => setTimeout(r, 100));
    }

    const run = await h.waitForStatus(runId, ['succeeded', 'failed'], 30_000);
    expect(run.status).toBe('succeeded');
    expect(await h.effects(key)).toBe(1);

    // All on the database clock, so the verdict does not depend on how fast this machine is.
    const timed = await h.sql<TimedEvent[]>`
      SELECT event, occurred_at FROM platform_task_run_events WHERE run_id = ${runId} ORDER BY id`;
    const received = timed.filter((e) => e.event === 'received');
    const started = timed.filter((e) => e.event === 'started');
    // A delivery really came during the lease (otherwise the test proves nothing) ...
    expect(received[0]!.occurred_at.getTime()).toBeLessThan(leaseEnd.getTime());
    // ... and the handler ran exactly once, only after the lease was over, on a later delivery.
    expect(started).toHaveLength(1);
    expect(started[0]!.occurred_at.getTime()).toBeGreaterThanOrEqual(leaseEnd.getTime());
    expect(received.length).toBeGreaterThanOrEqual(2);
    const [effect] = await h.sql<{ created_at: Date }[]>`SELECT created_at FROM fixture_effects WHERE key = ${key}`;
    expect(effect!.created_at.getTime()).toBeGreaterThanOrEqual(leaseEnd.getTime());
    // The redelivery took the expired key over and completed it (one ledger row, the second attempt).
    const ledger = await h.sql<{ status: string; attempt: number }[]>`
      SELECT status, attempt FROM platform_idempotency_keys WHERE idempotency_key = ${ledgerKey}`;
    expect(ledger).toEqual([{ status: 'completed', attempt: 2 }]);
  });
});
