// Prometheus metrics on real services: runs that succeed, retry and fail move the delivery and run
// counters and histograms on the workers' GET /metrics; the relay counts what it sent; the backlog
// readers see unsent outbox rows and dead-lettered messages; labels carry no run or tenant ids.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readOutboxBacklog, readQueueDepths, startBacklogSampler } from '../../src/observe/backlog.ts';
import { redisFallback } from '../../src/observe/redis-fallback.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { parseSamples, sampleValue, scrape } from '../support/prometheus-text.ts';
import { waitFor } from '../support/wait-for.ts';

let h: WorkHarness;
let metricsUrl: string;

beforeAll(async () => {
  h = await workHarness();
  const runtime = await h.startWorkers({ queues: ['default'], healthPort: 0, healthHost: '127.0.0.1' });
  metricsUrl = `http://127.0.0.1:${runtime.healthPort}/metrics`;
});
afterAll(async () => h?.close());

const unit = { unit: 'fixture.effect', queue: 'default' };

describe('workers /metrics', () => {
  it('succeeded, retried and failed runs move the delivery and run counters and both histograms by exactly their deliveries', async () => {
    const before = await scrape(metricsUrl);
    const ok = await h.dispatch('fixture.effect', { key: 'metrics-ok' });
    const retried = await h.dispatch('fixture.effect', { key: 'metrics-retry', fail: 'transient', failUntilAttempt: 1 });
    const failed = await h.dispatch('fixture.effect', { key: 'metrics-failed', fail: 'permanent' });
    await h.relay();
    await h.waitForStatus(ok.runId, ['succeeded']);
    expect((await h.waitForStatus(retried.runId, ['succeeded'], 30_000)).attempts).toBe(2);
    await h.waitForStatus(failed.runId, ['failed']);
    // The delivery counter moves once the message is settled, after its delete (which lingers for
    // SVC_ACK_LINGER_MS to share a batch): wait until each of the four deliveries is counted, then
    // check that nothing was counted twice.
    await h.waitForEvent(failed.runId, 'dead_lettered');
    let after = '';
    const delta = (name: string, labels: Record<string, string> = {}) => sampleValue(after, name, labels) - sampleValue(before, name, labels);
    const expected = { succeeded: 2, retrying: 1, failed: 1 };
    await waitFor(
      async () => {
        after = await scrape(metricsUrl);
        return Object.entries(expected).every(([result, n]) => delta('svc_deliveries_total', { ...unit, result }) >= n);
      },
      5_000,
      { stepMs: 50, what: 'the four deliveries to be counted' },
    );

    expect(delta('svc_deliveries_total', { ...unit, result: 'succeeded' })).toBe(2);
    expect(delta('svc_deliveries_total', { ...unit, result: 'retrying' })).toBe(1);
    expect(delta('svc_deliveries_total', { ...unit, result: 'failed' })).toBe(1);
    expect(delta('svc_runs_finished_total', { ...unit, status: 'succeeded' })).toBe(2);
    expect(delta('svc_runs_finished_total', { ...unit, status: 'failed' })).toBe(1);
    // One observation per finished run (duration) and per first start (pickup), never per attempt.
    expect(delta('svc_run_duration_seconds_count', unit)).toBe(3);
    expect(delta('svc_run_pickup_seconds_count', unit)).toBe(3);
    expect(delta('svc_run_duration_seconds_sum', unit)).toBeGreaterThan(0);
    // The retried run waited for its backoff before succeeding: its duration lands above 0.005 s.
    expect(delta('svc_run_duration_seconds_bucket', { ...unit, le: '+Inf' })).toBe(3);
    expect(delta('svc_run_duration_seconds_bucket', { ...unit, le: '0.005' })).toBeLessThan(3);
    // The relay pass of the harness sent the three messages.
    expect(delta('svc_relay_sent_total')).toBe(3);
    // Default process metrics are there too.
    expect(after).toMatch(/^svc_process_cpu_user_seconds_total /m);
    expect(after).toMatch(/^svc_nodejs_eventloop_lag_seconds /m);
  });

  it('a run replayed from another run\'s result (same business key) counts as a replayed delivery and a succeeded run', async () => {
    const keyed = { unit: 'fixture.business_key', queue: 'default' };
    const before = await scrape(metricsUrl);
    const first = await h.dispatch('fixture.business_key', { key: 'metrics-order' });
    await h.relay();
    await h.waitForStatus(first.runId, ['succeeded']);
    const second = await h.dispatch('fixture.business_key', { key: 'metrics-order' });
    await h.relay();
    await h.waitForStatus(second.runId, ['succeeded']);
    // Each delivery is counted after its (lingering) delete: wait for both, then check the exact counts.
    let after = '';
    const delta = (name: string, labels: Record<string, string>) => sampleValue(after, name, labels) - sampleValue(before, name, labels);
    await waitFor(
      async () => {
        after = await scrape(metricsUrl);
        return ['succeeded', 'replayed'].every((result) => delta('svc_deliveries_total', { ...keyed, result }) >= 1);
      },
      5_000,
      { stepMs: 50, what: 'both deliveries to be counted' },
    );
    expect(delta('svc_deliveries_total', { ...keyed, result: 'succeeded' })).toBe(1);
    expect(delta('svc_deliveries_total', { ...keyed, result: 'replayed' })).toBe(1);
    expect(delta('svc_runs_finished_total', { ...keyed, status: 'succeeded' })).toBe(2);
    expect(delta('svc_run_duration_seconds_count', keyed)).toBe(2);
  });

  it('labels never carry run ids, tenant ids or other unbounded values; an unregistered unit is labelled as such', async () => {
    const text = await scrape(metricsUrl);
    const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;
    expect(text).not.toMatch(uuid);
    for (const s of parseSamples(text).filter((x) => x.name.startsWith('svc_') && !x.name.startsWith('svc_process') && !x.name.startsWith('svc_nodejs'))) {
      expect(Object.keys(s.labels).every((k) => ['unit', 'queue', 'status', 'result', 'le', 'operation', 'state', 'route', 'method'].includes(k))).toBe(true);
      expect(Object.keys(s.labels)).not.toContain('tenant_id');
    }
    // A message naming no unit of this build is counted under `unregistered`, not under its name.
    const before = sampleValue(text, 'svc_deliveries_total', { queue: 'default', unit: 'unregistered' });
    await h.sendRaw('default', {
      run_id: '00000000-0000-4000-8000-000000000001',
      kind: 'task',
      name: 'made.up_unit_name',
      payload: {},
      correlation_id: '00000000-0000-4000-8000-000000000002',
      causation_id: '00000000-0000-4000-8000-000000000002',
    });
    let after = await scrape(metricsUrl);
    for (let i = 0; i < 200 && sampleValue(after, 'svc_deliveries_total', { queue: 'default', unit: 'unregistered' }) === before; i++) {
      await new Promise((r) => setTimeout(r, 50));
      after = await scrape(metricsUrl);
    }
    expect(sampleValue(after, 'svc_deliveries_total', { queue: 'default', unit: 'unregistered' })).toBe(before + 1);
    expect(after).not.toContain('made.up_unit_name');
  });

  it('the redis fallback counter is labelled by operation', async () => {
    const before = sampleValue(await scrape(metricsUrl), 'svc_redis_fallbacks_total', { operation: 'gate_acquire' });
    redisFallback('gate_acquire');
    expect(sampleValue(await scrape(metricsUrl), 'svc_redis_fallbacks_total', { operation: 'gate_acquire' })).toBe(before + 1);
  });
});

