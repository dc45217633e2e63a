// Failure paths of the worker runtime on real services: transient retries with backoff up to the fifth
// receive, permanent failures, unknown units, exhausted receives, timeouts and progress.
import { ChangeMessageVisibilityCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueUrl } from '../../src/queue/names.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';

let h: WorkHarness;

beforeAll(async () => {
  h = await workHarness();
  // `bulk` is left unconsumed here: a test receives messages there by hand first.
  await h.startWorkers({ queues: ['critical', 'default', 'maintenance'] });
});
afterAll(async () => h?.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('worker failures', () => {
  it('R-WRK-04 R-WRK-05 R-WRK-03 R-TRL-08 a handler that always fails transiently is retried to the fifth receive, then failed and dead-lettered', async () => {
    const { runId } = await h.dispatch('fixture.effect', { key: 'always-transient', fail: 'transient' });
    await h.relay();
    const run = await h.waitForStatus(runId, ['failed'], 30_000);
    expect(run.finished_at).not.toBeNull();
    expect(run.attempts).toBe(5);
    const trail = (await h.waitForEvent(runId, 'dead_lettered')).filter((t) => t.event !== 'sent');
    const attempt = ['received', 'started', 'retry_scheduled'];
    expect(events(trail)).toEqual(['queued', ...attempt, ...attempt, ...attempt, ...attempt, 'received', 'started', 'failed', 'dead_lettered']);
    expect(trail.filter((t) => t.event === 'received').map((t) => t.receive_count)).toEqual([1, 2, 3, 4, 5]);
    const retries = trail.filter((t) => t.event === 'retry_scheduled');
    expect(retries.every((t) => t.error_code === 'FIXTURE_TRANSIENT')).toBe(true);
    // Exponential backoff through visibility: 200 ms base doubling, capped at 1 s, in whole seconds,
    // drawn with full jitter: each delay lies between 0 and its bound [0, 0, 1, 1].
    const bounds = [0, 0, 1, 1];
    expect(retries.map((t, i) => { const s = Number(t.detail.retryInSeconds); return s >= 0 && s <= bounds[i]!; })).toEqual([true, true, true, true]);
    expect(trail.find((t) => t.event === 'failed')).toMatchObject({ error_code: 'FIXTURE_TRANSIENT', detail: { receivesExhausted: true } });
    // Every attempt rolled back: no effect survived.
    expect(await h.effects('always-transient')).toBe(0);
    const dlq = await h.drainDlq('default');
    const copy = dlq.find((m) => JSON.parse(m.body).run_id === runId);
    expect(copy?.attributes).toMatchObject({ error_code: 'FIXTURE_TRANSIENT', run_id: runId, receive_count: '5', source_queue: 'default' });
    const [ledger] = await h.sql`SELECT status, attempt FROM platform_idempotency_keys ORDER BY id DESC LIMIT 1`;
    expect(ledger).toMatchObject({ status: 'failed_permanent', attempt: 5 });
  });

  it('R-WRK-03 a permanent failure fails the run at once and sends the message to the dead-letter queue with its error context', async () => {
    const { runId } = await h.dispatch('fixture.effect', { key: 'permanent', fail: 'permanent' });
    await h.relay();
    const run = await h.waitForStatus(runId, ['failed']);
    expect(run.attempts).toBe(1);
    expect(run.finished_at).not.toBeNull();
    const trail = (await h.waitForEvent(runId, 'dead_lettered')).filter((t) => t.event !== 'sent');
    expect(events(trail)).toEqual(['queued', 'received', 'started', 'failed', 'dead_lettered']);
    expect(trail.find((t) => t.event === 'failed')).toMatchObject({ error_code: 'VALIDATION_FAILED', error_type: 'ValidationFailure' });
    const dlq = await h.drainDlq('default');
    expect(dlq.find((m) => JSON.parse(m.body).run_id === runId)?.attributes).toMatchObject({
      error_code: 'VALIDATION_FAILED',
      error_message: 'the fixture fails permanently',
    });
  });

  it('R-TRL-05 R-TRL-08 a rolled-back attempt keeps its started at the database clock\'s instant, to the microsecond, after its received', async () => {
    // The `started` of a rolled-back attempt is written again after the rollback, with the instant the
    // claim read from the database clock. A millisecond rounding of that instant (a Date on the way)
    // could order it before its own `received` when both fall in the same millisecond.
    const { runId } = await h.dispatch('fixture.effect', { key: 'started-instant', fail: 'permanent' });
    await h.relay();
    await h.waitForStatus(runId, ['failed']);
    const [started] = await h.sql<{ exact: boolean; after_received: boolean; at: string; claimed: string }[]>`
      SELECT s.occurred_at = (s.detail->>'startedAt')::timestamptz AS exact, s.occurred_at::text AS at, s.detail->>'startedAt' AS claimed,
             s.occurred_at >= (SELECT occurred_at FROM platform_task_run_events WHERE run_id = s.run_id AND event = 'received' AND attempt = 1) AS after_received
        FROM platform_task_run_events s WHERE s.run_id = ${runId} AND s.event = 'started'`;
    expect(started, `started at ${started?.at}, claimed at ${started?.claimed}`).toMatchObject({ exact: true, after_received: true });
  });

  it('R-WRK-06 a message for an unknown unit fails with UNIT_NOT_REGISTERED, comes back with backoff and is dead-lettered after five receives', async () => {
    // A run written by a newer API for a unit these workers do not know.
    const runId = randomUUID();
    const correlation = randomUUID();
    await h.sql.begin(async (tx) => {
      await tx`INSERT INTO platform_task_runs (run_id, name, queue, trigger, actor_kind, actor_label, correlation_id, causation_id)
               VALUES (${runId}, 'fixture.from_the_future', 'default', 'dispatch', 'system', 'test', ${correlation}, ${correlation})`;
    });
    await h.sendRaw('default', { run_id: runId, kind: 'task', name: 'fixture.from_the_future', payload: {}, correlation_id: correlation, causation_id: correlation });
    const run = await h.waitForStatus(runId, ['failed'], 30_000);
    expect(run.attempts).toBe(0);
    const trail = await h.waitForEvent(runId, 'dead_lettered');
    expect(events(trail)).toEqual([
      ...Array(4).fill(['received', 'retry_scheduled']).flat(),
      'received',
      'failed',
      'dead_lettered',
    ]);
    expect(trail.filter((t) => t.event === 'retry_scheduled').every((t) => t.error_code === 'UNIT_NOT_REGISTERED')).toBe(true);
    expect(trail.find((t) => t.event === 'failed')!.error_code).toBe('UNIT_NOT_REGISTERED');
    const dlq = await h.drainDlq('default');
    expect(dlq.find((m) => JSON.parse(m.body).run_id === runId)?.attributes.error_code).toBe('UNIT_NOT_REGISTERED');
  });

  it('R-WRK-05 a delivery arriving with a receive count above five takes the permanent path without running the handler', async () => {
    const { runId, envelope } = await h.dispatch('fixture.effect', { key: 'exhausted' });
    // Receive the message five times (a worker crashing each time) on a queue no worker consumes yet.
    const url = queueUrl(h.queueUrlPrefix, 'bulk');
    await h.sendRaw('bulk', envelope);
    let received = 0;
    while (received < 5) {
      const out = await h.sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1, WaitTimeSeconds: 1, VisibilityTimeout: 0 }));
      for (const m of out.Messages ?? []) {
        received++;
        await h.sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle!, VisibilityTimeout: 0 }));
      }
    }
    await h.startWorkers({ queues: ['bulk'] });
    const run = await h.waitForStatus(runId, ['failed', 'succeeded'], 15_000);
    expect(run.status).toBe('failed');
    expect(run.attempts).toBe(0);
    expect(await h.effects('exhausted')).toBe(0);
    const trail = await h.waitForEvent(runId, 'dead_lettered');
    // The outbox row was never relayed (the message was sent by hand): the delivery records the send.
    expect(events(trail)).toEqual(['queued', 'sent', 'received', 'failed', 'dead_lettered']);
    expect(trail[2]!.receive_count).toBe(6);
    expect(trail[3]!.error_code).toBe('RECEIVES_EXHAUSTED');
  });

  it('R-UNT-03 a unit exceeding its timeoutSeconds is aborted, rolled back, retried, and succeeds with one effect', async () => {
    const { runId } = await h.dispatch('fixture.timeout', { key: 'slow-once', sleepMs: 3_000, sleepUntilAttempt: 1 });
    await h.relay();
    const run = await h.waitForStatus(runId, ['succeeded', 'failed'], 20_000);
    expect(run.status).toBe('succeeded');
    expect(run.attempts).toBe(2);
    const trail = (await h.trail(runId)).filter((t) => t.event !== 'sent');
    expect(events(trail)).toEqual(['queued', 'received', 'started', 'retry_scheduled', 'received', 'started', 'succeeded']);
    expect(trail[3]).toMatchObject({ error_code: 'UNIT_TIMED_OUT' });
    expect(await h.effects('slow-once')).toBe(1);
  });

  it('R-UNT-03 R-OBX-16 a failure of the statement finishing the run rolls back the effect, though COMMIT was sent right behind it', async () => {
    // The worker sends the finishing statement and COMMIT in one write. Here that statement waits on a
    // row lock held by this test until the unit's deadline cancels it: the pipelined COMMIT must roll
    // the whole effect transaction back, and the run must retry and succeed with one effect.
    const { runId } = await h.dispatch('fixture.timeout', { key: 'finish-fails', sleepMs: 700, sleepUntilAttempt: 1 });
    await h.relay();
    await h.waitForStatus(runId, ['running'], 10_000);
    // NO KEY UPDATE: it does not wait for the KEY SHARE lock the open effect transaction's trail rows
    // hold, and the finishing UPDATE waits for it.
    await h.sql.begin(async (tx) => {
      const [locked] = await tx`SELECT status FROM platform_task_runs WHERE run_id = ${runId} FOR NO KEY UPDATE`;
      expect(locked!.status).toBe('running');
      await sleep(2_500);
    });
    const run = await h.waitForStatus(runId, ['succeeded', 'failed'], 20_000);
    expect(run.status).toBe('succeeded');
    expect(run.attempts).toBe(2);
    const trail = (await h.trail(runId)).filter((t) => t.event !== 'sent');
    expect(events(trail)).toEqual(['queued', 'received', 'started', 'retry_scheduled', 'received', 'started', 'succeeded']);
    expect(trail[2]).toMatchObject({ detail: { effect: 'rolled_back' } });
    const effects = await h.sql`SELECT attempt FROM fixture_effects WHERE key = 'finish-fails'`;
    expect(effects.map((e) => e.attempt)).toEqual([2]);
  });

  it('R-UNT-08 R-TRL-08 progress commits in its own transaction while the effect transaction is still open', async () => {
    const { runId } = await h.dispatch('fixture.effect', { key: 'progress', progress: 40, sleepMs: 1_500 });
    await h.relay();
    const deadline = Date.now() + 10_000;
    let seen: { status: string; progress: number } | undefined;
    while (Date.now() < deadline) {
      const r = await h.run(runId);
      if (r && r.progress === 40) {
        seen = { status: r.status, progress: r.progress };
        break;
      }
      await sleep(20);
    }
    expect(seen).toEqual({ status: 'running', progress: 40 });
    // The effect row is not visible yet: its transaction has not committed.
    expect(await h.effects('progress')).toBe(0);
    await h.waitForStatus(runId, ['succeeded']);
    const trail = (await h.trail(runId)).filter((t) => t.event !== 'sent');
    // `started` got its id when the effect transaction wrote it, before `progress` committed.
    expect(events(trail)).toEqual(['queued', 'received', 'started', 'progress', 'succeeded']);
    expect(trail.find((t) => t.event === 'progress')!.detail).toEqual({ percent: 40 });
  });
});
