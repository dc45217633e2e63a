// Chaos: a burst of runs of a unit writing one effect row per run while, in the
// middle of it, worker processes are SIGKILLed and replaced, the relay's process (relay and rescuer) is
// SIGKILLed and replaced, PostgreSQL restarts (an immediate stop, as `pg_ctl stop -m immediate`, and a
// start), Redis is frozen (SIGSTOP), and sent messages are deleted from the queue through the SDK before
// any worker processed them (what a purge or retention expiry does). Every run ends final with exactly
// one effect, none is stuck, and every trail reads causally. Twice: for a unit with a transaction per
// run, and for a `groupCommit` unit, whose slot runs up to 40 runs in one effect transaction and whose
// workers hold up to 40 messages per slot, so a kill takes whole groups.
//
// The database restart would cut every other test file's sessions on the shared test cluster: this
// file runs on a cluster of its own. Each scenario prints one summary line: the faults, the figures,
// and the longest time a run took from dispatch to final with what bounded it (its trail).
// CHAOS_RUNS (default 300), CHAOS_FREEZE_MS (default 3000) and CHAOS_OUTAGE_MS (default 2000) size each.
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { ChangeMessageVisibilityCommand, DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/db/client.ts';
import { signalOutbox } from '../../src/kv/wake.ts';
import { dlqUrl, queueUrl, type QueueName } from '../../src/queue/names.ts';
import { NATIVE_REDRIVE_MAX_RECEIVES } from '../../src/config/limits.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
import { CHAOS_GROUP_UNITS } from '../fixtures/units/runtime-units.ts';
import { idempotencyKeyOf } from '../../src/work/runtime/store/idempotency.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import type { ChildUnits } from '../fixtures/worker-child.ts';
import { startWorkerChild } from '../fixtures/worker-child-process.ts';
import { stoppableRedis, type StoppableRedis } from '../support/stoppable-redis.ts';
import { ownCluster, type OwnCluster } from '../support/own-cluster.ts';
import { waitFor, within } from '../support/wait-for.ts';

const RUNS = Number(process.env.CHAOS_RUNS ?? 300);
const FREEZE_MS = Number(process.env.CHAOS_FREEZE_MS ?? 3_000);
/** How long PostgreSQL stays down: the fault's shape, not a synchronisation. */
const OUTAGE_MS = Number(process.env.CHAOS_OUTAGE_MS ?? 2_000);
/** Messages deleted at each of the two deletions: up to about 2% of the burst, at least 5. */
const DELETE_EACH = Math.max(5, Math.ceil(RUNS / 50));
/** How long a deletion keeps receiving (the workers frozen meanwhile), at most. */
const DELETE_FOR_MS = 6_000;
/** The test's own receives at once while it deletes. */
const DELETE_RECEIVERS = 6;
const CHILDREN = 2;
const COMMAND_TIMEOUT_MS = 300;
/** Every wait of a delivery outside its handler (SVC_STAGE_TIMEOUT_MS): short, as every timing here. */
const STAGE_TIMEOUT_MS = 1_500;
/** The rescuer beside the relay: a pass every 500 ms, a run overdue 2 s after its window. */
const RESCUE = { intervalMs: 500, marginMs: 2_000 };
// Receives are not this test's subject: a restart and a kill each cost a delivery a receive or more
// within the test's short backoffs, and the permanent path after 5 receives has tests of its own. A
// message received NATIVE_REDRIVE_MAX_RECEIVES times during the outage still goes to the dead-letter
// queue by the queue's own redrive: a lost message the rescuer sends again (counted in the summary).
const MAX_RECEIVES = 100;
/** Bound on every run being final after the burst: the rescue of a lost message takes its window (2 s visibility + 5 s unit timeout + 2 s margin) once the queue's backlog is gone. */
const FINAL_WITHIN_MS = 60_000 + RUNS * 30;
const STAGE_DEADLINE_LOG = 'a delivery stage did not finish within its deadline';

let cluster: OwnCluster;
let sql: Sql;
let h: WorkHarness;
let redis: StoppableRedis;
/** Every child alive: the worker children and the relay's. */
const children = new Set<ChildProcess>();
/** The warning lines the children print (JSON), for the stage deadlines that released a delivery. */
let childLines: string[] = [];
/** The relay children's last lines (warnings and errors), for a failure's report. */
const relayLines: string[] = [];

beforeAll(async () => {
  cluster = await ownCluster('svc-chaos-test');
  sql = cluster.sql;
  h = await workHarness({ redis: false, units: CHAOS_GROUP_UNITS, database: cluster.database });
  redis = await stoppableRedis('chaos', { commandTimeoutMs: COMMAND_TIMEOUT_MS });
}, 120_000);
afterAll(async () => {
  try {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await h?.close();
    await redis?.close();
  } finally {
    await cluster?.close();
  }
});

async function startChild(childUnits: ChildUnits, role: 'worker' | 'relay'): Promise<ChildProcess> {
  const env = {
    CHILD_REDIS_URL: redis.url,
    CHILD_REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS),
    CHILD_REDIS_PROBE_INTERVAL_MS: '250',
    CHILD_STAGE_TIMEOUT_MS: String(STAGE_TIMEOUT_MS),
    CHILD_MAX_RECEIVES: String(MAX_RECEIVES),
    CHILD_RELAY: String(role === 'relay'),
    CHILD_RELAY_SWEEP_MS: '500',
    CHILD_RESCUE_INTERVAL_MS: String(RESCUE.intervalMs),
    CHILD_RESCUE_MARGIN_MS: String(RESCUE.marginMs),
  };
  const proc = await startWorkerChild(h, childUnits, env, (line, child) => {
    if (line.includes(STAGE_DEADLINE_LOG)) childLines.push(line);
    if (role === 'relay') relayLines.splice(0, Math.max(0, relayLines.length - 30), `${child.pid}: ${line.slice(0, 400)}`);
  });
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
  return proc;
}

