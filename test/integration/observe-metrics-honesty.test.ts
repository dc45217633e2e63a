// Metrics that must not mislead: a process that does not relay exports no relay gauge (a 0 would
// read as "no backlog"); every Redis fallback series exists from the start; a run of a unit this
// build lacks is labelled `unregistered`; a delayed or cancelled row does not age the outbox; an
// operator's cancel is counted as a finished run; a queue whose depth cannot be read loses its
// series (not frozen) and is counted and warned about once; a worker consuming a queue that does not
// exist is not ready.
import { CreateQueueCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readOutboxBacklog, startBacklogSampler } from '../../src/observe/backlog.ts';
import { recordRunFinished } from '../../src/observe/delivery-metrics.ts';
import { REDIS_FALLBACK_OPERATIONS } from '../../src/observe/redis-fallback.ts';
import { queueUrl } from '../../src/queue/names.ts';
import { isMissingQueueError, watchReceives } from '../../src/queue/receive-watch.ts';
import { cancelRunNow } from '../../src/work/operate/cancel-run.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { sampleValue, scrape } from '../support/prometheus-text.ts';
import { waitFor } from '../support/wait-for.ts';

let h: WorkHarness;
let metricsUrl: string;

beforeAll(async () => {
  h = await workHarness();
  const runtime = await h.startWorkers({ queues: ['default'], healthPort: 0, healthHost: '127.0.0.1' });
  metricsUrl = `http://127.0.0.1:${runtime.healthPort}/metrics`;
});
afterAll(async () => h?.close());

const RELAY_METRICS = ['svc_outbox_pending', 'svc_outbox_oldest_pending_seconds', 'svc_relay_sent_total', 'svc_relay_send_failures_total', 'svc_queue_messages'];

describe('what a process exports before it relays (this file\'s first test: nothing here has relayed yet)', () => {
  it('a worker that does not relay exports no relay metric; every redis fallback operation has a series at 0 from the start', async () => {
    const text = await scrape(metricsUrl);
    for (const name of RELAY_METRICS) expect(text, name).not.toMatch(new RegExp(`^${name}[ {]`, 'm'));
    for (const operation of REDIS_FALLBACK_OPERATIONS) expect(text).toContain(`svc_redis_fallbacks_total{operation="${operation}"} `);
    // Once this process relays (one pass), the relay's metrics appear.
    await h.relay();
    const after = await scrape(metricsUrl);
    expect(after).toMatch(/^svc_relay_sent_total /m);
  });
});

describe('run labels', () => {
  it('a run of a unit this build does not register is labelled unregistered, in the finished counter and the duration', async () => {
    const before = await scrape(metricsUrl);
    for (let i = 0; i < 5; i++) recordRunFinished({ name: `stray.unit_${i}`, queue: 'default', queuedAt: new Date(), startedAt: new Date() }, 'failed');
    const after = await scrape(metricsUrl);
    expect(after).not.toContain('stray.unit_');
    const labels = { unit: 'unregistered', queue: 'default' };
    expect(sampleValue(after, 'svc_runs_finished_total', { ...labels, status: 'failed' }) - sampleValue(before, 'svc_runs_finished_total', { ...labels, status: 'failed' })).toBe(5);
    expect(sampleValue(after, 'svc_run_duration_seconds_count', labels) - sampleValue(before, 'svc_run_duration_seconds_count', labels)).toBe(5);
  });
});

/** Moves one outbox row (either outbox: a system actor's run is a platform run) in time, sent or not. */
async function setRow(runId: string, o: { createdAgoS: number; availableInS: number; sent: boolean }): Promise<void> {
  for (const table of ['outbox_messages', 'platform_outbox_messages']) {
    await h.sql`UPDATE ${h.sql(table)} SET created_at = now() - make_interval(secs => ${o.createdAgoS}),
                  available_at = now() + make_interval(secs => ${o.availableInS}), sent_at = ${o.sent ? h.sql`now()` : null}
                 WHERE run_id = ${runId}`;
  }
}

describe('outbox age', () => {
  it('counts only due rows of active runs: a delayed row and a cancelled run\'s row do not age the outbox, a late due row does', async () => {
    await h.relay();
    const delayed = await h.dispatch('fixture.effect', { key: 'age-delayed' });
    await setRow(delayed.runId, { createdAgoS: 3_600, availableInS: 3_600, sent: false });
    const cancelled = await h.dispatch('fixture.effect', { key: 'age-cancelled' });
    await cancelRunNow(h.sql, { runId: cancelled.runId, by: 'metrics-test' });
    // A row the cancel could not withdraw (a relay pass held it): still unsent, its run final.
    await setRow(cancelled.runId, { createdAgoS: 3_600, availableInS: -3_600, sent: false });
    const quiet = await readOutboxBacklog(h.sql);
    expect(quiet.pending).toBeGreaterThanOrEqual(2);
    expect(quiet.oldestPendingSeconds).toBeLessThan(60);

    // A row due for an hour and unsent is late: the gauge shows it.
    const late = await h.dispatch('fixture.effect', { key: 'age-late' });
    await setRow(late.runId, { createdAgoS: 3_600, availableInS: -3_600, sent: false });
    expect((await readOutboxBacklog(h.sql)).oldestPendingSeconds).toBeGreaterThanOrEqual(3_500);
    await h.relay();
    await h.waitForStatus(late.runId, ['succeeded']);
    for (const runId of [delayed.runId, cancelled.runId]) await setRow(runId, { createdAgoS: 3_600, availableInS: 0, sent: true });
  });
});

