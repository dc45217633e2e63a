// A workers process killed with SIGKILL while it holds groups of a `groupCommit` unit: their messages
// come back once the unit's window has passed (its lease: timeout 5 s + margin 1 s), not after the
// queue's visibility timeout (60 s here, standing for the bulk queue's 15 minutes), so the runs complete
// within seconds of the kill.
import type { ChildProcess } from 'node:child_process';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueUrl } from '../../src/queue/names.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
import { CHAOS_GROUP_UNITS } from '../fixtures/units/runtime-units.ts';
import { startWorkerChild } from '../fixtures/worker-child-process.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { recordingProxy, type RecordingProxy } from '../support/recording-proxy.ts';
import { waitFor } from '../support/wait-for.ts';

/** The visibility timeout of the child's receives: far past the unit's window. */
const QUEUE_VISIBILITY_SECONDS = 60;

let h: WorkHarness;
let child: ChildProcess | undefined;
/** Between the child and the queue server: what the child asked of SQS. */
let sqsProxy: RecordingProxy;

/** Receipt handles whose visibility the child set below the queue's (kept for the unit's window). */
function keptReceipts(): Set<string> {
  const text = sqsProxy.chunks.join('');
  const kept = new Set<string>();
  for (const entry of text.match(/\{[^{}]*"ReceiptHandle"[^{}]*\}/g) ?? []) {
    const receipt = /"ReceiptHandle":"([^"]+)"/.exec(entry)?.[1];
    const seconds = Number(/"VisibilityTimeout":(\d+)/.exec(entry)?.[1] ?? NaN);
    if (receipt && seconds < QUEUE_VISIBILITY_SECONDS) kept.add(receipt);
  }
  return kept;
}

beforeAll(async () => {
  h = await workHarness({ units: CHAOS_GROUP_UNITS });
  sqsProxy = await recordingProxy(h.endpoint);
});
afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await sqsProxy?.close();
  await h?.close();
});

// The child's SQS calls go through the recording proxy; its receives keep messages for the queue's visibility.
const startChild = () => startWorkerChild(h, 'group', { CHILD_SQS_ENDPOINT: sqsProxy.url, CHILD_VISIBILITY_SECONDS: String(QUEUE_VISIBILITY_SECONDS) });

async function visibleInBulk(): Promise<number> {
  const out = await h.sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl(h.queueUrlPrefix, 'bulk'), AttributeNames: ['ApproximateNumberOfMessages'] }));
  return Number(out.Attributes?.ApproximateNumberOfMessages ?? '-1');
}

describe('group commit: a dead worker’s messages', () => {
  it('R-WRK-07 a workers process killed with SIGKILL holding groups of a group-commit unit: its messages come back within the unit’s window, not the queue’s visibility, and every run succeeds once', async () => {
    child = await startChild();
    const actor = { kind: 'system' as const, label: 'test' };
    // Every group's first insert waits on this lock, so the child holds all thirty messages in groups.
    const lock = await h.sql.reserve();
    try {
      await lock`BEGIN`;
      await lock`LOCK TABLE fixture_effects IN EXCLUSIVE MODE`;
      const runIds: string[] = [];
      for (let i = 0; i < 30; i += 1) runIds.push((await h.dispatch('fixture.group_effect', { key: `crash-vis-${i}` }, actor)).runId);
      await h.relay();
      await waitFor(async () => (await visibleInBulk()) === 0, 15_000, { what: 'every message received by the child' });
      await waitFor(async () => (await h.sql`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO fixture_effects%'`).length > 0, 15_000, {
        what: 'a group of the child inside its transaction',
      });
      // And the child has kept them for the unit's window (a message it had not kept yet when killed would
      // wait out the queue's visibility: that is the window this test is not about).
      await waitFor(() => keptReceipts().size >= 29, 15_000, { what: 'the held messages kept for the unit\'s window' });
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGKILL');
      await exited;
      await lock`COMMIT`;
      const killedAt = performance.now();
      await h.startWorkers({ queues: ['bulk'] });
      // Window 6 s (timeout 5 s + margin 1 s); the queue's visibility would keep them away for 60 s.
      for (const runId of runIds) {
        const run = await h.waitForStatus(runId, ['succeeded', 'failed'], 25_000);
        expect(run.status, JSON.stringify({ run, trail: await h.trail(runId) })).toBe('succeeded');
      }
      expect(performance.now() - killedAt).toBeLessThan(25_000);
      for (const [i, runId] of runIds.entries()) {
        expect(await h.effects(`crash-vis-${i}`)).toBe(1);
        expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
      }
    } finally {
      await lock`ROLLBACK`.catch(() => {});
      lock.release();
    }
  });
});
