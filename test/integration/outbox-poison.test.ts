// Outbox rows and retry delays the queue cannot honour, on real services (PostgreSQL 18, Redis, the
// SQS-protocol server): a payload with characters SQS refuses, a row the queue refuses for ever, a
// cancelled run's refused row, and a retry delay near the 12 h visibility limit.
import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import { freePort } from '../../src/kv/redis-server.ts';
import { metricsText } from '../../src/observe/metrics.ts';
import { createSqsClient } from '../../src/queue/client.ts';
import { queueUrl } from '../../src/queue/names.ts';
import { createDispatcher } from '../../src/work/runtime/produce/dispatch.ts';
import { cancelRunNow } from '../../src/work/operate/cancel-run.ts';
import { purgeExpired } from '../../src/work/runtime/maintain/purge.ts';
import { OUTBOX_SEND_FAILED, relayPass, startRelay, type Relay } from '../../src/work/runtime/produce/relay.ts';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import { TransientFailure } from '../../src/work/define/unit-errors.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
import { events, SYSTEM_ACTOR, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { sampleValue } from '../support/prometheus-text.ts';
import { observeCommands } from '../support/sqs-observe.ts';
import { waitFor } from '../support/wait-for.ts';

/** The payload each run's handler was given, by run id (the workers run in this process). */
const seen = new Map<string, unknown>();

const echo = defineTask({
  name: 'poison.echo',
  queue: 'default',
  context: 'system',
  timeoutSeconds: 5,
  payload: z.record(z.string(), z.unknown()),
  handler: async (payload, run) => {
    seen.set(run.runId, payload);
    return {};
  },
});

/** Fails transiently with a retry delay of 12 h, the most a unit's policy may name. */
const farRetry = defineTask({
  name: 'poison.far_retry',
  queue: 'default',
  context: 'system',
  timeoutSeconds: 5,
  payload: z.object({}),
  retry: { backoff: { baseMs: 43_200_000, capMs: 43_200_000, jitter: 'none' } },
  handler: async () => {
    throw new TransientFailure('FAR_RETRY', 'fails, to be retried in 12 h');
  },
});

const UNITS: ReadonlyMap<string, WorkUnit> = new Map([echo, farRetry].map((u) => [u.name, u] as [string, WorkUnit]));
const dispatcher = createDispatcher({ resolve: (n) => UNITS.get(n), instance: 'test' });

let h: WorkHarness;
/** An SQS client whose SendMessageBatch entries for the runs in `refused` carry a U+FFFF on the wire: fauxqs refuses each of them itself (SenderFault). */
let refusing: SQSClient;
const refused = new Set<string>();
const relays: Relay[] = [];

beforeAll(async () => {
  h = await workHarness({ units: UNITS });
  // Workers without a relay: each test moves the outbox itself, through the client it means.
  await h.startWorkers();
  refusing = createSqsClient({ region: 'us-east-1', endpoint: h.endpoint, localCredentials: true }, { maxAttempts: 1 });
  observeCommands(refusing, (command, input) => {
    if (command !== 'SendMessageBatchCommand') return;
    for (const entry of input.Entries as Array<{ MessageBody: string }>) {
      if ([...refused].some((runId) => entry.MessageBody.includes(runId))) entry.MessageBody += '\uFFFF';
    }
  });
});
afterAll(async () => {
  await Promise.all(relays.splice(0).map((r) => r.stop()));
  refusing?.destroy();
  await h?.close();
});

async function dispatchDelayed(payload: Record<string, unknown> = {}): Promise<string> {
  const run = await inUnitOfWork(h.sql, SYSTEM_ACTOR, (tx) => dispatcher.dispatchTask(tx, 'poison.echo', payload, { actor: SYSTEM_ACTOR }));
  return run.runId;
}

async function outboxRow(runId: string) {
  const [row] = await h.sql<{ sent_at: Date | null; attempts: number }[]>`SELECT sent_at, attempts FROM platform_outbox_messages WHERE run_id = ${runId}`;
  return row;
}

/** One pass of the refusing relay over the platform outbox, after making every pending row due (the relay steps a refused row aside for a while). */
async function refusingPass(maxAttempts: number) {
  await h.sql`UPDATE platform_outbox_messages SET available_at = clock_timestamp() WHERE sent_at IS NULL`;
  return relayPass(h.sql, refusing, h.queueUrlPrefix, { instance: 'test-relay', maxAttempts }, ['platform']);
}

describe('a payload with characters SQS refuses in a message body', () => {
  it('is delivered: the body escapes them, and the handler sees exactly the payload dispatched', async () => {
    // U+FFFF and U+FFFE in a key and in values, beside characters SQS allows (a surrogate pair, a control JSON escapes anyway).
    const payload = { 'key\uFFFF': 'value \uFFFF end', nested: ['\uFFFE', { deep: 'a\uFFFFb' }], pair: '\u{1F600}', control: '\u0001' };
    const runId = await dispatchDelayed(payload);
    expect(await relayPass(h.sql, h.sqs, h.queueUrlPrefix, { instance: 'test-relay' }, ['platform'])).toMatchObject({ sent: 1, failed: 0 });
    await h.waitForStatus(runId, ['succeeded'], 15_000);
    expect(seen.get(runId)).toEqual(payload);
    expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
  });
});

describe('a row the queue refuses itself', () => {
  it('ends its run failed with OUTBOX_SEND_FAILED after maxAttempts refused passes, with a trail row saying why, and stops being pending', async () => {
    const runId = await dispatchDelayed({ n: 1 });
    refused.add(runId);
    expect(await refusingPass(3)).toMatchObject({ sent: 0, failed: 1 });
    expect(await refusingPass(3)).toMatchObject({ sent: 0, failed: 1 });
    // Two refused passes of three: still queued, still pending, and stepped aside (not due) after each.
    expect((await h.run(runId))!.status).toBe('queued');
    expect(await outboxRow(runId)).toMatchObject({ sent_at: null, attempts: 2 });
    const third = await refusingPass(3);
    expect(third).toMatchObject({ sent: 0, failed: 1, failedRuns: [runId] });
    const run = (await h.run(runId))!;
    expect(run).toMatchObject({ status: 'failed', outcome: { error: { code: OUTBOX_SEND_FAILED, type: 'OutboxSendFailure' } } });
    expect(run.finished_at).not.toBeNull();
    const trail = await h.trail(runId);
    expect(events(trail)).toEqual(['queued', 'failed']);
    expect(trail[1]).toMatchObject({
      error_code: OUTBOX_SEND_FAILED,
      detail: { queue_code: 'InvalidMessageContents', outbox_attempts: 3 },
    });
    expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
    expect((await outboxRow(runId))!.sent_at).not.toBeNull();
    // Given up: no longer read by a pass, and purged like a sent row.
    expect(await refusingPass(3)).toMatchObject({ sent: 0, failed: 0 });
    const purged = await inUnitOfWork(h.sql, SYSTEM_ACTOR, (tx) => purgeExpired(tx, { outboxRetentionMs: 0 }));
    expect(purged.platform_outbox_messages).toBeGreaterThanOrEqual(1);
    expect(await outboxRow(runId)).toBeUndefined();
  });

  it('a queue that does not answer, or answers for the whole call, counts attempts but never fails the run; it goes out once the queue is back', async () => {
    const runId = await dispatchDelayed({ n: 2 });
    const down = `http://127.0.0.1:${await freePort()}/000000000000/`; // nothing listens there
    const missing = `${h.endpoint}/000000000000/qmissing_`; // queues never created: an error answer for the whole call
    const plain = createSqsClient({ region: 'us-east-1', endpoint: h.endpoint, localCredentials: true }, { maxAttempts: 1 });
    try {
      for (let i = 0; i < 3; i++) {
        expect(await relayPass(h.sql, plain, down, { maxAttempts: 2 }, ['platform'])).toMatchObject({ sent: 0, failed: 1 });
        expect(await relayPass(h.sql, plain, missing, { maxAttempts: 2 }, ['platform'])).toMatchObject({ sent: 0, failed: 1 });
      }
    } finally {
      plain.destroy();
    }
    expect(await outboxRow(runId)).toMatchObject({ sent_at: null, attempts: 6 });
    expect((await h.run(runId))!.status).not.toBe('failed');
    // Failed for want of an answer: not stepped aside, due at once for the next pass.
    expect(await relayPass(h.sql, h.sqs, h.queueUrlPrefix, { instance: 'test-relay', maxAttempts: 2 }, ['platform'])).toMatchObject({ sent: 1, failed: 0 });
    await h.waitForStatus(runId, ['succeeded'], 15_000);
  });
});

describe('cancel of a run whose row the queue refuses', () => {
  it('withdraws the row: no longer pending (svc_outbox_pending back to 0), never sent, purged later', async () => {
    // A relay of its own, with the refusing client; its backlog sampler sets svc_outbox_pending.
    const relay = startRelay({ sql: h.sql, sqs: refusing, queueUrlPrefix: h.queueUrlPrefix, sweepIntervalMs: 100, backlogSampleIntervalMs: 100, instance: 'test-refusing-relay' });
    relays.push(relay);
    const pending = async () => sampleValue((await metricsText()).body, 'svc_outbox_pending');
    const runId = await dispatchDelayed({ n: 3 });
    refused.add(runId);
    await waitFor(async () => ((await outboxRow(runId))?.attempts ?? 0) >= 1, 10_000);
    await waitFor(async () => (await pending()) === 1, 5_000);
    expect(await cancelRunNow(h.sql, { runId, by: 'alice', reason: 'poison' })).toMatchObject({ result: 'cancelled', previousStatus: 'queued' });
    await waitFor(async () => (await pending()) === 0, 5_000);
    expect((await outboxRow(runId))!.sent_at).not.toBeNull();
    const trail = await h.trail(runId);
    expect(events(trail)).toEqual(['queued', 'failed']);
    expect(trail[1]!.detail).toMatchObject({ cancelled_by: 'alice', outbox_withdrawn: true });
    const purged = await inUnitOfWork(h.sql, SYSTEM_ACTOR, (tx) => purgeExpired(tx, { outboxRetentionMs: 0 }));
    expect(purged.platform_outbox_messages).toBeGreaterThanOrEqual(1);
    expect(await outboxRow(runId)).toBeUndefined();
    await relay.stop();
  });

  it('a row a relay pass held locked during the cancel is given up by the relay at its next refusal (its run is final)', async () => {
    const runId = await dispatchDelayed({ n: 4 });
    refused.add(runId);
    // A relay pass holds the row (FOR UPDATE) while the cancel commits: the cancel skips it.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = h.sql.begin(async (tx) => {
      await tx`SELECT id FROM platform_outbox_messages WHERE run_id = ${runId} FOR UPDATE`;
      locked();
      await released;
    });
    await isLocked;
    await cancelRunNow(h.sql, { runId, by: 'bob' });
    release();
    await holder;
    expect(await outboxRow(runId)).toMatchObject({ sent_at: null });
    // One refusal, far below maxAttempts: the run is final, so the row is given up at once.
    expect(await refusingPass(20)).toMatchObject({ sent: 0, failed: 1 });
    expect((await outboxRow(runId))!.sent_at).not.toBeNull();
    expect(events(await h.trail(runId))).toEqual(['queued', 'failed']);
  });
});