describe('cancelled runs', () => {
  it('an operator\'s cancel is counted as a finished run with status cancelled, once, by the worker that meets it (queued and running)', async () => {
    const labels = { unit: 'fixture.effect', queue: 'default', status: 'cancelled' };
    const before = sampleValue(await scrape(metricsUrl), 'svc_runs_finished_total', labels);
    // Queued: the cancel comes first, then its message (sent before the cancel) reaches the worker.
    const queued = await h.dispatch('fixture.effect', { key: 'cancel-queued' });
    await cancelRunNow(h.sql, { runId: queued.runId, by: 'metrics-test' });
    await h.sendRaw('default', queued.envelope);
    await h.waitForReceives(queued.runId, 1);
    // Running: the handler sleeps; the cancel aborts it within a heartbeat interval.
    const running = await h.dispatch('fixture.effect', { key: 'cancel-running', sleepMs: 30_000 });
    await h.relay();
    await h.waitForStatus(running.runId, ['running']);
    await cancelRunNow(h.sql, { runId: running.runId, by: 'metrics-test' });
    let text = '';
    await waitFor(
      async () => {
        text = await scrape(metricsUrl);
        return sampleValue(text, 'svc_runs_finished_total', labels) - before >= 2;
      },
      15_000,
      { stepMs: 100, what: 'both cancelled runs to be counted' },
    );
    expect(sampleValue(text, 'svc_runs_finished_total', labels) - before).toBe(2);
  });
});

describe('queue depth reads', () => {
  it('a queue whose depth cannot be read loses its series, counts each failure and warns once per streak', async () => {
    const good = startBacklogSampler({ sql: h.sql, sqs: h.sqs, queueUrlPrefix: h.queueUrlPrefix, intervalMs: 100, queues: ['default'] });
    await waitFor(async () => (await scrape(metricsUrl)).includes('svc_queue_messages{queue="default",state="visible"}'), 5_000, { what: 'the default queue depth' });
    await good.stop();
    const calls = { warn: 0, debug: 0, info: 0 };
    const log = { warn: () => void calls.warn++, debug: () => void calls.debug++, info: () => void calls.info++ };
    const errorsBefore = sampleValue(await scrape(metricsUrl), 'svc_queue_depth_read_errors_total', { queue: 'default' });
    // A prefix naming no queue: every read of `default` fails.
    const bad = startBacklogSampler({ sql: h.sql, sqs: h.sqs, queueUrlPrefix: `${h.queueUrlPrefix}absent-`, intervalMs: 50, queues: ['default'], log });
    try {
      let text = '';
      await waitFor(
        async () => {
          text = await scrape(metricsUrl);
          return sampleValue(text, 'svc_queue_depth_read_errors_total', { queue: 'default' }) - errorsBefore >= 3;
        },
        10_000,
        { stepMs: 50, what: 'three failed depth reads' },
      );
      expect(text).not.toContain('svc_queue_messages{queue="default"');
      expect(calls.warn).toBe(1);
      expect(calls.debug).toBeGreaterThanOrEqual(2);
    } finally {
      await bad.stop();
    }
  });
});

describe('readiness and missing queues', () => {
  it('a worker consuming a queue that does not exist is not ready, and says which queue', async () => {
    const runtime = await h.startWorkers({ queues: ['bulk'], queueUrlPrefix: `${h.queueUrlPrefix}absent-`, healthPort: 0, healthHost: '127.0.0.1' });
    await waitFor(() => runtime.state().reason?.includes('bulk') === true, 10_000, { what: 'the missing queue to be noticed' });
    expect(runtime.state().ready).toBe(false);
    const readyz = await fetch(`http://127.0.0.1:${runtime.healthPort}/readyz`);
    expect(readyz.status).toBe(503);
    expect(((await readyz.json()) as { reason: string }).reason).toContain('does not exist');
    await runtime.stop();
  });

  it('a receive watch is missing after "no such queue" and clears at the first receive that succeeds', async () => {
    const watch = watchReceives(h.sqs);
    const name = `${h.queueUrlPrefix.split('/').pop()}watched`;
    const url = queueUrl(h.queueUrlPrefix, 'watched');
    const missing = await watch.client.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 0 })).catch((error: unknown) => error);
    expect(isMissingQueueError(missing)).toBe(true);
    expect(watch.missing).toBe(true);
    await h.sqs.send(new CreateQueueCommand({ QueueName: name }));
    await watch.client.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 0 }));
    expect(watch.missing).toBe(false);
  });
});
