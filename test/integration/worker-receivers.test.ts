// Several receives at once: a queue with many slots runs several pollers over the same
// slots. During a backlog the receives under way never ask together for more than the free slots;
// on an idle queue only the first poller receives, with its long poll; a stop ends every poller.
// Real fauxqs, PostgreSQL and Redis; the SQS client handed to the consumer only records each
// ReceiveMessage on its way to the real server (what it asks for, when it goes out and answers).
import { ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { receiversFor } from '../../src/work/runtime/consume/consumer.ts';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import { bareConsumer } from '../fixtures/bare-consumer.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { waitFor } from '../support/wait-for.ts';

// The harness's pool (30 connections) serves 2 x 12 + 2 (R-WRK-11).
const SLOTS = 12;
/** How long a receive that got messages takes to answer here. */
const ANSWER_DELAY_MS = 50;

/** Handlers that run until the test opens their gate; how many have returned; runs per key. */
const gates = new Map<string, () => void>();
let returned = 0;
const executions = new Map<string, number>();

const gatedTask = defineTask({
  name: 'fixture.gated',
  queue: 'bulk',
  context: 'system',
  concurrency: SLOTS,
  timeoutSeconds: 60,
  payload: z.object({ key: z.string() }),
  handler: async (p) => {
    executions.set(p.key, (executions.get(p.key) ?? 0) + 1);
    await new Promise<void>((resolve) => gates.set(p.key, resolve));
    returned++;
    return {};
  },
});

const UNITS: ReadonlyMap<string, WorkUnit> = new Map([[gatedTask.name, gatedTask]]);

let h: WorkHarness;

beforeAll(async () => {
  h = await workHarness({ units: UNITS });
});
afterAll(async () => h?.close());

interface Receive {
  asked: number;
  at: number;
  answeredAt?: number;
}

/**
 * The real client, recording each ReceiveMessage. At each one it checks that the messages received and
 * not yet returned by their handler, plus what the receives under way (this one included) ask for, fit
 * in the slots: the consumer holds a message from its receive's answer until it settles, after its
 * handler returns, so this count never exceeds what the consumer holds.
 */
function recordingReceives() {
  const receives: Receive[] = [];
  const overAsked: string[] = [];
  let received = 0;
  let underWay = 0;
  let askedUnderWay = 0;
  let mostUnderWay = 0;
  const client = {
    send(command: Parameters<SQSClient['send']>[0], options?: Parameters<SQSClient['send']>[1]) {
      if (!(command instanceof ReceiveMessageCommand)) return h.sqs.send(command, options);
      const asked = command.input.MaxNumberOfMessages ?? 1;
      const held = received - returned;
      if (held + askedUnderWay + asked > SLOTS) overAsked.push(`held ${held}, asked under way ${askedUnderWay}, asking ${asked}`);
      const entry: Receive = { asked, at: performance.now() };
      receives.push(entry);
      underWay++;
      askedUnderWay += asked;
      mostUnderWay = Math.max(mostUnderWay, underWay);
      // One callback updates the counts on either outcome, so no receive sees them half updated.
      const answered = (got: number) => {
        received += got;
        underWay--;
        askedUnderWay -= asked;
        entry.answeredAt = performance.now();
      };
      return h.sqs.send(command, options).then(
        async (out) => {
          // An answer with messages arrives after a queue's usual delay (a real SQS's tens of ms, not
          // loopback's one), so slots freed while it is under way meet it, however the finishes that
          // freed them were spread (a finish alone and finishes committed together end at different times).
          if (out.Messages?.length) await new Promise((resolve) => setTimeout(resolve, ANSWER_DELAY_MS));
          answered(out.Messages?.length ?? 0);
          return out;
        },
        (error: unknown) => {
          answered(0);
          throw error;
        },
      );
    },
  } as unknown as SQSClient;
  return { receives, overAsked, client, mostUnderWay: () => mostUnderWay };
}

/** A consumer of `bulk` with SLOTS slots and three pollers, receiving through `client`. */
function gatedConsumer(client: SQSClient) {
  return bareConsumer(h, {
    sqs: client,
    queue: 'bulk',
    units: UNITS,
    workerInstance: 'test-receivers',
    visibilitySeconds: 60,
    heartbeatIntervalMs: 20_000,
    waitSeconds: 1,
    slots: SLOTS,
    receivers: 3,
    receiveLingerMs: 0,
    ackLingerMs: 0,
  });
}

describe('several receives at once', () => {
  it('one poller per two full batches of slots, at most four', () => {
    expect([1, 10, 19, 20, 39, 40, 60, 80, 100, 1000].map(receiversFor)).toEqual([1, 1, 1, 1, 1, 2, 3, 4, 4, 4]);
  });

  it('during a backlog several receives go out at once and never ask together for more than the free slots; an idle queue has one long poll; a stop ends every poller', async () => {
    const { receives, overAsked, client, mostUnderWay } = recordingReceives();
    const consumer = gatedConsumer(client);
    const runs: Array<{ runId: string }> = [];
    for (let i = 0; i < 3 * SLOTS; i++) runs.push(await h.dispatch('fixture.gated', { key: `r${i}` }));
    await h.relay();
    consumer.start();

    // The slots fill; half of them free at once, again and again, while the queue still has messages.
    let opened = 0;
    while (opened < runs.length) {
      const running = Math.min(SLOTS, runs.length - opened);
      await waitFor(() => gates.size === running, 15_000, { what: `${running} handlers to run` });
      for (const key of [...gates.keys()].slice(0, Math.min(SLOTS / 2, running))) {
        gates.get(key)!();
        gates.delete(key);
        opened++;
      }
    }
    for (const r of runs) expect((await h.waitForStatus(r.runId, ['succeeded'])).status).toBe('succeeded');
    expect([...executions.values()].every((n) => n === 1)).toBe(true);
    expect(executions.size).toBe(runs.length);
    expect(overAsked).toEqual([]);
    expect(mostUnderWay()).toBeGreaterThanOrEqual(2);
    expect(mostUnderWay()).toBeLessThanOrEqual(3);

    // The queue is empty: the extra pollers stop receiving, and the first one long-polls alone. This
    // holds once the last four receives are three long polls (each about the 1 s wait) that never
    // overlapped, and the one under way after them.
    const longPollsAlone = () => {
      const last = receives.slice(-4);
      if (last.length < 4 || last[3]!.answeredAt !== undefined) return false;
      const answered = last.slice(0, 3);
      if (answered.some((r) => r.answeredAt === undefined || r.answeredAt - r.at < 800)) return false;
      return last.every((r, i) => i === 0 || r.at >= last[i - 1]!.answeredAt!);
    };
    await waitFor(longPollsAlone, 15_000, { stepMs: 50, what: 'one long poll at a time on the idle queue' });

    consumer.stopFetching();
    await waitFor(() => !consumer.polling, 3_000, { what: 'every poller to end' });
    expect(consumer.inFlight).toBe(0);
  });

  it('a stop while every slot is busy ends every poller at once, those waiting for a slot too', async () => {
    // A poll a stopped consumer may have left under way would take these messages for their visibility.
    await h.fenceAbandonedPolls('bulk');
    const { client } = recordingReceives();
    const consumer = gatedConsumer(client);
    const runs: Array<{ runId: string }> = [];
    for (let i = 0; i < 2 * SLOTS; i++) runs.push(await h.dispatch('fixture.gated', { key: `s${i}` }));
    await h.relay();
    consumer.start();
    await waitFor(() => gates.size === SLOTS && consumer.inFlight === SLOTS, 15_000, { what: 'every slot busy' });
    consumer.stopFetching();
    await waitFor(() => !consumer.polling, 3_000, { what: 'every poller to end with the slots still busy' });
    expect(consumer.inFlight).toBe(SLOTS);
    for (const key of [...gates.keys()]) {
      gates.get(key)!();
      gates.delete(key);
    }
    await waitFor(() => consumer.inFlight === 0, 15_000, { what: 'the runs in the slots to settle' });
    const statuses = await Promise.all(runs.map(async (r) => (await h.run(r.runId))?.status));
    expect(statuses.filter((s) => s === 'succeeded')).toHaveLength(SLOTS);
    expect(statuses.filter((s) => s === 'queued')).toHaveLength(SLOTS);
  });
});
