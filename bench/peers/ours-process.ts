// A process of `ours` for the benchmarks: BENCH_ROLE=workers consumes the `default` queue with the
// bench fixture unit (startWorkerRuntime: consumer, runner, idempotency, trail) and, with
// BENCH_RELAY=true, also runs the outbox relay in the same process, as the workers service with
// SVC_RELAY=true does in the deployment the README describes (npm start, compose.yaml);
// BENCH_ROLE=relay runs the relay alone (the fairness bench starts several). Both are the service's own
// runtime built from explicit settings. Prints READY once running and stops gracefully on SIGTERM.
//
// Environment: BENCH_ROLE, BENCH_DATABASE_URL, BENCH_REDIS_URL, BENCH_SQS_ENDPOINT,
// BENCH_SQS_QUEUE_URL_PREFIX, BENCH_CONCURRENCY, BENCH_GROUP_COMMIT=true (the fixture unit with group commit;
// default: a default unit), BENCH_SQS_WAIT_SECONDS (default 2), BENCH_RELAY=true
// (workers: run the relay too), BENCH_RELAY_PAUSED=true (the relay starts paused, waiting for `resume`),
// BENCH_TENANT_INFLIGHT_MAX (relay: the fairness cap, default 0 = off; BENCH_TENANT_INFLIGHT_LONE_MAX its lone room for every queue, default each queue's from the units as the service's, BENCH_LONE_MAX_WAIT_MS its bound in time; above 0 the workers also wake a capped
// relay as they finish runs, which BENCH_ROOM_SIGNALS=true asks of a workers process serving a relay of its own), BENCH_CAPPED_POLL_MS (relay: its
// short poll while the cap holds rows back; default the relay's) and BENCH_SQS_FAIR_GROUPS=true (relay:
// MessageGroupId).
// IPC: `pause` / `resume` (the relay, answered `paused` / `resumed`) and `gc-pauses` (answered
// `{ gcPauses }`: the GC pauses since the last ask).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { createSql } from '../../src/db/client.ts';
import { createRedis } from '../../src/kv/client.ts';
import { createSqsClient } from '../../src/queue/client.ts';
import { loadUnits } from '../../src/work/catalog.ts';
import { startRelay, type Relay } from '../../src/work/runtime/produce/relay.ts';
import { loneRoomsOf } from '../../src/work/runtime/produce/tenant-inflight.ts';
import { startWorkerRuntime } from '../../src/work/runtime/worker-runtime.ts';
import type { WorkUnit } from '../../src/work/define/unit.ts';
import { recordGcPauses } from './gc-pauses.ts';

export const FIXTURE_UNITS_DIR = 'bench/fixtures/units';
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}