interface ChaosScenario {
  /** The unit the burst dispatches (one effect row per run). */
  unit: string;
  /** Its queue, the one the survivor and the children consume. */
  queue: QueueName;
  /** The children's unit set (CHILD_UNITS of worker-child.ts), which must consume `queue`. */
  childUnits: ChildUnits;
  /** Dispatches per wake signal of the relay: 10 puts a group's worth on the queue at once. */
  signalEvery: number;
  /** The pause after every 10 dispatches: the chaos lasts as long as the burst, so this paces both. */
  pauseMs: number;
  /** The unit writes one effect row per run (default); false: its handler sends no statement at all. */
  effects?: boolean;
}

/** A fault the burst waits for at its point (a fraction of the burst), so that it strikes while runs are still coming. */
interface Milestone {
  at: number;
  name: string;
  /** Does the fault; calls `release` once the burst may go on (a restart holds it: a dispatch needs the database). */
  act(release: () => void): Promise<void>;
  released: boolean;
}

/**
 * A burst of CHAOS_RUNS runs of the unit under the chaos; asserts every run succeeded with exactly one
 * effect and a causal trail, prints the scenario's summary line. Stops its processes after.
 */
async function chaos(s: ChaosScenario): Promise<{ runIds: string[]; prefix: string; receivedAgain: number }> {
  childLines = [];
  const logsBefore = h.logs().length;
  // The survivor: consumes, like a workers service without the relay. The relay and its rescuer run in
  // a child of their own (SVC_RELAY=true), which the chaos kills too.
  const startSurvivor = () =>
    h.startWorkers({
      redis: redis.redis,
      queues: [s.queue],
      redisTimeoutMs: COMMAND_TIMEOUT_MS,
      redisProbeIntervalMs: 250,
      stageTimeoutMs: STAGE_TIMEOUT_MS,
      maxReceives: MAX_RECEIVES,
    });
  let survivor = await startSurvivor();
  const workerChildren = new Set<ChildProcess>();
  const startWorkerChild = async () => {
    const c = await startChild(s.childUnits, 'worker');
    workerChildren.add(c);
    c.once('exit', () => workerChildren.delete(c));
  };
  let relayChild = await startChild(s.childUnits, 'relay');
  try {
    for (let i = 0; i < CHILDREN; i++) await startWorkerChild();

    const prefix = `chaos-${randomUUID().slice(0, 8)}`;
    const runIds: string[] = [];
    let kills = 0;
    let relayKills = 0;
    let downMs = 0;
    const deleted: string[] = [];
    const started = Date.now();
    /** What a failure reports besides its runs: the outbox, the database's sessions at work, the relay's process and its last lines. */
    const diagnostics = async () => {
      const read = async <T>(q: () => Promise<T>) => within(q(), 5_000, 'a diagnostic read').catch((e: unknown) => `unread: ${(e as Error).message}`);
      const outbox = await read(() => sql`
        SELECT count(*)::int AS pending, extract(epoch FROM clock_timestamp() - min(available_at))::int AS oldest_s FROM platform_outbox_messages WHERE sent_at IS NULL`);
      const sessions = await read(() => sql`
        SELECT pid, state, wait_event_type, wait_event, extract(epoch FROM clock_timestamp() - xact_start)::int AS xact_s, left(query, 160) AS query
          FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND state <> 'idle'`);
      const alive = relayChild.exitCode === null && relayChild.signalCode === null;
      return `outbox ${JSON.stringify(outbox)}; relay child ${relayChild.pid} ${alive ? 'alive' : 'gone'}; sessions ${JSON.stringify(sessions)}; relay lines:\n${relayLines.join('\n')}`;
    };
    /** When each fault struck, ms after the burst began. */
    const timeline: string[] = [];
    const mark = (what: string) => timeline.push(`${what}@${((Date.now() - started) / 1000).toFixed(1)}s`);

    const killRelay = async (release: () => void) => {
      relayChild.kill('SIGKILL');
      await once(relayChild, 'exit').catch(() => {});
      relayKills++;
      mark(`relay-kill(${relayChild.pid})`);
      release();
      relayChild = await startChild(s.childUnits, 'relay');
    };
    /** Receives messages of the queue and deletes those of runs no worker has finished (lost messages), returning the others at once. */
    const deleteMessages = async (release: () => void) => {
      release();
      mark('delete');
      const url = queueUrl(h.queueUrlPrefix, s.queue);
      const target = deleted.length + DELETE_EACH;
      // Every process that consumes (the workers, and the relay's process, a workers service too) is
      // frozen (SIGSTOP) while the test receives, and the survivor (in this process) stopped: they would
      // otherwise take every message before the test's receives do (on a busy machine they left none to
      // delete; the survivor alone, its long polls waiting as the messages came, took nearly all). The
      // burst goes on meanwhile and the test relays its runs itself, so the queue holds messages of open
      // runs; the frozen deliveries stall in place, their heartbeats too, and their messages come back
      // after the visibility timeout. A new survivor starts after the thaw.
      await survivor.stop();
      const frozen = [...workerChildren, relayChild];
      for (const c of frozen) c.kill('SIGSTOP');
      mark('workers-freeze');
      const until = Date.now() + DELETE_FOR_MS;
      const receiver = async (_: unknown, index: number) => {
        while (deleted.length < target && Date.now() < until) {
          if (index === 0) await h.relay();
          const got = await h.sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 30 }));
          const messages = got.Messages ?? [];
          const ids = messages.map((m) => (JSON.parse(m.Body ?? '{}') as { run_id?: string }).run_id ?? '');
          const open = new Set(
            (await sql<{ run_id: string }[]>`SELECT run_id FROM platform_task_runs WHERE run_id = ANY(${ids.filter(Boolean)}::uuid[]) AND status IN ('queued', 'running', 'retrying')`).map((r) => r.run_id),
          );
          for (const [n, m] of messages.entries()) {
            if (open.has(ids[n]!) && deleted.length < target) {
              // Counted before the call, so the receivers running at once never delete past the target.
              deleted.push(ids[n]!);
              await h.sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle! }));
            } else {
              await h.sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle!, VisibilityTimeout: 0 }));
            }
          }
        }
      };
      try {
        await Promise.all(Array.from({ length: DELETE_RECEIVERS }, receiver));
      } finally {
        for (const c of frozen) c.kill('SIGCONT');
        mark('workers-thaw');
        survivor = await startSurvivor();
      }
    };

    const milestones: Milestone[] = [
      { at: 0.2, name: 'relay kill 1', act: killRelay, released: false },
      {
        at: 0.4,
        name: 'database restart',
        released: false,
        async act(release) {
          const from = Date.now();
          mark('db-stop');
          await cluster.stop('immediate');
          await sleep(OUTAGE_MS);
          await cluster.start();
          downMs = Date.now() - from;
          release();
        },
      },
      {
        at: 0.5,
        name: 'Redis freeze',
        released: false,
        async act(release) {
          redis.freeze();
          mark('redis-freeze');
          release();
          await sleep(FREEZE_MS);
          redis.thaw();
        },
      },
      { at: 0.6, name: 'messages deleted 1', act: deleteMessages, released: false },
      { at: 0.75, name: 'relay kill 2', act: killRelay, released: false },
      { at: 0.85, name: 'messages deleted 2', act: deleteMessages, released: false },
    ];

    const burst = (async () => {
      for (let i = 0; i < RUNS; i++) {
        // The burst waits for the chaos at its points: the faults strike while runs are still coming,
        // however fast the dispatches go (a faster dispatch once ended the burst before the second kill).
        for (const k of [1, 2]) if (i === Math.floor((RUNS * k) / 3)) await waitFor(() => kills >= k, 30_000, { what: `kill ${k} of the chaos` });
        for (const m of milestones) if (i === Math.floor(RUNS * m.at)) await waitFor(() => m.released, 60_000, { what: `the ${m.name} of the chaos` });
        // Every handler sleeps well below the unit's timeout (5 s), its turn in a group included.
        const { runId } = await within(h.dispatch(s.unit, { key: `${prefix}-${i}`, sleepMs: i % 7 === 0 ? 300 : 20 }), 30_000, `dispatch ${i} of the burst answered`);
        runIds.push(runId);
        if (i % s.signalEvery === s.signalEvery - 1 || i === RUNS - 1) await signalOutbox(redis.redis);
        if (i % 10 === 9) await sleep(s.pauseMs);
      }
    })();
    // Chaos while the burst runs: a worker child SIGKILLed and replaced every ~1.2 s, and the faults of
    // the milestones once the burst reaches them. The victim is a worker child with a run of the burst
    // running (its `received` row names it, `child:<pid>`), looked for during up to 600 ms, so a kill
    // takes work in flight even when load leaves the children idle at the instant a blind pick would
    // strike; else the children take turns.
    const holdingRuns = async (): Promise<ChildProcess | undefined> => {
      const rows = await sql<{ instance: string }[]>`
        SELECT DISTINCT e.worker_instance AS instance FROM platform_task_runs r
          JOIN platform_task_run_events e ON e.run_id = r.run_id AND e.event = 'received' AND e.attempt = r.attempts
         WHERE r.run_id = ANY(${runIds}::uuid[]) AND r.status = 'running'`;
      const busy = new Set(rows.map((r) => r.instance));
      return [...workerChildren].find((c) => busy.has(`child:${c.pid}`));
    };
    const chaos = (async () => {
      const dueMilestone = () => milestones.find((m) => !m.released && runIds.length >= Math.floor(RUNS * m.at));
      while (runIds.length < RUNS) {
        // A kill every 1.2 s; a fault the burst waits for goes first.
        for (const until = Date.now() + 1_200; Date.now() < until && !dueMilestone(); ) await sleep(20);
        const due = dueMilestone();
        if (due) {
          await due.act(() => (due.released = true));
          due.released = true;
        }
        let victim: ChildProcess | undefined;
        for (const until = Date.now() + 600; !victim && Date.now() < until; await sleep(20)) victim = await holdingRuns();
        victim ??= [...workerChildren][kills % Math.max(1, workerChildren.size)];
        if (victim) {
          victim.kill('SIGKILL');
          kills++;
          await startWorkerChild();
        }
      }
    })();
    await Promise.all([burst, chaos]).catch(async (error: unknown) => {
      throw new Error(`${(error as Error).message} (${runIds.length} dispatched; faults ${timeline.join(' ')}); ${await diagnostics()}`);
    });
    expect(milestones.filter((m) => !m.released).map((m) => m.name)).toEqual([]);
    const dispatchedMs = Date.now() - started;

    // None stuck: every run final within the bound.
    let open = 0;
    await waitFor(
      async () => {
        const [row] = await sql<{ n: number }[]>`
          SELECT count(*)::int AS n FROM platform_task_runs WHERE run_id = ANY(${runIds}::uuid[]) AND status NOT IN ('succeeded', 'failed', 'skipped')`;
        open = row!.n;
        return open === 0;
      },
      FINAL_WITHIN_MS,
      { stepMs: 200, what: 'every run final' },
    ).catch(async (error: unknown) => {
      const stuck = await sql<{ run_id: string; status: string }[]>`
        SELECT run_id, status FROM platform_task_runs WHERE run_id = ANY(${runIds}::uuid[]) AND status NOT IN ('succeeded', 'failed', 'skipped') LIMIT 5`;
      const trails = await Promise.all(stuck.map(async (r) => `${r.run_id} ${r.status}: ${await trailText(r.run_id)}`));
      throw new Error(
        `${(error as Error).message}: ${open} runs not final ${Date.now() - started} ms after the burst began (burst ${dispatchedMs} ms; faults ${timeline.join(' ')}); ` +
          `${await diagnostics()}\n${trails.join('; ')}`,
      );
    });
    const allFinalMs = Date.now() - started;
    const statuses = await sql<{ status: string; n: number }[]>`
      SELECT status, count(*)::int AS n FROM platform_task_runs WHERE run_id = ANY(${runIds}::uuid[]) GROUP BY status`;
    expect(statuses).toEqual([{ status: 'succeeded', n: RUNS }]);
    // Exactly one effect per run.
    const duplicated = await sql<{ key: string; n: number }[]>`
      SELECT key, count(*)::int AS n FROM fixture_effects WHERE key LIKE ${prefix + '-%'} GROUP BY key HAVING count(*) <> 1`;
    expect(duplicated).toEqual([]);
    const [effects] = await sql<{ keys: number; rows: number }[]>`
      SELECT count(DISTINCT key)::int AS keys, count(*)::int AS rows FROM fixture_effects WHERE key LIKE ${prefix + '-%'}`;
    expect(effects).toEqual(s.effects === false ? { keys: 0, rows: 0 } : { keys: RUNS, rows: RUNS });
    // One `succeeded` a run, and its key completed in the ledger (a run's key is its id, R-IDM-10).
    const [finishes] = await sql<{ runs: number; keys: number }[]>`
      SELECT count(*) FILTER (WHERE (SELECT count(*) FROM platform_task_run_events e WHERE e.run_id = r.run_id AND e.event = 'succeeded') = 1)::int AS runs,
             (SELECT count(*) FROM platform_idempotency_keys k WHERE k.status = 'completed'
                 AND k.idempotency_key IN (SELECT decode(x, 'hex') FROM unnest(${runIds.map((id) => idempotencyKeyOf(s.unit, id).toString('hex'))}::text[]) x))::int AS keys
        FROM platform_task_runs r WHERE r.run_id = ANY(${runIds}::uuid[])`;
    expect(finishes).toEqual({ runs: RUNS, keys: RUNS });
    // Every trail causal.
    const broken: Array<{ runId: string; problems: string[]; events: string[]; timed: string }> = [];
    for (const runId of runIds) {
      const verdict = await causalProblems(sql, runId);
      if (verdict.problems.length > 0) broken.push({ runId, ...verdict, timed: `queued @${(((await queuedAtMs(runId)) - started) / 1000).toFixed(2)}s of the burst (faults ${timeline.join(' ')}): ${await trailText(runId)}; outbox ${await outboxText(runId)}` });
    }
    expect(broken.slice(0, 5)).toEqual([]);
    expect(kills).toBeGreaterThanOrEqual(2);
    expect(relayKills).toBe(2);
    expect(downMs).toBeGreaterThanOrEqual(OUTAGE_MS);
    // The lost messages: each of their runs was sent again by the rescuer (or, received again after a
    // kill or a release, finished before the rescuer judged it overdue), and succeeded once (above).
    expect(deleted.length, 'no message was deleted: the queue never held one of an open run').toBeGreaterThan(0);
    const rescuedRows = await sql<{ run_id: string; reason: string }[]>`
      SELECT run_id, detail->>'reason' AS reason FROM platform_task_run_events WHERE run_id = ANY(${runIds}::uuid[]) AND event = 'queued' AND detail ? 'rescue'`;
    expect(rescuedRows.length, 'no run was rescued although messages of open runs were deleted').toBeGreaterThan(0);
    // Rescues of runs a worker held after all (a group member waiting its turn, invisible to the rescuer
    // until its group's finish): the run succeeded before its resend went out, the duplicate replayed.
    const [late] = await sql<{ n: number }[]>`
      SELECT count(DISTINCT s.run_id)::int AS n FROM platform_task_run_events s JOIN platform_task_runs r USING (run_id)
       WHERE s.run_id = ANY(${runIds}::uuid[]) AND s.event = 'sent' AND s.occurred_at > r.finished_at`;
    // Runs the chaos reached: received more than once (a kill took their message, or a freeze held it).
    const [again] = await sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM (
        SELECT run_id FROM platform_task_run_events WHERE run_id = ANY(${runIds}::uuid[]) AND event = 'received' GROUP BY run_id HAVING count(*) > 1) r`;
    // Messages the queue's own redrive moved to the dead-letter queue (received too often while the
    // database was away): lost to the workers like the deleted ones. Emptied here for the next scenario.
    const redriven: string[] = [];
    for (;;) {
      const got = await h.sqs.send(new ReceiveMessageCommand({ QueueUrl: dlqUrl(h.queueUrlPrefix, s.queue), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60 }));
      if (!got.Messages?.length) break;
      for (const m of got.Messages) {
        redriven.push((JSON.parse(m.Body ?? '{}') as { run_id?: string }).run_id ?? '');
        await h.sqs.send(new DeleteMessageCommand({ QueueUrl: dlqUrl(h.queueUrlPrefix, s.queue), ReceiptHandle: m.ReceiptHandle! }));
      }
    }
    // Deliveries a stage deadline released (their warning names the run).
    const stageLines = [...childLines, ...h.logs().slice(logsBefore).split('\n').filter((l) => l.includes(STAGE_DEADLINE_LOG))];
    const stageReleases = stageLines.map((l) => JSON.parse(l) as { runId?: string; stage?: string });
    const ofBurst = new Set(runIds);
    const stageOfBurst = stageReleases.filter((r) => r.runId && ofBurst.has(r.runId));

    // The longest a run took from dispatch to final, and what bounded it.
    const [longest] = await sql<{ run_id: string; ms: number; queued_ms: number }[]>`
      SELECT run_id, round(extract(epoch FROM finished_at - queued_at) * 1000)::int AS ms, round(extract(epoch FROM queued_at) * 1000)::float8 AS queued_ms
        FROM platform_task_runs WHERE run_id = ANY(${runIds}::uuid[]) ORDER BY finished_at - queued_at DESC LIMIT 1`;
    const queuedAt = (longest!.queued_ms - started) / 1000;
    const during = timeline.filter((t) => {
      const at = Number(t.split('@')[1]!.replace('s', ''));
      return at >= queuedAt - 1 && at <= queuedAt + longest!.ms / 1000;
    });
    const why = await boundedBy(
      longest!.run_id,
      stageOfBurst.filter((r) => r.runId === longest!.run_id).map((r) => r.stage ?? '?'),
      deleted.filter((id) => id === longest!.run_id).length,
      redriven.filter((id) => id === longest!.run_id).length,
    );
    console.log(
      `chaos ${s.unit}: ${RUNS} runs dispatched, ${RUNS} final (succeeded), ${effects!.rows} effects, 0 duplicated; ` +
        `${kills} worker kills, ${relayKills} relay kills, Redis frozen ${FREEZE_MS} ms, database down ${downMs} ms (immediate stop), ` +
        `${deleted.length} messages deleted, ${redriven.length} moved to the dead-letter queue by the queue's redrive (${NATIVE_REDRIVE_MAX_RECEIVES} receives), ${rescuedRows.length} rescues on ${new Set(rescuedRows.map((r) => r.run_id)).size} runs (${[...new Set(rescuedRows.map((r) => r.reason))].join(', ')}; ${late!.n} resent after their run succeeded), ` +
        `${stageOfBurst.length} stage-deadline releases, ${again!.n} runs received again; burst ${dispatchedMs} ms, all final after ${allFinalMs} ms; ` +
        `faults ${timeline.join(' ')}; longest dispatch→final ${(longest!.ms / 1000).toFixed(2)} s: run ${longest!.run_id} queued @${queuedAt.toFixed(1)}s, faults meanwhile: ${during.join(' ') || 'none'}; ${why}`,
    );
    return { runIds, prefix, receivedAgain: again!.n };
  } finally {
    redis.thaw(); // in case a failure left it frozen
    // Gone before the next scenario picks its victims.
    await Promise.all(
      [...children].map((c) => {
        c.kill('SIGKILL');
        return once(c, 'exit');
      }),
    );
    await survivor.stop();
  }
}

