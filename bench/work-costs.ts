// `npm run bench -- work-costs [--smoke] [--runs N]`: what each guarantee of the work path costs, step
// by step, measured with the service's own functions on one connection (no concurrency: costs, not
// throughput). For N runs of the fixture task, each step is run over all N runs and timed on its own:
// wall time, CPU of this process (the client: postgres.js, ioredis, the AWS SDK, and the in-process
// SQS server), CPU of the PostgreSQL backend serving the connection, and CPU of the Redis server.
//
//   dispatch          run row + `queued` trail + outbox row (500 runs per transaction, as the bench's burst)
//   relay             SendMessageBatch + outbox sent_at + `sent` trail (relayPass, 100 rows per pass, as the figures recorded since 2026-11-23)
//   sqs_receive       ReceiveMessage (10) + DeleteMessageBatch of those messages (the best a consumer does)
//   redis_gate        SET NX PX gate, DEL status cache after registration, DEL + SET result after commit
//   register          the registration statement: actor context, run → running, `received` (autocommit)
//   effect_skeleton   BEGIN; actor context + statement_timeout + advisory lock; COMMIT (no ledger, no trail)
//   effect            the full effect transaction of a no-op handler: skeleton + ledger claim + `started`
//                     + ledger completed + run succeeded + `succeeded`
//   rate_limit_redis  a unit's rateLimit: one place taken in its shared window (the Redis script), per run
//   effect_skeleton_serial  effect_skeleton with a unit's serialKey: the turn check (earlier runs of the
//                     key through the trail's index, the key's advisory lock) in the opening statement
//   rate_limit_database  a unit's rateLimit while Redis is down: one place taken in the database's window
//                     (BEGIN; the window's advisory lock; the count of its places; a `received` carrying the
//                     place; COMMIT), per run. In the workers that registration also leaves the
//                     one-statement path (`register`) for the general one.
// Lines: COST step=<name> runs=<n> wall_ms=<x> client_cpu_ms=<x> pg_cpu_ms=<x> redis_cpu_ms=<x> (per run).
import fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import { DeleteMessageBatchCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { createSql, type Sql } from '../src/db/client.ts';
import { serialTurnColumn } from '../src/work/runtime/execute/serial-turn.ts';
import { ratePlaceDetail, roomInRateWindow } from '../src/work/runtime/execute/rate-window.ts';
import { appendTrailEvent } from '../src/work/runtime/store/trail.ts';
import { inUnitOfWork, type Actor } from '../src/db/unit-of-work.ts';
import { createRedis } from '../src/kv/client.ts';
import { databaseIdentityOf } from '../src/kv/database-identity.ts';
import { runStatusKey } from '../src/kv/keys.ts';
import { createSqsClient } from '../src/queue/client.ts';
import { queueUrl } from '../src/queue/names.ts';
import { advisoryKeyOf, claimKeyAndStart, fingerprintOf, gateKeyOf, idempotencyKeyOf, recordGateResultsAndEvict } from '../src/work/runtime/store/idempotency.ts';
import { relayPass } from '../src/work/runtime/produce/relay.ts';
import { admitInRedis } from '../src/kv/rate-limit.ts';
import { rateLimitKey } from '../src/kv/keys.ts';
import { finishDelivery, startDelivery } from '../src/work/runtime/store/run-store.ts';
import { benchJob } from './fixtures/units/bench/job.task.ts';
import { startServices } from './peers/services.ts';
import { createBenchTenant, prepareOurs } from './peers/systems/ours.ts';
import { redisServerPid, treeCpuSeconds } from './peers/cpu.ts';

const nowMs = () => performance.now();
const selfCpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

export async function main(args: string[]): Promise<number> {
  const smoke = args.includes('--smoke');
  const i = args.indexOf('--runs');
  const runs = i >= 0 && Number(args[i + 1]) > 0 ? Number(args[i + 1]) : smoke ? 200 : 3000;
  const log = (line: string) => console.error(`# ${line}`);
  const services = await startServices({ sqs: true, log });
  const rows: string[] = [];
  try {
    const pgUrl = await services.createDatabase('bench_costs');
    const stack = await prepareOurs({
      pgUrl,
      redisUrl: `${services.redis.url}/2`,
      sqs: { endpoint: services.sqs!.endpoint, queueUrlPrefix: services.sqs!.queueUrlPrefix },
      concurrency: 1,
      log: () => {},
    });
    // One connection: every statement measured runs on this backend.
    const sql: Sql = createSql(pgUrl, { max: 1, applicationName: 'bench-costs' });
    const redis = createRedis(`${services.redis.url}/2`, { name: 'bench-costs' });
    const sqs = createSqsClient({ region: 'us-east-1', endpoint: services.sqs!.endpoint, localCredentials: true });
    try {
      const [{ pid } = { pid: 0 }] = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
      const redisPid = redisServerPid(services.redis.port);
      const procCpuMs = (p: number | undefined) => (p ? treeCpuSeconds([p]) * 1000 : 0);
      const tenantId = await createBenchTenant(stack.sql, 'costs');
      const actor: Actor = { kind: 'system', tenantId, label: 'bench-producer' };
      const workerActor = { tenantId, userId: '', process: `worker:${benchJob.name}` };
      const instance = `bench-costs-${process.pid}`;
      const url = queueUrl(services.sqs!.queueUrlPrefix, 'default');

      const step = async (name: string, work: () => Promise<void>) => {
        const c0 = selfCpuMs();
        const p0 = procCpuMs(pid);
        const r0 = procCpuMs(redisPid);
        const t0 = nowMs();
        await work();
        const per = (v: number) => (v / runs).toFixed(3);
        const line = `COST step=${name} runs=${runs} wall_ms=${per(nowMs() - t0)} client_cpu_ms=${per(selfCpuMs() - c0)} pg_cpu_ms=${per(procCpuMs(pid) - p0)} redis_cpu_ms=${per(procCpuMs(redisPid) - r0)}`;
        console.log(line);
        rows.push(line);
      };

      // A warm-up round of every statement shape, so preparing and JIT do not land in the figures.
      const runIds: string[] = [];
      const dispatch = async (n: number, into: string[]) => {
        for (let k = 0; k < n; k += 500) {
          await inUnitOfWork(sql, actor, async (tx) => {
            for (let s = k; s < Math.min(n, k + 500); s++) {
              const d = await stack.dispatcher.dispatchTask(tx, benchJob.name, { r: 0, s, t: Date.now() }, { actor });
              into.push(d.runId);
            }
          });
        }
      };
      await dispatch(runs, runIds);
      const perRun = async (ids: readonly string[], work: (runId: string) => Promise<void>) => {
        for (const id of ids) await work(id);
      };
      const register = (runId: string) =>
        startDelivery(sql, 'tenant', workerActor, { runId, tenantId, receiveCount: 1, workerInstance: instance }).then(() => {});
      const skeleton = (runId: string) =>
        sql
          .begin(async (tx) => {
            const key = idempotencyKeyOf(benchJob.name, runId);
            await tx`SELECT set_config('app.tenant_id', ${tenantId}, true), set_config('app.user_id', '', true),
                            set_config('app.process', ${workerActor.process}, true), set_config('statement_timeout', '60000', true),
                            pg_try_advisory_xact_lock(${advisoryKeyOf(key)}::bigint)`;
          })
          .then(() => {});
      const effect = (runId: string) =>
        sql
          .begin(async (tx) => {
            const key = idempotencyKeyOf(benchJob.name, runId);
            await tx`SELECT set_config('app.tenant_id', ${tenantId}, true), set_config('app.user_id', '', true),
                            set_config('app.process', ${workerActor.process}, true), set_config('statement_timeout', '60000', true),
                            pg_try_advisory_xact_lock(${advisoryKeyOf(key)}::bigint)`;
            const at = { scope: 'tenant' as const, tenantId };
            await claimKeyAndStart(tx, at, key, fingerprintOf({ r: 0 }), 90_000, { runId, attempt: 1, receiveCount: 1, queue: 'default', workerInstance: instance });
            await finishDelivery(tx, 'tenant', {
              runId,
              tenantId,
              attempt: 1,
              receiveCount: 1,
              queue: 'default',
              workerInstance: instance,
              outcome: {},
              ledger: { key, retentionMs: 86_400_000 },
            });
          })
          .then(() => {});
      // The same skeleton for a unit with a serialKey: its opening also checks the run's turn (serial-turn.ts).
      const serialSkeleton = (runId: string) =>
        sql
          .begin(async (tx) => {
            const key = idempotencyKeyOf(benchJob.name, runId);
            const turn = { scope: 'tenant' as const, tenantId, unit: benchJob.name, runId, key: `account-${runId.slice(-2)}` };
            await tx`SELECT set_config('app.tenant_id', ${tenantId}, true), set_config('app.user_id', '', true),
                            set_config('app.process', ${workerActor.process}, true), set_config('statement_timeout', '60000', true),
                            pg_try_advisory_xact_lock(${advisoryKeyOf(key)}::bigint), ${serialTurnColumn(tx, turn)}`;
          })
          .then(() => {});
      const gate = async (runId: string) => {
        const key = gateKeyOf(await databaseIdentityOf(sql), 'tenant', tenantId, idempotencyKeyOf(benchJob.name, runId));
        await redis.set(key, JSON.stringify({ s: 'p', t: randomUUID() }), 'PX', 90_000, 'NX');
        await redis.del(runStatusKey(runId));
        await recordGateResultsAndEvict(redis, [{ evictKey: runStatusKey(runId), gateKey: key, fingerprint: fingerprintOf({ r: 0 }), outcome: {} }], 86_400_000);
      };
      // A limit no run reaches (every call is admitted): the cost of counting, not of waiting.
      const rateWindow = { max: 1_000_000, windowMs: 60_000 };
      const rateRedis = async () => {
        await admitInRedis(redis, rateLimitKey(await databaseIdentityOf(sql), benchJob.name, rateWindow.windowMs, null), rateWindow.max, rateWindow.windowMs);
      };
      // The database's window: 100 places per 25 ms, which these calls (each a few round trips) never fill,
      // so each is admitted and records its place; the count reads the window's places of the last 25 ms.
      const databaseWindow = { key: benchJob.name, max: 100, windowMs: 25 };
      const rateDatabase = (runId: string) =>
        sql
          .begin(async (tx) => {
            if ((await roomInRateWindow(tx, 'tenant', databaseWindow)) !== null) throw new Error('the bench window was full: raise its max');
            await appendTrailEvent(tx, 'tenant', {
              runId,
              tenantId,
              event: 'received',
              attempt: 1,
              receiveCount: 1,
              queue: 'default',
              workerInstance: instance,
              detail: ratePlaceDetail(databaseWindow),
            });
          })
          .then(() => {});
      const drainQueue = async (expected: number) => {
        let got = 0;
        while (got < expected) {
          const out = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
          const messages = out.Messages ?? [];
          if (messages.length === 0) break;
          got += messages.length;
          await sqs.send(new DeleteMessageBatchCommand({ QueueUrl: url, Entries: messages.map((m, k) => ({ Id: String(k), ReceiptHandle: m.ReceiptHandle! })) }));
        }
      };
      const relayAll = async () => {
        for (;;) {
          const r = await relayPass(sql, sqs, services.sqs!.queueUrlPrefix, { instance, batchSize: 100 });
          if (r.sent === 0) break;
        }
      };
      // Warm-up on the first 200 runs, then the measured steps on fresh runs.
      const warm = runIds.slice(0, 200);
      await relayAll();
      await drainQueue(runs);
      await perRun(warm, gate);
      await perRun(warm, register);
      await perRun(warm, skeleton);
      await perRun(warm, effect);
      await perRun(warm, rateRedis);
      await perRun(warm, serialSkeleton);
      await perRun(warm, rateDatabase);

      const measured: string[] = [];
      await step('dispatch', () => dispatch(runs, measured));
      await step('relay', relayAll);
      await step('sqs_receive', () => drainQueue(runs));
      await step('redis_gate', () => perRun(measured, gate));
      await step('register', () => perRun(measured, register));
      await step('effect_skeleton', () => perRun(measured, skeleton));
      await step('effect', () => perRun(measured, effect));
      await step('rate_limit_redis', () => perRun(measured, rateRedis));
      await step('effect_skeleton_serial', () => perRun(measured, serialSkeleton));
      await step('rate_limit_database', () => perRun(measured, rateDatabase));
      const [check] = await sql<{ done: number }[]>`SELECT count(*)::int AS done FROM task_runs WHERE tenant_id = ${tenantId} AND status = 'succeeded'`;
      log(`runs succeeded: ${check?.done ?? 0} of ${2 * runs} (the warm-up's and the measured ones)`);
    } finally {
      sqs.destroy();
      redis.disconnect();
      await sql.end({ timeout: 5 });
      await stack.close();
    }
  } finally {
    await services.stop();
  }
  if (!fs.existsSync('/proc/self/stat')) log('no /proc: PostgreSQL and Redis CPU read as 0');
  // Every step of the header's list printed its line.
  return rows.length === 10 ? 0 : 1;
}
