// A worker process whose dependencies are gone waits for them, it never spins. Killed chaos-test runs
// left worker children behind, each burning about 30% of a CPU for as long as they lived against a queue
// server, a Redis and a PostgreSQL that were gone: every receive was refused at once and the next went
// out at once (sqs-consumer polls again 0 ms after a failed receive, and the SDK's retry budget was
// soon spent), hundreds a second, each logged. The process measured is a real worker process
// (test/fixtures/worker-child.ts: the product's worker runtime) over real services the test kills: its
// own PostgreSQL cluster, a private redis-server and an SQS-protocol server of its own.
import type { ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createSqsClient } from '../../src/queue/client.ts';
import { startLocalSqsServer, type LocalSqsServer } from '../../src/queue/local-sqs-server.ts';
import { provisionQueues } from '../../src/queue/provision.ts';
import { relayPass } from '../../src/work/runtime/produce/relay.ts';
import { CHAOS_GROUP_UNITS } from '../fixtures/units/runtime-units.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import type { ChildUnits } from '../fixtures/worker-child.ts';
import { startWorkerChild } from '../fixtures/worker-child-process.ts';
import { ownCluster, type OwnCluster } from '../support/own-cluster.ts';
import { treeCpuSeconds } from '../../bench/peers/cpu.ts';
import { stoppableRedis, type StoppableRedis } from '../support/stoppable-redis.ts';
import { waitFor } from '../support/wait-for.ts';

/** What a worker waiting for its dependencies may use of one CPU over the window: it used ~30% spinning. */
const MAX_CPU_SHARE = 0.1;
const WINDOW_MS = 5_000;
const VISIBILITY = { critical: 2, default: 2, bulk: 2, maintenance: 2 };
const QUEUE_ERROR = '"msg":"queue error"';

let cluster: OwnCluster;
let h: WorkHarness;
let redis: StoppableRedis;
let server: LocalSqsServer | undefined;
let sqs: SQSClient;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  // PostgreSQL is stopped by the last test: a cluster of this file's own.
  cluster = await ownCluster('svc-outage-test');
  h = await workHarness({ redis: false, units: CHAOS_GROUP_UNITS, database: cluster.database });
  redis = await stoppableRedis('outage', { commandTimeoutMs: 300 });
  server = await startLocalSqsServer();
  sqs = createSqsClient({ region: 'us-east-1', endpoint: server.endpoint, localCredentials: true });
  await provisionQueues(sqs, server.queueUrlPrefix, VISIBILITY);
}, 120_000);
// Each test measures a child of its own: the previous one is gone.
afterEach(() => {
  for (const c of children) c.kill('SIGKILL');
});
afterAll(async () => {
  try {
    for (const c of children) c.kill('SIGKILL');
    sqs?.destroy();
    await server?.stop();
    await h?.close();
    await redis?.close();
  } finally {
    await cluster?.close();
  }
});

interface Child {
  pid: number;
  /** The lines it printed (its warnings and errors, JSON). */
  lines: string[];
}

/** A worker process on the `group` unit set (bulk: 160 slots, four pollers, as the chaos test's children), resolved once it consumes. */
async function startChild(units: ChildUnits, relay: boolean): Promise<Child> {
  const lines: string[] = [];
  const env = {
    CHILD_REDIS_URL: redis.url,
    CHILD_REDIS_COMMAND_TIMEOUT_MS: '300',
    CHILD_REDIS_PROBE_INTERVAL_MS: '250',
    CHILD_SQS_ENDPOINT: server!.endpoint,
    CHILD_QUEUE_URL_PREFIX: server!.queueUrlPrefix,
    CHILD_STAGE_TIMEOUT_MS: '1500',
    CHILD_RELAY: String(relay),
    CHILD_RELAY_SWEEP_MS: '500',
    CHILD_RESCUE_INTERVAL_MS: '500',
  };
  const proc = await startWorkerChild(h, units, env, (line) => lines.push(line));
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
  return { pid: proc.pid!, lines };
}

const count = (child: Child, text: string) => child.lines.filter((line) => line.includes(text)).length;

/** The child's CPU over WINDOW_MS, as a share of one CPU, and the receive failures it logged meanwhile. */
async function idleWindow(child: Child): Promise<{ share: number; queueErrors: number }> {
  const errorsBefore = count(child, QUEUE_ERROR);
  const before = treeCpuSeconds([child.pid]);
  const started = performance.now();
  await sleep(WINDOW_MS); // the measurement window itself, not a synchronisation
  const share = (treeCpuSeconds([child.pid]) - before) / ((performance.now() - started) / 1000);
  return { share, queueErrors: count(child, QUEUE_ERROR) - errorsBefore };
}

describe('a worker process whose dependencies are gone waits for them, never spins', () => {
  it('with its queue server gone its receives back off (under 10% of a CPU over 5 s), and it consumes again once the server is back', async () => {
    const child = await startChild('group', false);
    const port = server!.port;
    await server!.stop();
    server = undefined;
    // Refused twice: the pollers are in their failure path before the window opens.
    await waitFor(() => count(child, QUEUE_ERROR) >= 2, 10_000, { what: 'the refused receives logged' });
    const { share, queueErrors } = await idleWindow(child);
    server = await startLocalSqsServer({ port });
    await provisionQueues(sqs, server.queueUrlPrefix, VISIBILITY);
    expect(share, `CPU share ${share.toFixed(3)} with ${queueErrors} receive failures logged in ${WINDOW_MS} ms`).toBeLessThan(MAX_CPU_SHARE);

    // The backoff is bounded: a run dispatched once the server is back is received and succeeds.
    const { runId } = await h.dispatch('fixture.group_effect', { key: 'after-outage' });
    await relayPass(h.sql, sqs, server.queueUrlPrefix, { instance: 'test-relay' });
    await h.waitForStatus(runId, ['succeeded'], 30_000);
    expect(await h.effects('after-outage')).toBe(1);
  });

  it('with its queue server, Redis and PostgreSQL all gone, a worker running the relay stays under 10% of a CPU over 5 s', async () => {
    const child = await startChild('group', true);
    const errorsBefore = count(child, QUEUE_ERROR);
    await server!.stop();
    server = undefined;
    await redis.stopServer();
    await cluster.stop('immediate');
    // Every loop in its failure path: receives refused, Redis seen gone, a relay pass failed.
    await waitFor(
      () => count(child, QUEUE_ERROR) >= errorsBefore + 2 && count(child, 'running without redis') >= 1 && count(child, 'outbox relay pass failed') >= 1,
      20_000,
      { what: 'the worker seeing its queue server, Redis and PostgreSQL gone' },
    );
    const { share, queueErrors } = await idleWindow(child);
    expect(share, `CPU share ${share.toFixed(3)} with ${queueErrors} receive failures logged in ${WINDOW_MS} ms`).toBeLessThan(MAX_CPU_SHARE);
  });
});