describe('a retry delay near the 12 h visibility limit', () => {
  it('is clamped to what the queue accepts for the message (12 h past its receipt, less a margin); the trail says the delay applied', async () => {
    const runId = (await inUnitOfWork(h.sql, SYSTEM_ACTOR, (tx) => dispatcher.dispatchTask(tx, 'poison.far_retry', {}, { actor: SYSTEM_ACTOR }))).runId;
    await h.relay();
    const trail = await h.waitForEvent(runId, 'retry_scheduled', 15_000);
    const retries = trail.filter((t) => t.event === 'retry_scheduled');
    expect(retries).toHaveLength(1);
    const applied = retries[0]!.detail.retryInSeconds as number;
    // 12 h past the receipt, less the seconds held and the 60 s margin.
    expect(applied).toBeLessThanOrEqual(43_200 - 60);
    expect(applied).toBeGreaterThan(43_200 - 60 - 30);
    expect(retries[0]!.detail.fallback).toBeUndefined();
    // Accepted: the run waits as retrying with its message in flight, not received again.
    expect((await h.run(runId))!.status).toBe('retrying');
    const out = await h.sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl(h.queueUrlPrefix, 'default'), AttributeNames: ['ApproximateNumberOfMessagesNotVisible'] }));
    expect(Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible)).toBeGreaterThanOrEqual(1);
  });
});