describe('backlog: outbox and queue depths', () => {
  it('unsent outbox rows and dead-lettered messages are read and sampled into the gauges', async () => {
    const pending = await h.dispatch('fixture.effect', { key: 'metrics-pending' }, undefined);
    const backlog = await readOutboxBacklog(h.sql);
    expect(backlog.pending).toBeGreaterThanOrEqual(1);
    expect(backlog.oldestPendingSeconds).toBeGreaterThanOrEqual(0);
    const sampler = startBacklogSampler({ sql: h.sql, sqs: h.sqs, queueUrlPrefix: h.queueUrlPrefix, intervalMs: 100 });
    try {
      let text = await scrape(metricsUrl);
      for (let i = 0; i < 100 && sampleValue(text, 'svc_outbox_pending') < 1; i++) {
        await new Promise((r) => setTimeout(r, 50));
        text = await scrape(metricsUrl);
      }
      expect(sampleValue(text, 'svc_outbox_pending')).toBe(backlog.pending);
      for (const state of ['visible', 'in_flight', 'dead_letter']) expect(text).toContain(`svc_queue_messages{queue="default",state="${state}"}`);
    } finally {
      await sampler.stop();
    }
    await h.relay();
    expect((await readOutboxBacklog(h.sql)).pending).toBe(0);
    await h.waitForStatus(pending.runId, ['succeeded']);
    // The permanent failure of the first test left its copy in the dead-letter queue.
    const depths = await readQueueDepths(h.sqs, h.queueUrlPrefix, ['default']);
    expect(depths[0]!.deadLetter).toBeGreaterThanOrEqual(1);
  });
});