async function start(): Promise<void> {
  const role = required('BENCH_ROLE');
  if (role !== 'workers' && role !== 'relay') throw new Error(`BENCH_ROLE must be workers or relay, not ${role}`);
  const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 10);
  const logger = pino({ level: process.env.BENCH_LOG_LEVEL ?? 'warn', base: { role } }, pino.destination(2));
  // IPC `gc-pauses`: this process's GC pauses since the last ask (the work bench's `# STEADY_GC`).
  const gcPauses = recordGcPauses();
  process.on('message', (message: unknown) => {
    if (message === 'gc-pauses') process.send?.({ gcPauses: gcPauses.take() });
  });
  // The pool rule of the workers: 2 x slots + 2.
  const sql = createSql(required('BENCH_DATABASE_URL'), {
    max: role === 'workers' ? 2 * concurrency + 2 : 4,
    applicationName: `bench-ours-${role}`,
  });
  // The workers' connection is auto-pipelined, as in src/main/workers.ts.
  const redis = createRedis(required('BENCH_REDIS_URL'), { name: `bench-ours-${role}`, autoPipelining: role === 'workers' });
  redis.on('error', () => {});
  const sqs = createSqsClient({ region: 'us-east-1', endpoint: required('BENCH_SQS_ENDPOINT'), localCredentials: true });
  // BENCH_COUNT_CALLS=true: SQS calls per command (and messages they carried) are printed on stderr at exit.
  const calls = new Map<string, { calls: number; entries: number }>();
  if (process.env.BENCH_COUNT_CALLS === 'true') {
    // Around the client's send, not in the SDK's middleware stack: the delivery path's calls skip the stack (src/queue/direct-calls.ts).
    const send = sqs.send.bind(sqs) as (command: unknown, ...rest: unknown[]) => Promise<unknown>;
    (sqs as unknown as { send: unknown }).send = async (command: { constructor: { name: string }; input: { Entries?: unknown[] } }, ...rest: unknown[]) => {
      const output = (await send(command, ...rest)) as { Messages?: unknown[] };
      const name = command.constructor.name;
      const c = calls.get(name) ?? { calls: 0, entries: 0 };
      c.calls += 1;
      c.entries += command.input.Entries?.length ?? output.Messages?.length ?? 1;
      calls.set(name, c);
      return output;
    };
  }
  const loaded = await loadUnits(root, { dir: FIXTURE_UNITS_DIR });
  // Same concurrency as every other system: the fixture's slots come from the harness.
  // BENCH_GROUP_COMMIT=true: the opt-in group commit (the system `ours-group`); otherwise a default unit.
  const groupCommit = process.env.BENCH_GROUP_COMMIT === 'true';
  const units = new Map<string, WorkUnit>([...loaded].map(([name, unit]) => [name, { ...unit, concurrency, groupCommit }]));

  const queueUrlPrefix = required('BENCH_SQS_QUEUE_URL_PREFIX');
  const instance = `bench-${role}-${process.pid}`;
  let stopRole: (() => Promise<void>) | undefined;
  if (role === 'workers') {
    const runtime = await startWorkerRuntime({
      sql,
      redis,
      sqs,
      queueUrlPrefix,
      queues: ['default'],
      units,
      logger,
      workerInstance: instance,
      waitSeconds: Number(process.env.BENCH_SQS_WAIT_SECONDS ?? 2),
      ...(process.env.BENCH_RECEIVE_LINGER_MS ? { receiveLingerMs: Number(process.env.BENCH_RECEIVE_LINGER_MS) } : {}),
      drainMs: 5_000,
      latestMigration: null,
      healthPort: null,
      relay: null,
      // As SVC_TENANT_INFLIGHT_MAX > 0 sets it: the relay (below, or a process of its own) is fair.
      roomSignals: process.env.BENCH_ROOM_SIGNALS === 'true' || Number(process.env.BENCH_TENANT_INFLIGHT_MAX ?? 0) > 0,
    });
    await runtime.consuming;
    stopRole = () => runtime.stop();
  }
  if (role === 'relay' || process.env.BENCH_RELAY === 'true') {
    // The relay's process stays up for the whole invocation; the harness pauses the relay while it
    // fills the outbox with a burst and resumes it to drain (IPC `pause` / `resume`, answered when
    // done), so neither process start-up nor JIT warm-up lands inside a measured drain. In a workers
    // process it shares the process's pool, Redis connection and SQS client, as the runtime's own relay
    // (SVC_RELAY=true) does.
    const relayOptions = {
      sql, redis, sqs, queueUrlPrefix, instance, log: logger,
      tenantInflightMax: Number(process.env.BENCH_TENANT_INFLIGHT_MAX ?? 0),
      // Unset: each queue's from the units, as the workers service does (loneRoomsOf).
      tenantInflightLoneMax: process.env.BENCH_TENANT_INFLIGHT_LONE_MAX
        ? Number(process.env.BENCH_TENANT_INFLIGHT_LONE_MAX)
        : loneRoomsOf(units.values(), Number(process.env.BENCH_TENANT_INFLIGHT_MAX ?? 0)),
      ...(process.env.BENCH_LONE_MAX_WAIT_MS ? { loneMaxWaitMs: Number(process.env.BENCH_LONE_MAX_WAIT_MS) } : {}),
      fairGroups: process.env.BENCH_SQS_FAIR_GROUPS === 'true',
      ...(process.env.BENCH_CAPPED_POLL_MS ? { cappedPollMs: Number(process.env.BENCH_CAPPED_POLL_MS) } : {}),
    };
    let relay: Relay | undefined = process.env.BENCH_RELAY_PAUSED === 'true' ? undefined : startRelay(relayOptions);
    process.on('message', (message: unknown) => {
      void (async () => {
        if (message === 'pause') {
          await relay?.stop();
          relay = undefined;
          process.send?.('paused');
        } else if (message === 'resume') {
          relay ??= startRelay(relayOptions);
          process.send?.('resumed');
        }
      })();
    });
    const stopWorkers = stopRole;
    stopRole = async () => {
      await relay?.stop();
      await stopWorkers?.();
    };
  }
  process.stdout.write('READY\n');

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    try {
      await stopRole?.();
    } finally {
      for (const [name, c] of calls) console.error(`# SQS_CALLS role=${role} command=${name} calls=${c.calls} messages=${c.entries}`);
      await sql.end({ timeout: 5 });
      redis.disconnect();
      sqs.destroy();
      process.exit(0);
    }
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  // The harness died: nobody will send SIGTERM.
  process.on('disconnect', () => void stop());
}

start().catch((error: unknown) => {
  console.error(`bench ours process failed: ${(error as Error).stack ?? String(error)}`);
  process.exit(1);
});