/**
 * Opt-in (SVC_TEST_MOTO=1; `python3 -m moto.server` must be installed): the same 12 h retry against
 * moto, which refuses a visibility change that takes a message past 12 h (it counts them from the send),
 * as SQS does (from the receipt). Without the clamp the change to 43200 s is refused there.
 */
describe.runIf(process.env.SVC_TEST_MOTO === '1')('a retry delay near the 12 h visibility limit, against moto', () => {
  it('is accepted by moto: the run waits as retrying, its message in flight, and the trail says the delay applied', async () => {
    const { spawn } = await import('node:child_process');
    const port = await freePort();
    const moto = spawn('python3', ['-m', 'moto.server', '-H', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
    const endpoint = `http://127.0.0.1:${port}`;
    const sqs = createSqsClient({ region: 'us-east-1', endpoint, localCredentials: true }, { maxAttempts: 1 });
    const prefix = `${endpoint}/123456789012/qmoto${port}_`;
    try {
      const { provisionQueues } = await import('../../src/queue/provision.ts');
      await waitFor(async () => provisionQueues(sqs, prefix, { default: 2 }, ['default']).then(() => true, () => false), 20_000, { stepMs: 200 });
      const runtime = await h.startWorkers({ sqs, queueUrlPrefix: prefix, queues: ['default'] });
      const runId = (await inUnitOfWork(h.sql, SYSTEM_ACTOR, (tx) => dispatcher.dispatchTask(tx, 'poison.far_retry', {}, { actor: SYSTEM_ACTOR }))).runId;
      expect(await relayPass(h.sql, sqs, prefix, { instance: 'test-relay' }, ['platform'])).toMatchObject({ sent: 1 });
      const trail = await h.waitForEvent(runId, 'retry_scheduled', 20_000);
      const retries = trail.filter((t) => t.event === 'retry_scheduled');
      expect(retries.map((r) => r.detail.fallback)).toEqual([undefined]);
      expect(retries[0]!.detail.retryInSeconds as number).toBeLessThanOrEqual(43_200 - 60);
      // Accepted: still in flight once the queue's 2 s visibility (and the default backoff a refusal fell back to) is long over.
      await waitFor(async () => {
        const out = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl(prefix, 'default'), AttributeNames: ['ApproximateNumberOfMessagesNotVisible'] }));
        return out.Attributes?.ApproximateNumberOfMessagesNotVisible === '1';
      }, 5_000);
      await new Promise((r) => setTimeout(r, 4_000)); // a refused change would have the message back within 2 s
      expect(events(await h.trail(runId)).filter((e) => e === 'received')).toHaveLength(1);
      expect((await h.run(runId))!.status).toBe('retrying');
      await runtime.stop();
    } finally {
      sqs.destroy();
      moto.kill();
    }
  }, 60_000);
});