interface TimedEvent {
  event: string;
  attempt: number;
  at_ms: number;
  /** The writing transaction (xmin): which rows one commit wrote together. */
  tx: string;
  receive_count: number;
  worker_instance: string;
  detail: Record<string, unknown>;
}

async function timedTrail(runId: string): Promise<TimedEvent[]> {
  return sql<TimedEvent[]>`
    SELECT e.event, e.attempt, round(extract(epoch FROM e.occurred_at - r.queued_at) * 1000)::int AS at_ms, e.receive_count, e.worker_instance, e.detail, e.xmin::text AS tx
      FROM platform_task_run_events e JOIN platform_task_runs r USING (run_id) WHERE e.run_id = ${runId} ORDER BY e.occurred_at, e.id`;
}

/** The trail in time from the run's dispatch (ms), with who wrote each row, in which transaction, and its detail. */
async function trailText(runId: string): Promise<string> {
  return (await timedTrail(runId))
    .map((e) => `${e.event}(${e.attempt})@${(e.at_ms / 1000).toFixed(3)}s(${e.worker_instance}${e.receive_count ? ` #${e.receive_count}` : ''}${Object.keys(e.detail).length > 0 ? ` ${JSON.stringify(e.detail)}` : ''} tx ${e.tx})`)
    .join(' ');
}

/** The run's outbox row: when it was marked sent (ms from the dispatch), its attempts, its transaction. */
async function outboxText(runId: string): Promise<string> {
  const rows = await sql`
    SELECT round(extract(epoch FROM o.sent_at - r.queued_at) * 1000)::int AS sent_ms, o.attempts, o.xmin::text AS tx
      FROM platform_outbox_messages o JOIN platform_task_runs r USING (run_id) WHERE o.run_id = ${runId}`;
  return JSON.stringify(rows);
}

async function queuedAtMs(runId: string): Promise<number> {
  const [row] = await sql<{ ms: number }[]>`SELECT round(extract(epoch FROM queued_at) * 1000)::float8 AS ms FROM platform_task_runs WHERE run_id = ${runId}`;
  return row!.ms;
}

/** The run's trail in time, and the mechanisms that brought it to its end: the rescuer, a stage deadline, a redelivery, the relay. */
async function boundedBy(runId: string, stages: string[], deletedMessages: number, redrivenMessages: number): Promise<string> {
  const trail = await timedTrail(runId);
  const text = trail.map((e) => `${e.event}@${(e.at_ms / 1000).toFixed(2)}s${e.event === 'received' ? `(#${e.receive_count} ${e.worker_instance})` : ''}`).join(' ');
  let gap = { from: '', to: '', ms: -1 };
  for (let i = 1; i < trail.length; i++) {
    const ms = trail[i]!.at_ms - trail[i - 1]!.at_ms;
    if (ms > gap.ms) gap = { from: trail[i - 1]!.event, to: trail[i]!.event, ms };
  }
  const mechanisms: string[] = [];
  if (deletedMessages > 0) mechanisms.push(`its message deleted by the chaos ${deletedMessages} time(s)`);
  if (redrivenMessages > 0) mechanisms.push(`its message moved to the dead-letter queue by the queue's redrive ${redrivenMessages} time(s)`);
  for (const e of trail.filter((t) => t.event === 'queued' && t.detail.rescue !== undefined)) mechanisms.push(`the rescuer (${String(e.detail.reason)}, after ${String(e.detail.waited_seconds)} s)`);
  if (stages.length > 0) mechanisms.push(`a stage deadline released a delivery (${stages.join(', ')})`);
  const receives = trail.filter((t) => t.event === 'received').length;
  if (receives > 1) mechanisms.push(`${receives} receives: redelivered after its visibility timeout or a release`);
  const sentAt = trail.find((t) => t.event === 'sent')?.at_ms ?? 0;
  if (sentAt > 1_000) mechanisms.push(`${(sentAt / 1000).toFixed(1)} s in the outbox before the relay sent it`);
  const started = trail.find((t) => t.event === 'started');
  const succeeded = trail.find((t) => t.event === 'succeeded');
  if (started && succeeded) {
    // A group-commit member writes its started and succeeded rows in its group's one transaction.
    const [group] = await sql<{ members: number }[]>`
      SELECT count(*)::int AS members FROM platform_task_run_events
       WHERE event = 'succeeded' AND xmin::text = (SELECT xmin::text FROM platform_task_run_events WHERE run_id = ${runId} AND event = 'succeeded')`;
    if (group!.members > 1) mechanisms.push(`its turn in a group transaction of ${group!.members} runs (${((succeeded.at_ms - started.at_ms) / 1000).toFixed(2)} s from started to succeeded)`);
  }
  if (mechanisms.length === 0) mechanisms.push('none of the chaos: a plain delivery behind the backlog');
  return `longest gap ${gap.from}→${gap.to} ${(gap.ms / 1000).toFixed(2)} s; bounded by ${mechanisms.join('; ')}; trail ${text}`;
}

const TEST_TIMEOUT_MS = 200_000 + RUNS * 120;

/** How many of these runs each finishing transaction carried (the xmin of their `succeeded` rows): runs per commit, and how many commits carried that many. */
async function runsPerCommit(runIds: string[]): Promise<Array<{ runs: number; transactions: number }>> {
  return sql<{ runs: number; transactions: number }[]>`
    SELECT runs, count(*)::int AS transactions FROM (
      SELECT count(*)::int AS runs FROM platform_task_run_events WHERE run_id = ANY(${runIds}::uuid[]) AND event = 'succeeded' GROUP BY xmin::text) g
     GROUP BY runs ORDER BY runs`;
}

describe('chaos', () => {
  it('R-OBX-16 R-WRK-07 R-IDM-09 runs under worker and relay SIGKILLs, a database restart, a Redis freeze and lost messages: every run final, one effect each, every trail causal', async () => {
    await chaos({ unit: 'fixture.effect', queue: 'default', childUnits: 'runtime', signalEvery: 1, pauseMs: 50 });
  }, TEST_TIMEOUT_MS);

  it('R-UNT-09 R-OBX-16 R-WRK-07 R-IDM-09 a group-commit unit under worker and relay SIGKILLs, a database restart, a Redis freeze and lost messages: every run final, one effect each committed with its started and succeeded, every trail causal', async () => {
    const { runIds, prefix, receivedAgain } = await chaos({ unit: 'fixture.group_effect', queue: 'bulk', childUnits: 'group', signalEvery: 10, pauseMs: 200 });
    // Each run's one effect is its succeeding attempt's, whose started and succeeded rows one transaction
    // wrote (the xmin of a row is its transaction's; the effect's is the member's savepoint's, so the
    // attempt ties it to them).
    const apart = await sql<{ key: string; effect_attempt: number; succeeded_attempt: number }[]>`
      SELECT f.key, f.attempt AS effect_attempt, s.attempt AS succeeded_attempt
        FROM fixture_effects f JOIN platform_task_run_events s ON s.run_id = f.run_id AND s.event = 'succeeded'
       WHERE f.key LIKE ${prefix + '-%'}
         AND (s.attempt <> f.attempt
           OR NOT EXISTS (SELECT 1 FROM platform_task_run_events e WHERE e.run_id = f.run_id AND e.event = 'started' AND e.attempt = f.attempt AND e.xmin = s.xmin))`;
    expect(apart).toEqual([]);
    // Groups formed: transactions that carried several runs (the xmin of their succeeded rows).
    const groups = await runsPerCommit(runIds);
    console.log(`chaos fixture.group_effect: runs per transaction ${groups.map((g) => `${g.runs}×${g.transactions}`).join(' ')}`);
    expect(Math.max(...groups.map((g) => g.runs)), 'no transaction carried more than one run: no group formed').toBeGreaterThan(1);
    // The chaos reached groups in flight (a child, killed about once a second, holds one most of the time).
    expect(receivedAgain, 'no run was received twice: the chaos reached no group in flight').toBeGreaterThan(0);
  }, TEST_TIMEOUT_MS);

  it('R-WRK-07 R-IDM-09 a default unit whose handler writes nothing under worker and relay SIGKILLs, a database restart, a Redis freeze and lost messages: every run final, succeeded once with its key completed, every trail causal', async () => {
    const { runIds } = await chaos({ unit: 'fixture.quiet', queue: 'bulk', childUnits: 'group', signalEvery: 10, pauseMs: 50, effects: false });
    // How many runs each finishing commit carried (a statement shared by finishes that met carries several).
    const commits = await runsPerCommit(runIds);
    console.log(`chaos fixture.quiet: runs per finishing commit ${commits.map((g) => `${g.runs}×${g.transactions}`).join(' ')}`);
  }, TEST_TIMEOUT_MS);
});
