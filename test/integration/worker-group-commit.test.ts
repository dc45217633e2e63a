// Group commit (unit option `groupCommit`, src/work/runtime/execute/group-commit.ts) on real PostgreSQL,
// Redis and SQS: the runs of one receive share one effect transaction, and every guarantee of a run
// with its own transaction holds for each member under faults: a member's failure, timeout or cancel
// rolls back its effect alone; a failure at COMMIT and a release on shutdown take the whole group; a
// duplicate in the same receive goes alone; a key with an existing ledger row is taken over in the
// member's savepoint.
//
// The messages are relayed before the workers start, so the first receive holds all of them and they
// reach execution in the same event-loop turn. Which transaction a handler ran in is observed from
// inside it (txid_current(), the top-level transaction even inside the member's savepoint): equal
// ids prove the runs shared one transaction.
import { setTimeout as sleep } from 'node:timers/promises';
import { ChangeMessageVisibilityCommand, GetQueueAttributesCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { queueUrl } from '../../src/queue/names.ts';
import { metricsRegistry } from '../../src/observe/metrics.ts';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import postgres from 'postgres';
import { z } from 'zod';
import { databaseIdentityOf } from '../../src/kv/database-identity.ts';
import { idempotencyGateKey, runStatusKey } from '../../src/kv/keys.ts';
import { cancelRunNow } from '../../src/work/operate/cancel-run.ts';
import { RECEIVES_BEFORE_ATTRIBUTE } from '../../src/work/runtime/consume/tenant-slots.ts';
import { fingerprintOf, idempotencyKeyOf } from '../../src/work/runtime/store/idempotency.ts';
import { TransientFailure, ValidationFailure } from '../../src/work/define/unit-errors.ts';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import type { WorkerRuntime } from '../../src/work/runtime/worker-runtime.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { waitFor } from '../support/wait-for.ts';
import { createTenant } from './work-tables-support.ts';

const payload = z.object({
  key: z.string().min(1),
  sleepMs: z.number().int().min(0).optional(),
  fail: z.enum(['transient', 'permanent']).optional(),
  /** Fail and sleep only on attempt 1. */
  firstAttemptOnly: z.boolean().optional(),
  /** A statement that sleeps this long (pg_sleep) after the insert. */
  sqlSleepMs: z.number().int().min(0).optional(),
  /**
   * After the insert, a transaction-local setting for the rest of the transaction: a 50 ms statement
   * timeout, or a search_path whose first schema has a group_effects table of its own.
   */
  setLocal: z.enum(['statement_timeout', 'search_path']).optional(),
  /** After the insert, lock this row of group_rows (FOR UPDATE). */
  lockRow: z.string().optional(),
});

/** The top-level transaction each handler call ran in, by key and attempt (this process runs the units). */
const handlerTx = new Map<string, string>();

const handler = async (p: z.infer<typeof payload>, run: Parameters<WorkUnit['handler']>[1]) => {
  const [row] = await run.transaction<{ txid: string }[]>`
    INSERT INTO group_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt}) RETURNING txid::text`;
  // The first transaction under this attempt: a member run again alone (its group failed) keeps its attempt.
  if (!handlerTx.has(`${p.key}#${run.attempt}`)) handlerTx.set(`${p.key}#${run.attempt}`, row!.txid);
  if (p.setLocal === 'statement_timeout') await run.transaction`SET LOCAL statement_timeout = 50`;
  if (p.setLocal === 'search_path') await run.transaction`SET LOCAL search_path = fixture_elsewhere, public`;
  if (p.lockRow) await run.transaction`SELECT 1 FROM group_rows WHERE id = ${p.lockRow} FOR UPDATE`;
  if (p.sqlSleepMs) await run.transaction`SELECT pg_sleep(${p.sqlSleepMs / 1000})`;
  const now = !p.firstAttemptOnly || run.attempt === 1;
  if (p.sleepMs && now) await sleep(p.sleepMs, undefined, { signal: run.signal });
  if (p.fail && now) {
    if (p.fail === 'transient') throw new TransientFailure('FIXTURE_TRANSIENT', 'the fixture fails transiently');
    throw new ValidationFailure('the fixture fails permanently');
  }
  return { key: p.key, attempt: run.attempt };
};

/**
 * A handler that sends no statement: a member that pays for no savepoint. `hold` keeps it running
 * until the test lets it go (holds.get(key)), bounded by its own timer.
 */
const quietPayload = z.object({ key: z.string().min(1), hold: z.boolean().optional(), progress: z.number().int().min(0).max(100).optional() });
const quietDone = new Set<string>();
const holds = new Map<string, () => void>();
const quietHandler = async (p: z.infer<typeof quietPayload>, run: Parameters<WorkUnit['handler']>[1]) => {
  if (p.progress !== undefined) await run.progress(p.progress);
  if (p.hold) {
    await new Promise<void>((resolve) => {
      holds.set(p.key, resolve);
      setTimeout(resolve, 8_000).unref();
    });
  }
  quietDone.add(`${p.key}#${run.attempt}`);
  return { key: p.key, attempt: run.attempt };
};
const groupQuiet = defineTask({
  name: 'fixture.group_quiet',
  queue: 'bulk',
  context: 'tenant',
  concurrency: 10,
  timeoutSeconds: 10,
  groupCommit: true,
  payload: quietPayload,
  handler: quietHandler,
});

/** One slot (a group runs in it), and a timeout past the time its finish is held on a row lock below. */
const groupTail = defineTask({
  name: 'fixture.group_tail',
  queue: 'bulk',
  context: 'tenant',
  concurrency: 1,
  timeoutSeconds: 30,
  groupCommit: true,
  payload: quietPayload,
  handler: quietHandler,
});

/**
 * As fixture.group_tail, with the effect-writing handler (a deferred check fails `commitfail` keys at
 * COMMIT), except for keys starting with `quiet`: those send no statement (and sleep `sleepMs`).
 */
const tailStarted = new Set<string>();
const groupTailEffect = defineTask({
  name: 'fixture.group_tail_effect',
  queue: 'bulk',
  context: 'tenant',
  concurrency: 1,
  timeoutSeconds: 30,
  groupCommit: true,
  payload,
  async handler(p, run) {
    if (!p.key.startsWith('quiet')) return handler(p, run);
    tailStarted.add(`${p.key}#${run.attempt}`);
    if (p.sleepMs) await sleep(p.sleepMs, undefined, { signal: run.signal });
    return { key: p.key, attempt: run.attempt };
  },
});

/** One slot, quiet handlers that may hold; counts the handlers running at once. */
let oneActive = 0;
let onePeak = 0;
const groupOne = defineTask({
  name: 'fixture.group_one',
  queue: 'bulk',
  context: 'tenant',
  concurrency: 1,
  timeoutSeconds: 30,
  groupCommit: true,
  payload: quietPayload,
  async handler(p, run) {
    oneActive += 1;
    onePeak = Math.max(onePeak, oneActive);
    try {
      return await quietHandler(p, run);
    } finally {
      oneActive -= 1;
    }
  },
});

/** Two slots, of which one tenant's groups may take one (tenantConcurrency 1). */
const groupFair = defineTask({
  name: 'fixture.group_fair',
  queue: 'bulk',
  context: 'tenant',
  concurrency: 2,
  tenantConcurrency: 1,
  timeoutSeconds: 30,
  groupCommit: true,
  payload: quietPayload,
  handler: quietHandler,
});

const groupTenant = defineTask({ name: 'fixture.group_tenant', queue: 'bulk', context: 'tenant', concurrency: 10, timeoutSeconds: 2, groupCommit: true, payload, handler });
/** As fixture.group_tenant, with a timeout that leaves room for the deadlock detector (deadlock_timeout 1 s). */
const groupLong = defineTask({ name: 'fixture.group_long', queue: 'bulk', context: 'tenant', concurrency: 10, timeoutSeconds: 15, groupCommit: true, payload, handler });
const groupSystem = defineTask({ name: 'fixture.group_system', queue: 'bulk', context: 'system', concurrency: 10, timeoutSeconds: 2, groupCommit: true, payload, handler });
const UNITS: ReadonlyMap<string, WorkUnit> = new Map([groupTenant, groupLong, groupSystem, groupQuiet, groupTail, groupTailEffect, groupOne, groupFair].map((u) => [u.name, u]));

let h: WorkHarness;
let tenantId: string;

beforeAll(async () => {
  h = await workHarness({ units: UNITS });
  tenantId = await createTenant(h.sql);
  // txid: the top-level transaction of the insert, also inside a savepoint.
  await h.sql`CREATE TABLE group_effects (run_id uuid NOT NULL, key text NOT NULL, attempt int NOT NULL, txid bigint NOT NULL DEFAULT txid_current())`;
  // A deferred check that fails at COMMIT for the first attempt of keys starting with `commitfail`.
  await h.sql`CREATE FUNCTION group_effects_commit_check() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.key LIKE 'commitfail%' AND NEW.attempt = 1 THEN RAISE EXCEPTION 'the fixture refuses this commit'; END IF;
      RETURN NULL;
    END $$`;
  await h.sql`CREATE CONSTRAINT TRIGGER group_effects_commit_check AFTER INSERT ON group_effects
                DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION group_effects_commit_check()`;
  // Where an effect lands if a member's search_path reached the next member.
  await h.sql`CREATE SCHEMA fixture_elsewhere`;
  await h.sql`CREATE TABLE fixture_elsewhere.group_effects (LIKE group_effects INCLUDING DEFAULTS)`;
  // Rows the handlers lock (lockRow).
  await h.sql`CREATE TABLE group_rows (id text PRIMARY KEY)`;
  await h.sql`INSERT INTO group_rows VALUES ('x'), ('y')`;
});
afterAll(async () => h?.close());
// A test that failed leaves no runtime taking the next test's messages.
afterEach(async () => h?.stopWorkers());

const tenantActor = () => ({ kind: 'system' as const, tenantId, label: 'test' });

/** Dispatches the payloads (tenant runs unless `system`), relays them in one pass, then starts the workers: one receive takes them all. */
async function receivedTogether(
  payloads: Array<z.input<typeof payload>>,
  options: { system?: boolean; quiet?: boolean; unit?: string; drainMs?: number; beforeWorkers?: (runIds: string[]) => Promise<void> } = {},
): Promise<{ runIds: string[]; runtime: WorkerRuntime }> {
  await h.fenceAbandonedPolls('bulk');
  const runIds: string[] = [];
  for (const p of payloads) {
    const unit = options.unit ?? (options.quiet ? 'fixture.group_quiet' : 'fixture.group_tenant');
    const { runId } = options.system ? await h.dispatch('fixture.group_system', p) : await h.dispatch(unit, p, tenantActor());
    runIds.push(runId);
  }
  await h.relay();
  await options.beforeWorkers?.(runIds);
  const runtime = await h.startWorkers({ queues: ['bulk'], ...(options.drainMs ? { drainMs: options.drainMs } : {}) });
  return { runIds, runtime };
}

async function effectsOf(key: string): Promise<Array<{ attempt: number; txid: string }>> {
  return h.sql<{ attempt: number; txid: string }[]>`SELECT attempt, txid::text AS txid FROM group_effects WHERE key = ${key} ORDER BY attempt`;
}

/** svc_group_commit_runs of a unit: its observations (transactions) and their sum (runs). */
async function groupMetric(unit: string): Promise<{ count: number; sum: number }> {
  const metric = await metricsRegistry.getSingleMetric('svc_group_commit_runs')!.get();
  const of = (name: string) => metric.values.find((v) => (v as { metricName?: string }).metricName === name && v.labels.unit === unit)?.value ?? 0;
  return { count: of('svc_group_commit_runs_count'), sum: of('svc_group_commit_runs_sum') };
}

/** svc_group_commit_runs of a unit: its cumulative bucket counts, by upper bound (`le`). */
async function groupBuckets(unit: string): Promise<Map<string, number>> {
  const metric = await metricsRegistry.getSingleMetric('svc_group_commit_runs')!.get();
  return new Map(
    metric.values
      .filter((v) => (v as { metricName?: string }).metricName === 'svc_group_commit_runs_bucket' && v.labels.unit === unit)
      .map((v) => [String(v.labels.le), v.value]),
  );
}

/** svc_deliveries_total of a unit's deliveries given back to the queue (`released`). */
async function releasedDeliveries(unit: string): Promise<number> {
  const metric = await metricsRegistry.getSingleMetric('svc_deliveries_total')!.get();
  return metric.values.filter((v) => v.labels.unit === unit && v.labels.result === 'released').reduce((n, v) => n + v.value, 0);
}

/** A run's trail rows of these events, in order, each with the transaction that wrote it (as txid_current() reports it). */
async function trailRowsWithTx(runId: string, names: string[]): Promise<Array<{ event: string; attempt: number; detail: Record<string, unknown>; tx: string }>> {
  const rows = await h.sql<{ event: string; attempt: number; detail: Record<string, unknown>; x: string }[]>`
    SELECT event, attempt, detail, xmin::text AS x, id FROM task_run_events WHERE run_id = ${runId} AND event = ANY(${names}::text[])
    UNION ALL SELECT event, attempt, detail, xmin::text, id FROM platform_task_run_events WHERE run_id = ${runId} AND event = ANY(${names}::text[])
    ORDER BY id`;
  // txid_current() is the xid with its epoch above 32 bits (0 in a fresh cluster).
  const [epoch] = await h.sql<{ e: string }[]>`SELECT (txid_current() >> 32)::text AS e`;
  return rows.map((r) => ({ event: r.event, attempt: r.attempt, detail: r.detail, tx: String((BigInt(epoch!.e) << 32n) + BigInt(r.x)) }));
}

/** The transaction that wrote a run's `started` and `succeeded` rows (as txid_current() reports it). */
async function trailTx(runId: string): Promise<string[]> {
  return (await trailRowsWithTx(runId, ['started', 'succeeded'])).map((r) => r.tx);
}

/**
 * Each run has exactly one effect, committed in one transaction with its `started` and `succeeded`,
 * and a causal trail; returns the transactions the effects committed in.
 */
async function expectEachCommittedOnce(runIds: string[], keys: string[]): Promise<Set<string>> {
  const txids = new Set<string>();
  for (const [i, runId] of runIds.entries()) {
    const effects = await effectsOf(keys[i]!);
    expect(effects).toHaveLength(1);
    txids.add(effects[0]!.txid);
    expect(await trailTx(runId)).toEqual([effects[0]!.txid, effects[0]!.txid]);
    expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
  }
  return txids;
}

/**
 * Waits for the runs to succeed and stops the workers; each run has one effect, committed with its
 * `started` and `succeeded`, and all of them in ONE transaction, which is returned.
 */
async function committedAsOneGroup(runtime: WorkerRuntime, runIds: string[], keys: string[]): Promise<string> {
  for (const runId of runIds) expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
  await runtime.stop();
  const txids = await expectEachCommittedOnce(runIds, keys);
  expect(txids.size).toBe(1);
  return [...txids][0]!;
}

/** True when the runs' `started` and `succeeded` rows were all written by one transaction: they committed as one group. */
async function committedTogether(runIds: string[]): Promise<boolean> {
  const txids = new Set<string>();
  for (const runId of runIds) for (const txid of await trailTx(runId)) txids.add(txid);
  return txids.size === 1;
}

/** Backends waiting on a lock whose statement matches `like`. */
async function lockWaiters(like: string): Promise<number> {
  const [row] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE ${like}`;
  return row!.n;
}

/** Messages visible in the bulk queue (received ones are not). */
async function visibleInBulk(): Promise<string | undefined> {
  const out = await h.sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl(h.queueUrlPrefix, 'bulk'), AttributeNames: ['ApproximateNumberOfMessages'] }));
  return out.Attributes?.ApproximateNumberOfMessages;
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'One-Time Filter'?: string;
  Plans?: PlanNode[];
}

/**
 * The sequential scans of the ledger in a plan that run every time it runs: a scan below a one-time
 * filter runs only when that filter passes (the finish's delete of a left-out member's claim, which
 * needs a cancel landing between that member's handler and the finish).
 */
function ledgerScansRunEveryTime(node: PlanNode, guarded = false): string[] {
  const here = guarded || node['One-Time Filter'] !== undefined;
  const own = node['Node Type'] === 'Seq Scan' && /^(platform_)?idempotency_keys$/.test(node['Relation Name'] ?? '') && !here ? [node['Relation Name']!] : [];
  return [...own, ...(node.Plans ?? []).flatMap((child) => ledgerScansRunEveryTime(child, here))];
}

describe('group commit', () => {
  it('R-UNT-09 R-IDM-08 R-IDM-12 R-TRL-08 runs received together commit in one transaction, each with its own effect, started and succeeded', async () => {
    const keys = ['g-ok-1', 'g-ok-2', 'g-ok-3', 'g-ok-4', 'g-ok-5', 'g-ok-6'];
    const metricBefore = await groupMetric('fixture.group_tenant');
    const { runIds, runtime } = await receivedTogether(keys.map((key) => ({ key })));
    for (const runId of runIds) expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    await runtime.stop();
    const txids = await expectEachCommittedOnce(runIds, keys);
    for (const [i, runId] of runIds.entries()) {
      expect((await h.run(runId))!).toMatchObject({ attempts: 1, outcome: { key: keys[i], attempt: 1 } });
      expect(events(await h.trail(runId)).filter((e) => e !== 'sent')).toEqual(['queued', 'received', 'started', 'succeeded']);
      const key = idempotencyKeyOf('fixture.group_tenant', runId);
      const [ledger] = await h.sql`SELECT status, attempt, outcome FROM idempotency_keys WHERE tenant_id = ${tenantId} AND idempotency_key = ${key}`;
      expect(ledger).toMatchObject({ status: 'completed', attempt: 1, outcome: { key: keys[i], attempt: 1 } });
      const cached = await h.redis!.get(idempotencyGateKey(await databaseIdentityOf(h.sql), 'tenant', tenantId, key.toString('hex')));
      expect(JSON.parse(cached!)).toMatchObject({ s: 'c', o: { key: keys[i], attempt: 1 } });
    }
    // Six runs, fewer transactions: the runs of the receive shared them, as svc_group_commit_runs reports.
    expect(txids.size).toBeLessThan(keys.length);
    const metricAfter = await groupMetric('fixture.group_tenant');
    expect(metricAfter.sum - metricBefore.sum).toBe(keys.length);
    expect(metricAfter.count - metricBefore.count).toBe(txids.size);
  });

  it('R-UNT-09 R-IDM-08 R-TRL-08 platform runs share one transaction too, each with its effect, started and succeeded', async () => {
    const keys = ['g-sys-1', 'g-sys-2', 'g-sys-3', 'g-sys-4'];
    const { runIds, runtime } = await receivedTogether(keys.map((key) => ({ key })), { system: true });
    for (const runId of runIds) expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    await runtime.stop();
    const txids = await expectEachCommittedOnce(runIds, keys);
    for (const runId of runIds) {
      const [ledger] = await h.sql`SELECT status, attempt FROM platform_idempotency_keys WHERE idempotency_key = ${idempotencyKeyOf('fixture.group_system', runId)}`;
      expect(ledger).toMatchObject({ status: 'completed', attempt: 1 });
    }
    expect(txids.size).toBeLessThan(keys.length);
  });

  it('R-WRK-04 R-UNT-09 a member that fails transiently rolls back its effect alone: its neighbours commit, it retries and succeeds once', async () => {
    const keys = ['g-tf-ok-1', 'g-tf-fail', 'g-tf-ok-2', 'g-tf-ok-3'];
    const { runIds, runtime } = await receivedTogether(keys.map((key) => ({ key, ...(key === 'g-tf-fail' ? { fail: 'transient' as const, firstAttemptOnly: true } : {}) })));
    for (const runId of runIds) expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    await runtime.stop();
    // The failing handler ran in the same transaction as a neighbour that committed.
    const failedIn = handlerTx.get('g-tf-fail#1');
    const neighbours = await Promise.all(['g-tf-ok-1', 'g-tf-ok-2', 'g-tf-ok-3'].map(effectsOf));
    expect(neighbours.every((e) => e.length === 1 && e[0]!.attempt === 1)).toBe(true);
    expect(neighbours.some((e) => e[0]!.txid === failedIn)).toBe(true);
    // Its own first effect rolled back; the retry's committed, once.
    expect((await effectsOf('g-tf-fail')).map((e) => e.attempt)).toEqual([2]);
    const failing = runIds[1]!;
    expect((await h.run(failing))!.attempts).toBe(2);
    const trail = (await h.trail(failing)).filter((t) => t.event !== 'sent');
    expect(events(trail)).toEqual(['queued', 'received', 'started', 'retry_scheduled', 'received', 'started', 'succeeded']);
    expect(trail[2]).toMatchObject({ attempt: 1, detail: { effect: 'rolled_back' } });
    expect((await causalProblems(h.sql, failing)).problems).toEqual([]);
    const [ledger] = await h.sql`SELECT status, attempt FROM idempotency_keys WHERE tenant_id = ${tenantId} AND idempotency_key = ${idempotencyKeyOf('fixture.group_tenant', failing)}`;
    expect(ledger).toMatchObject({ status: 'completed', attempt: 2 });
  });

  it('R-WRK-03 a member that fails permanently is failed and dead-lettered alone; its neighbours commit', async () => {
    const keys = ['g-pf-ok-1', 'g-pf-fail', 'g-pf-ok-2'];
    const { runIds, runtime } = await receivedTogether(keys.map((key) => ({ key, ...(key === 'g-pf-fail' ? { fail: 'permanent' as const } : {}) })));
    const statuses = await Promise.all(runIds.map(async (id) => (await h.waitForStatus(id, ['succeeded', 'failed'])).status));
    expect(statuses).toEqual(['succeeded', 'failed', 'succeeded']);
    await h.waitForEvent(runIds[1]!, 'dead_lettered');
    await runtime.stop();
    const neighbours = await Promise.all(['g-pf-ok-1', 'g-pf-ok-2'].map(effectsOf));
    expect(neighbours.map((e) => e.length)).toEqual([1, 1]);
    expect(neighbours.some((e) => e[0]!.txid === handlerTx.get('g-pf-fail#1'))).toBe(true);
    expect(await effectsOf('g-pf-fail')).toEqual([]);
    expect(events(await h.trail(runIds[1]!)).filter((e) => e !== 'sent')).toEqual(['queued', 'received', 'started', 'failed', 'dead_lettered']);
    const dead = await h.drainDlq('bulk');
    // A fence marker a runtime received before the fence's own receive did is dead-lettered too (not JSON).
    const deadRuns = dead.flatMap((d) => (d.body.startsWith('{') ? [JSON.parse(d.body).run_id as string] : []));
    expect(deadRuns).toContain(runIds[1]);
  });

  it('R-WRK-04 a member past its deadline is aborted and retried; its neighbours commit in the same transaction', async () => {
    const keys = ['g-to-ok-1', 'g-to-slow', 'g-to-ok-2'];
    const { runIds, runtime } = await receivedTogether(keys.map((key) => ({ key, ...(key === 'g-to-slow' ? { sleepMs: 10_000, firstAttemptOnly: true } : {}) })));
    for (const runId of runIds) expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    await runtime.stop();
    const neighbours = await Promise.all(['g-to-ok-1', 'g-to-ok-2'].map(effectsOf));
    expect(neighbours.some((e) => e.length === 1 && e[0]!.txid === handlerTx.get('g-to-slow#1'))).toBe(true);
    expect((await effectsOf('g-to-slow')).map((e) => e.attempt)).toEqual([2]);
    const trail = (await h.trail(runIds[1]!)).filter((t) => t.event !== 'sent');
    expect(trail.find((t) => t.event === 'retry_scheduled')).toMatchObject({ attempt: 1, error_code: 'UNIT_TIMED_OUT' });
  });

  it('R-UNT-09 an operator cancel of a member aborts it alone: its effect rolls back, no retry, its neighbours commit', async () => {
    const keys = ['g-cx-ok-1', 'g-cx-slow', 'g-cx-ok-2'];
    const { runIds, runtime } = await receivedTogether(keys.map((key) => ({ key, ...(key === 'g-cx-slow' ? { sleepMs: 1_800 } : {}) })));
    await waitFor(() => handlerTx.has('g-cx-slow#1'), 10_000, { what: 'the slow member’s handler started' });
    // Its run is registered (`running`) once its handler has run for RUNNING_VISIBLE_AFTER_MS.
    await h.waitForStatus(runIds[1]!, ['running']);
    expect(await cancelRunNow(h.sql, { runId: runIds[1]!, by: 'alice', reason: 'wrong customer' })).toMatchObject({ result: 'cancelled', previousStatus: 'running' });
    const statuses = await Promise.all(runIds.map(async (id) => (await h.waitForStatus(id, ['succeeded', 'failed'])).status));
    expect(statuses).toEqual(['succeeded', 'failed', 'succeeded']);
    // Settled: the cancel's settlement stands, the message is acknowledged, not retried.
    await waitFor(() => /the run left running under this delivery/.test(h.logs()), 10_000, { what: 'the cancelled member settled' });
    await runtime.stop();
    expect(await effectsOf('g-cx-slow')).toEqual([]);
    expect((await h.run(runIds[1]!))).toMatchObject({ attempts: 1, outcome: { error: { code: 'CANCELLED' } } });
    // Its handler ran: the attempt's `started`, rolled back with the effect, is recorded by its settlement, before the cancel's `failed` in causal order.
    const { problems, events: causal } = await causalProblems(h.sql, runIds[1]!);
    expect({ problems, causal }).toEqual({ problems: [], causal: ['queued(0)', 'sent(0)', 'received(1)', 'started(1)', 'failed(1)'] });
    const neighbours = await Promise.all(['g-cx-ok-1', 'g-cx-ok-2'].map(effectsOf));
    expect(neighbours.some((e) => e.length === 1 && e[0]!.txid === handlerTx.get('g-cx-slow#1'))).toBe(true);
  });

  it('R-UNT-09 R-WRK-04 a COMMIT that fails for one member costs the others no attempt: each runs again alone under the same attempt; the culprit alone fails and retries', async () => {
    const keys = ['g-cf-ok-1', 'g-cf-ok-2', 'commitfail-g', 'g-cf-ok-3', 'g-cf-ok-4', 'g-cf-ok-5'];
    const { runIds, runtime } = await receivedTogether(keys.map((key) => ({ key })));
    for (const runId of runIds) expect((await h.waitForStatus(runId, ['succeeded', 'failed'], 30_000)).status).toBe('succeeded');
    await runtime.stop();
    // All six ran in the refused transaction...
    const refused = handlerTx.get('commitfail-g#1');
    expect(keys.map((k) => handlerTx.get(`${k}#1`))).toEqual(keys.map(() => refused));
    for (const [i, runId] of runIds.entries()) {
      const trail = (await h.trail(runId)).filter((t) => t.event !== 'sent');
      expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
      if (keys[i] === 'commitfail-g') {
        // ...the culprit, alone, is refused again: that attempt fails and its retry commits.
        expect((await effectsOf(keys[i])).map((e) => e.attempt)).toEqual([2]);
        expect(events(trail)).toEqual(['queued', 'received', 'started', 'retry_scheduled', 'received', 'started', 'succeeded']);
        continue;
      }
      // ...the healthy ones ran again alone, each in a transaction of its own, under attempt 1: no retry.
      const effects = await effectsOf(keys[i]!);
      expect(effects.map((e) => e.attempt)).toEqual([1]);
      expect(effects[0]!.txid).not.toBe(refused);
      expect((await h.run(runId))!.attempts).toBe(1);
      expect(events(trail)).toEqual(['queued', 'received', 'started', 'succeeded']);
    }
  });

  it('R-UNT-09 a setting one member makes for the rest of the transaction (statement_timeout, search_path) reaches no later member: every run commits once, in one group', async () => {
    // Each setter is followed by a member the setting would break: a 200 ms statement under a 50 ms
    // timeout, an insert that would land in fixture_elsewhere.group_effects.
    const keys = ['g-set-timeout', 'g-set-timeout-next', 'g-set-path', 'g-set-path-next'];
    const { runIds, runtime } = await receivedTogether([
      { key: keys[0]!, setLocal: 'statement_timeout' },
      { key: keys[1]!, sqlSleepMs: 200 },
      { key: keys[2]!, setLocal: 'search_path' },
      { key: keys[3]! },
    ]);
    for (const runId of runIds) expect((await h.waitForStatus(runId, ['succeeded', 'failed'], 30_000)).status).toBe('succeeded');
    await runtime.stop();
    for (const runId of runIds) {
      expect((await h.run(runId))!.attempts).toBe(1);
      expect(events(await h.trail(runId)).filter((e) => e !== 'sent')).toEqual(['queued', 'received', 'started', 'succeeded']);
    }
    expect(await h.sql`SELECT key FROM fixture_elsewhere.group_effects`).toEqual([]);
    // The settings were put back inside the group: it committed as one, none of its members ran again.
    const txids = await expectEachCommittedOnce(runIds, keys);
    expect(txids.size).toBe(1);
  });

  it('R-UNT-09 R-WRK-04 a member that deadlocks on a lock its group holds for an earlier member runs again alone after the group commits, under the same attempt', async () => {
    // g-dl-x locks row x (kept by the group until its COMMIT); g-dl-y waits for row y, which the test's
    // transaction holds, and the test's transaction then waits for row x: g-dl-y, which waited first,
    // is the deadlock's victim (40P01). Alone it has nothing against anyone.
    const other = await h.sql.reserve();
    try {
      await other`SET deadlock_timeout = '10s'`;
      await other`BEGIN`;
      await other`SELECT 1 FROM group_rows WHERE id = 'y' FOR UPDATE`;
      const keys = ['g-dl-x', 'g-dl-y'];
      const { runIds, runtime } = await receivedTogether([{ key: keys[0]!, lockRow: 'x' }, { key: keys[1]!, lockRow: 'y' }], { unit: 'fixture.group_long' });
      await waitFor(async () => (await lockWaiters('%FROM group_rows WHERE id%')) === 1, 15_000, { what: 'g-dl-y waiting for row y' });
      // Returns once the group has committed (row x free): the victim's own statement was cancelled before.
      await other`SELECT 1 FROM group_rows WHERE id = 'x' FOR UPDATE`;
      await other`COMMIT`;
      for (const runId of runIds) expect((await h.waitForStatus(runId, ['succeeded', 'failed'], 30_000)).status).toBe('succeeded');
      await runtime.stop();
      for (const [i, runId] of runIds.entries()) {
        expect((await h.run(runId))!.attempts).toBe(1);
        expect(events(await h.trail(runId)).filter((e) => e !== 'sent')).toEqual(['queued', 'received', 'started', 'succeeded']);
        expect((await effectsOf(keys[i]!)).map((e) => e.attempt)).toEqual([1]);
        expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
      }
      // It was the deadlock's victim (logged as it ran again alone)...
      expect(h.logs()).toMatch(/40P01/);
      // ...and committed in a transaction of its own, after the group's.
      expect((await effectsOf('g-dl-y'))[0]!.txid).not.toBe((await effectsOf('g-dl-x'))[0]!.txid);
    } finally {
      await other`ROLLBACK`.catch(() => {});
      other.release();
    }
  });

  it('R-WRK-09 a release on shutdown releases the whole group: every member back to the queue, no effect, each runs once later', async () => {
    const keys = ['g-rl-1', 'g-rl-slow', 'g-rl-2'];
    const { runIds, runtime } = await receivedTogether(
      keys.map((key) => ({ key, ...(key === 'g-rl-slow' ? { sleepMs: 1_900, firstAttemptOnly: true } : {}) })),
      { drainMs: 200 },
    );
    await waitFor(() => handlerTx.has('g-rl-slow#1'), 10_000, { what: 'the slow member’s handler started' });
    await runtime.stop();
    for (const [i, runId] of runIds.entries()) {
      expect((await h.run(runId))!.status).toBe('queued');
      expect(events(await h.trail(runId))).toContain('released_on_shutdown');
      expect(await effectsOf(keys[i]!)).toEqual([]);
    }
    const next = await h.startWorkers({ queues: ['bulk'] });
    for (const runId of runIds) expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    await next.stop();
    for (const key of keys) expect(await effectsOf(key)).toHaveLength(1);
  });

  it('R-IDM-11 R-OBX-16 a duplicate of a member in the same receive does not join its group: one effect', async () => {
    const first = await h.dispatch('fixture.group_tenant', { key: 'g-dup', sleepMs: 300 }, tenantActor());
    await h.sendRaw('bulk', first.envelope);
    const { runIds, runtime } = await receivedTogether([{ key: 'g-dup-ok-1' }, { key: 'g-dup-ok-2' }]);
    for (const runId of [first.runId, ...runIds]) expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    await h.waitForReceives(first.runId, 2, 15_000);
    await runtime.stop();
    expect(await effectsOf('g-dup')).toHaveLength(1);
    expect((await h.trail(first.runId)).filter((t) => t.event === 'started')).toHaveLength(1);
  });

  it('R-IDM-09 a member whose key already has a ledger row (a failed attempt) takes it over in its savepoint and commits with the group', async () => {
    const taken = await h.dispatch('fixture.group_tenant', { key: 'g-take' }, tenantActor());
    const key = idempotencyKeyOf('fixture.group_tenant', taken.runId);
    await h.sql`INSERT INTO idempotency_keys (tenant_id, idempotency_key, request_fingerprint, status, expires_at)
                VALUES (${tenantId}, ${key}, ${fingerprintOf(taken.envelope.payload)}, 'failed_retryable', now() + interval '1 hour')`;
    const { runIds, runtime } = await receivedTogether([{ key: 'g-take-ok-1' }, { key: 'g-take-ok-2' }]);
    for (const runId of [taken.runId, ...runIds]) expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    await runtime.stop();
    const effects = await effectsOf('g-take');
    expect(effects).toHaveLength(1);
    expect(await trailTx(taken.runId)).toEqual([effects[0]!.txid, effects[0]!.txid]);
    const [ledger] = await h.sql`SELECT status, attempt FROM idempotency_keys WHERE tenant_id = ${tenantId} AND idempotency_key = ${key}`;
    expect(ledger).toMatchObject({ status: 'completed', attempt: 2 });
    expect(events(await h.trail(taken.runId)).filter((e) => e !== 'sent')).toEqual(['queued', 'received', 'started', 'succeeded']);
    const neighbours = await Promise.all(['g-take-ok-1', 'g-take-ok-2'].map(effectsOf));
    expect(neighbours.some((e) => e[0]!.txid === effects[0]!.txid)).toBe(true);
  });

  it('R-IDM-11 in a receive of a group-commit unit, a run whose Redis gate holds its result replays it, and a key reused with another payload fails, beside runs that commit together', async () => {
    const keys = ['g-gate-replay', 'g-gate-reused', 'g-gate-ok-1', 'g-gate-ok-2'];
    const { runIds, runtime } = await receivedTogether(
      keys.map((key) => ({ key })),
      {
        // The gate of the first run holds a result for its own payload; the second's, for another payload.
        // The ledger holds both (a gate alone is never replayed), and the replay takes the ledger's outcome.
        beforeWorkers: async ([replayId, reusedId]) => {
          for (const [runId, fingerprintHex] of [
            [replayId!, fingerprintOf({ key: 'g-gate-replay' }).toString('hex')],
            [reusedId!, 'ab'.repeat(32)],
          ] as const) {
            const key = idempotencyKeyOf('fixture.group_tenant', runId);
            const gate = idempotencyGateKey(await databaseIdentityOf(h.sql), 'tenant', tenantId, key.toString('hex'));
            await h.redis!.set(gate, JSON.stringify({ s: 'c', o: { from: 'gate' }, f: fingerprintHex }), 'PX', 60_000);
            await h.sql`INSERT INTO idempotency_keys (tenant_id, idempotency_key, request_fingerprint, status, outcome, expires_at)
                        VALUES (${tenantId}, ${key}, ${Buffer.from(fingerprintHex, 'hex')}, 'completed', ${h.sql.json({ from: 'ledger' })}, now() + interval '1 day')`;
          }
        },
      },
    );
    const [replayId, reusedId, ...okIds] = runIds;
    expect(await h.waitForStatus(replayId!, ['succeeded', 'failed'])).toMatchObject({ status: 'succeeded', outcome: { from: 'ledger' } });
    expect((await h.waitForStatus(reusedId!, ['succeeded', 'failed'])).status).toBe('failed');
    for (const runId of okIds) expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    await runtime.stop();
    // Neither handler ran; the replay's trail says where its result came from.
    expect(await effectsOf('g-gate-replay')).toEqual([]);
    expect(await effectsOf('g-gate-reused')).toEqual([]);
    expect((await h.trail(replayId!)).find((e) => e.event === 'received')?.detail).toMatchObject({ replay: 'gate' });
    expect(events(await h.trail(replayId!))).not.toContain('started');
    expect((await h.trail(reusedId!)).find((e) => e.event === 'failed')?.error_code).toBe('IDEMPOTENCY_KEY_REUSED');
    // The other two still shared one transaction.
    const txids = await expectEachCommittedOnce(okIds, ['g-gate-ok-1', 'g-gate-ok-2']);
    expect(txids.size).toBe(1);
  });

  it('R-IDM-12 the usual group never reads the ledger by a sequential scan, even through generic plans made while the ledger was small', async () => {
    // postgres.js prepares every statement, and PostgreSQL moves to a generic plan after five runs: a plan
    // made while a new deployment's ledger is small would scan the whole ledger for every group until
    // the next ANALYZE (bench/results/hot-path-levers-2026-11-24.md). Every statement the
    // runtime sends that reads the ledger is planned here as PostgreSQL's generic plan, on this small ledger.
    const sent = new Set<string>();
    const traced = postgres(h.db.url, { max: 24, onnotice: () => {}, debug: (_connection, query) => sent.add(query) });
    try {
      // Fenced before the runtime starts: a live runtime would take the fence's markers itself.
      await h.fenceAbandonedPolls('bulk');
      const runtime = await h.startWorkers({ queues: ['bulk'], sql: traced });
      const runIds: string[] = [];
      for (const key of ['g-plan-1', 'g-plan-2', 'g-plan-3', 'g-plan-4']) runIds.push((await h.dispatch('fixture.group_tenant', { key }, tenantActor())).runId);
      await h.relay();
      for (const runId of runIds) expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
      await runtime.stop();
    } finally {
      await traced.end({ timeout: 5 });
    }
    // A new deployment's ledger after its first few hundred runs, analyzed (autovacuum does it after 50 + 10 %).
    await h.sql`INSERT INTO idempotency_keys (tenant_id, idempotency_key, request_fingerprint, status, outcome, expires_at)
                SELECT ${tenantId}, sha256(('g-plan-ledger-' || g)::bytea), sha256(('f' || g)::bytea), 'completed', '{}', now() + interval '1 day'
                  FROM generate_series(1, 500) g`;
    await h.sql`ANALYZE idempotency_keys`;
    const ledgerStatements = [...sent].filter((q) => /idempotency_keys/.test(q) && /\$1\b/.test(q));
    // The claim and the finish at least.
    expect(ledgerStatements.length).toBeGreaterThanOrEqual(2);
    for (const statement of ledgerStatements) {
      const [row] = await h.sql.unsafe(`EXPLAIN (GENERIC_PLAN, FORMAT JSON) ${statement}`);
      const plan = (row!['QUERY PLAN'] as Array<{ Plan: PlanNode }>)[0]!.Plan;
      expect(ledgerScansRunEveryTime(plan), statement).toEqual([]);
    }
  });

  it('R-UNT-09 R-TRL-08 a member claimed fresh registers with its effect: its received, started and succeeded commit in the one transaction, its run queued until then', async () => {
    const keys = ['g-fold-1', 'g-fold-2', 'g-fold-3'];
    const { runIds, runtime } = await receivedTogether(keys.map((key) => ({ key })));
    const effectTx = await committedAsOneGroup(runtime, runIds, keys);
    for (const runId of runIds) {
      // The registration (received, attempts + 1, started_at) went into the group's finish: no commit of its own.
      const rows = await trailRowsWithTx(runId, ['received', 'started', 'succeeded']);
      expect(rows.map((r) => [r.event, r.attempt, r.tx])).toEqual([
        ['received', 1, effectTx],
        ['started', 1, effectTx],
        ['succeeded', 1, effectTx],
      ]);
      const run = (await h.run(runId))!;
      expect(run).toMatchObject({ status: 'succeeded', attempts: 1 });
      expect(run.started_at).not.toBeNull();
    }
  });

  it('R-UNT-09 R-TRL-08 a group-commit run received alone is a group of one: its received, started and succeeded commit with its effect, no registration commit of its own', async () => {
    await h.fenceAbandonedPolls('bulk');
    const { runId } = await h.dispatch('fixture.group_tail_effect', { key: 'g-fold-alone' }, tenantActor());
    await h.relay();
    const runtime = await h.startWorkers({ queues: ['bulk'] });
    try {
      expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    } finally {
      await runtime.stop();
    }
    const [effect] = await effectsOf('g-fold-alone');
    const rows = await trailRowsWithTx(runId, ['received', 'started', 'succeeded']);
    expect(rows.map((r) => [r.event, r.attempt, r.tx])).toEqual([
      ['received', 1, effect!.txid],
      ['started', 1, effect!.txid],
      ['succeeded', 1, effect!.txid],
    ]);
    expect(await h.run(runId)).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
  });

  it('R-UNT-09 an operator cancel of a group-commit run that executes alone cancels its statement at once: failed, its effect rolled back, no retry', async () => {
    await h.fenceAbandonedPolls('bulk');
    // fixture.group_tail_effect: a 30 s timeout, so nothing but the cancel ends the 25 s pg_sleep early.
    const { runId } = await h.dispatch('fixture.group_tail_effect', { key: 'g-one-cx', sqlSleepMs: 25_000 }, tenantActor());
    await h.relay();
    const runtime = await h.startWorkers({ queues: ['bulk'] });
    const sleeping = async () => {
      const [row] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE '%pg_sleep%' AND state = 'active' AND pid <> pg_backend_pid()`;
      return row!.n;
    };
    await waitFor(async () => (await sleeping()) === 1, 10_000, { what: 'the handler’s pg_sleep under way' });
    await h.waitForStatus(runId, ['running']);
    expect(await cancelRunNow(h.sql, { runId, by: 'alice', reason: 'wrong customer' })).toMatchObject({ result: 'cancelled', previousStatus: 'running' });
    // The statement is cancelled within a heartbeat, long before its 25 s: the delivery settles.
    await waitFor(async () => (await sleeping()) === 0, 10_000, { what: 'the handler’s statement cancelled' });
    await waitFor(() => /the run left running under this delivery/.test(h.logs()), 10_000, { what: 'the cancelled run settled' });
    await runtime.stop();
    expect(await effectsOf('g-one-cx')).toEqual([]);
    expect(await h.run(runId)).toMatchObject({ status: 'failed', attempts: 1, outcome: { error: { code: 'CANCELLED' } } });
  });

  it('R-WRK-01 R-TRL-08 a member whose handler runs past 100 ms, or reports progress, is registered on its own first: a poller sees it running meanwhile', async () => {
    // g-vis-hold holds until the test lets it go; g-vis-progress reports 40 % at once and returns; g-vis-quick returns at once.
    const payloads = [{ key: 'g-vis-progress', progress: 40 }, { key: 'g-vis-hold', hold: true }, { key: 'g-vis-quick' }];
    const { runIds, runtime } = await receivedTogether(payloads, { quiet: true });
    const [progressId, holdId, quickId] = runIds as [string, string, string];
    await waitFor(() => holds.has('g-vis-hold'), 10_000, { what: 'the holding member’s handler started' });
    // Past RUNNING_VISIBLE_AFTER_MS the holding member's run is `running`, while its handler still runs.
    expect((await h.waitForStatus(holdId, ['running'], 5_000)).status).toBe('running');
    expect(quietDone.has('g-vis-hold#1')).toBe(false);
    // The member that reported progress was registered before it: its run shows it while the group is open.
    expect(await h.run(progressId)).toMatchObject({ status: 'running', progress: 40, attempts: 1 });
    // The one whose handler has not run yet is still `queued`.
    expect((await h.run(quickId))!.status).toBe('queued');
    holds.get('g-vis-hold')!();
    for (const runId of runIds) expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    await runtime.stop();
    for (const runId of runIds) {
      expect((await h.run(runId))!.attempts).toBe(1);
      expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
      expect(events(await h.trail(runId)).filter((e) => e === 'received')).toHaveLength(1);
    }
    expect((await h.trail(progressId)).find((e) => e.event === 'progress')).toMatchObject({ attempt: 1, detail: { percent: 40 } });
    // All three still committed their started and succeeded in one transaction.
    expect(await committedTogether(runIds)).toBe(true);
  });

  it('R-OBX-16 R-TRL-08 a member whose outbox row is still pending (a relay died after its send) registers at once: the row is marked sent for good, its sent before its received', async () => {
    await h.fenceAbandonedPolls('bulk');
    const keys = ['g-unsent-ok-1', 'g-unsent', 'g-unsent-ok-2'];
    const runs = [];
    for (const key of keys) runs.push(await h.dispatch('fixture.group_tenant', { key }, tenantActor()));
    const runIds = runs.map((r) => r.runId);
    // The relay "died" between its send and its commit: the message is in the queue, the row still pending
    // (held back from this test's relay pass, then due again).
    await h.sql`UPDATE outbox_messages SET available_at = clock_timestamp() + interval '1 hour' WHERE run_id = ${runIds[1]!}`;
    await h.relay();
    await h.sql`UPDATE outbox_messages SET available_at = clock_timestamp() WHERE run_id = ${runIds[1]!}`;
    await h.sendRaw('bulk', runs[1]!.envelope);
    const runtime = await h.startWorkers({ queues: ['bulk'] });
    const effectTx = await committedAsOneGroup(runtime, runIds, keys);
    const writtenBy = async (runId: string) => new Map((await trailRowsWithTx(runId, ['sent', 'received'])).map((r) => [r.event, r]));
    // The pending row's member registered on its own, before the group's finish: its `sent` (recorded by
    // the delivery) and `received` committed apart from the effect, and the relay has nothing left to send.
    const unsent = await writtenBy(runIds[1]!);
    expect(unsent.get('sent')!.detail).toMatchObject({ recorded_by: 'delivery' });
    expect(unsent.get('received')!.tx).toBe(unsent.get('sent')!.tx);
    expect(unsent.get('received')!.tx).not.toBe(effectTx);
    const [row] = await h.sql<{ sent: boolean }[]>`SELECT sent_at IS NOT NULL AS sent FROM outbox_messages WHERE run_id = ${runIds[1]!}`;
    expect(row!.sent).toBe(true);
    // Its neighbours registered in the finish, with their effects.
    for (const runId of [runIds[0]!, runIds[2]!]) expect((await writtenBy(runId)).get('received')!.tx).toBe(effectTx);
    expect(await effectsOf('g-unsent')).toHaveLength(1);
  });

  it('R-UNT-09 R-IDM-08 R-TRL-08 members whose handler sends no statement commit in one transaction, each with its started and succeeded', async () => {
    const keys = ['g-q-1', 'g-q-2', 'g-q-3', 'g-q-4'];
    // A stale cached status of each run (as a poller would have left it) must be evicted by the group.
    const stale = async (runIds: string[]) => {
      for (const runId of runIds) await h.redis!.set(runStatusKey(runId), '{"status":"queued"}', 'PX', 60_000);
    };
    const { runIds, runtime } = await receivedTogether(keys.map((key) => ({ key })), { quiet: true, beforeWorkers: stale });
    for (const runId of runIds) expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    await waitFor(async () => (await h.redis!.exists(...runIds.map(runStatusKey))) === 0, 15_000, { what: 'every stale cached status evicted' });
    await runtime.stop();
    const txids = new Set<string>();
    for (const [i, runId] of runIds.entries()) {
      const [started, succeeded] = await trailTx(runId);
      expect(started).toBe(succeeded);
      txids.add(started!);
      expect((await h.run(runId))!).toMatchObject({ attempts: 1, outcome: { key: keys[i], attempt: 1 } });
      expect(events(await h.trail(runId)).filter((e) => e !== 'sent')).toEqual(['queued', 'received', 'started', 'succeeded']);
      const key = idempotencyKeyOf('fixture.group_quiet', runId);
      const [ledger] = await h.sql`SELECT status, attempt FROM idempotency_keys WHERE tenant_id = ${tenantId} AND idempotency_key = ${key}`;
      expect(ledger).toMatchObject({ status: 'completed', attempt: 1 });
      // The group's one pipeline filled every member's gate with its result.
      const cached = await h.redis!.get(idempotencyGateKey(await databaseIdentityOf(h.sql), 'tenant', tenantId, key.toString('hex')));
      expect(JSON.parse(cached!)).toMatchObject({ s: 'c', o: { key: keys[i], attempt: 1 } });
      expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
    }
    expect(txids.size).toBeLessThan(keys.length);
  });

  it('R-UNT-09 a group gives its slot back once its handlers returned: the next group runs while its finish waits, for one group of a unit at a time', async () => {
    // fixture.group_tail has 1 slot, which a whole group takes; the consumer holds up to 40 of its
    // messages, so the next groups are received and wait for that slot. Each group's finish is held on
    // a row lock the test takes on one of its runs (after their registration), so the group stays in
    // its tail until the test commits.
    await h.fenceAbandonedPolls('bulk');
    const dispatch = async (key: string, hold: boolean) => (await h.dispatch('fixture.group_tail', { key, hold }, tenantActor())).runId;
    const a = [await dispatch('t-a1', true), await dispatch('t-a2', false)];
    await h.relay();
    const runtime = await h.startWorkers({ queues: ['bulk'] });
    const locks = await h.sql.reserve();
    try {
      await waitFor(() => holds.has('t-a1'), 10_000, { what: 'group A running' });
      // Registered on its own once its handler has run for RUNNING_VISIBLE_AFTER_MS, before the lock below.
      await h.waitForStatus(a[0]!, ['running']);
      await locks`BEGIN`;
      await locks`SELECT 1 FROM task_runs WHERE run_id = ${a[0]!} FOR UPDATE`;
      // Group B is received and waits for the unit's slot: A holds it.
      const b = [await dispatch('t-b1', true), await dispatch('t-b2', false)];
      await h.relay();
      holds.get('t-a1')!();
      // A's handlers returned; its finish waits on the lock, and B runs in the slot A gave back.
      await waitFor(() => holds.has('t-b1'), 10_000, { what: 'group B running while group A commits' });
      // t-a2's handler returned at once: its registration is in A's finish, so its run is still `queued`.
      expect((await Promise.all(a.map((id) => h.run(id)))).map((r) => r!.status)).toEqual(['running', 'queued']);
      await h.waitForStatus(b[0]!, ['running']);
      await locks`SELECT 1 FROM task_runs WHERE run_id = ${b[0]!} FOR UPDATE`;
      const c = await dispatch('t-c1', false);
      await h.relay();
      holds.get('t-b1')!();
      // B's handlers returned while A is still in its tail: B keeps its slot through its own finish.
      await waitFor(async () => (await lockWaiters('%UPDATE task_runs%succeeded%')) === 2, 10_000, { what: 'both finishes waiting on the locks' });
      // C is received and waits for its unit's slot, which would take it at once. Nothing would announce
      // C running: give it the time a run takes here, many times over.
      await waitFor(async () => (await visibleInBulk()) === '0', 10_000, { what: 'C received, waiting for its unit slot' });
      await sleep(1_000);
      expect(quietDone.has('t-c1#1')).toBe(false);
      expect((await h.run(c))!.status).toBe('queued');
      await locks`COMMIT`;
      for (const runId of [...a, ...b, c]) {
        expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
        expect((await h.run(runId))!.attempts).toBe(1);
        expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
      }
      // A and B each committed as one group.
      expect(await committedTogether(a)).toBe(true);
      expect(await committedTogether(b)).toBe(true);
    } finally {
      for (const release of holds.values()) release();
      await locks`ROLLBACK`.catch(() => {});
      locks.release();
      await runtime.stop();
    }
  });

  it('R-UNT-03 R-UNT-09 a slot of a group-commit unit runs a whole group: with concurrency 1, a receive of three commits as one group, the next runs are received and wait, and never two handlers run at once', async () => {
    await h.fenceAbandonedPolls('bulk');
    onePeak = 0;
    const dispatch = async (key: string, hold: boolean) => (await h.dispatch('fixture.group_one', { key, hold }, tenantActor())).runId;
    const a = [await dispatch('one-a1', true), await dispatch('one-a2', false), await dispatch('one-a3', false)];
    await h.relay();
    const runtime = await h.startWorkers({ queues: ['bulk'] });
    try {
      await waitFor(() => holds.has('one-a1'), 10_000, { what: 'group A running' });
      const b = [await dispatch('one-b1', false), await dispatch('one-b2', false)];
      await h.relay();
      // B is received while A holds the unit's one slot, and waits for it: checked, not registered.
      await waitFor(async () => (await visibleInBulk()) === '0', 10_000, { what: 'B received, waiting for the slot' });
      await sleep(500);
      expect(quietDone.has('one-b1#1')).toBe(false);
      expect((await Promise.all(b.map((id) => h.run(id)))).map((r) => r!.status)).toEqual(['queued', 'queued']);
      holds.get('one-a1')!();
      for (const runId of [...a, ...b]) {
        expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
        expect((await h.run(runId))!.attempts).toBe(1);
        expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
      }
      // A's three runs shared one transaction (one slot held three messages), and so did B's two.
      expect(await committedTogether(a)).toBe(true);
      expect(await committedTogether(b)).toBe(true);
      expect(onePeak).toBe(1);
    } finally {
      for (const release of holds.values()) release();
      await runtime.stop();
    }
  });

  it('R-UNT-03 R-UNT-09 a group waiting for its slot takes members of later receives, up to 40: of 45 runs dispatched while the slot is busy, 39 or 40 commit as one group, which svc_group_commit_runs counts in a bucket of its own', async () => {
    await h.fenceAbandonedPolls('bulk');
    const dispatch = async (key: string, hold: boolean) => (await h.dispatch('fixture.group_one', { key, hold }, tenantActor())).runId;
    onePeak = 0;
    const bucketsBefore = await groupBuckets('fixture.group_one');
    const a = await dispatch('two-a', true);
    await h.relay();
    const runtime = await h.startWorkers({ queues: ['bulk'] });
    try {
      await waitFor(() => holds.has('two-a'), 10_000, { what: 'A running in the slot' });
      const b: string[] = [];
      for (let i = 0; i < 45; i++) b.push(await dispatch(`two-b${i}`, false));
      await h.relay();
      // A receive brings at most 10 messages: B arrives in four or more while A holds the one slot.
      await waitFor(async () => Number(await visibleInBulk()) <= 6, 10_000, { what: 'B received, waiting for the slot' });
      await sleep(500);
      holds.get('two-a')!();
      for (const runId of [a, ...b]) {
        expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
        expect((await h.run(runId))!.attempts).toBe(1);
      }
      const byTx = new Map<string, number>();
      for (const runId of b) {
        const txids = new Set(await trailTx(runId));
        expect(txids.size).toBe(1);
        const [txid] = txids;
        byTx.set(txid!, (byTx.get(txid!) ?? 0) + 1);
      }
      // The slot holds 40 messages, A's among them: the group that waited for it took 39 runs of four or
      // more receives (40 if A's place came back before it started); the rest came after.
      const sizes = [...byTx.values()].sort((x, y) => y - x);
      expect(sizes[0]).toBeGreaterThanOrEqual(39);
      expect(sizes[0]).toBeLessThanOrEqual(40);
      // svc_group_commit_runs has a bucket for it: one more transaction of more than 35 runs, none of more than 40.
      const bucketsAfter = await groupBuckets('fixture.group_one');
      // (No bucket at all before this unit's first observation; a missing bound once there are some fails.)
      const above = (buckets: Map<string, number>, le: string) => (buckets.size === 0 ? 0 : buckets.get('+Inf')! - (buckets.get(le) ?? Number.NaN));
      expect(above(bucketsAfter, '35') - above(bucketsBefore, '35')).toBe(1);
      expect(above(bucketsAfter, '40') - above(bucketsBefore, '40')).toBe(0);
      expect(onePeak).toBe(1);
    } finally {
      for (const release of holds.values()) release();
      await runtime.stop();
    }
  });

  it('R-UNT-03 R-IDM-11 a delivery of a group-commit unit that cannot join a group (a replay of a finished run) waits for the unit slot too', async () => {
    await h.fenceAbandonedPolls('bulk');
    const d = await h.dispatch('fixture.group_one', { key: 'one-replay-d' }, tenantActor());
    await h.relay();
    const runtime = await h.startWorkers({ queues: ['bulk'] });
    try {
      expect((await h.waitForStatus(d.runId, ['succeeded', 'failed'])).status).toBe('succeeded');
      const a = (await h.dispatch('fixture.group_one', { key: 'one-replay-a', hold: true }, tenantActor())).runId;
      await h.relay();
      await waitFor(() => holds.has('one-replay-a'), 10_000, { what: 'A running in the slot' });
      // A duplicate of D: its gate holds D's result, so it replays alone, which opens transactions.
      await h.sendRaw('bulk', d.envelope);
      await waitFor(async () => (await visibleInBulk()) === '0', 10_000, { what: 'the duplicate received' });
      await sleep(500);
      const received = async () => events(await h.trail(d.runId)).filter((e) => e === 'received').length;
      expect(await received()).toBe(1);
      holds.get('one-replay-a')!();
      await waitFor(async () => (await received()) === 2, 10_000, { what: 'the duplicate handled once the slot freed' });
      expect((await h.waitForStatus(a, ['succeeded', 'failed'])).status).toBe('succeeded');
      expect((await h.trail(d.runId)).filter((t) => t.event === 'started')).toHaveLength(1);
    } finally {
      for (const release of holds.values()) release();
      await runtime.stop();
    }
  });

  it("R-UNT-09 a group's slot is free once its runs have settled, before their deletes' linger", async () => {
    // Two tenants' runs: two groups of one, one slot. The second runs as soon as the first has settled,
    // though the first's delete waits 3 s for others to share its call.
    await h.fenceAbandonedPolls('bulk');
    const other = await createTenant(h.sql);
    const x = (await h.dispatch('fixture.group_one', { key: 'one-linger-x' }, tenantActor())).runId;
    const y = (await h.dispatch('fixture.group_one', { key: 'one-linger-y' }, { kind: 'system' as const, tenantId: other, label: 'test' })).runId;
    await h.relay();
    const runtime = await h.startWorkers({ queues: ['bulk'], ackLingerMs: 3_000 });
    try {
      for (const runId of [x, y]) expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
      // The last of the event: on a loaded machine an attempt can roll back (a stage deadline) and run
      // again, and its rolled-back `started` stays in the trail before the one that succeeded.
      const at = async (runId: string, event: string) =>
        (await h.sql<{ ms: number }[]>`SELECT (extract(epoch FROM occurred_at) * 1000)::float8 AS ms FROM task_run_events
                                        WHERE run_id = ${runId} AND event = ${event} ORDER BY occurred_at DESC, id DESC LIMIT 1`)[0]!.ms;
      const [first, second] = (await at(x, 'succeeded')) < (await at(y, 'succeeded')) ? [x, y] : [y, x];
      // One slot: the second ran after the first's handler (its slot is given back for the first's
      // commit tail, so it may start before that commit), and long before the first's delete's 3 s linger.
      const trails = JSON.stringify(await h.sql`SELECT run_id, event, attempt, occurred_at FROM task_run_events WHERE run_id IN (${first}, ${second}) ORDER BY occurred_at, id`);
      expect(await at(second, 'started'), trails).toBeGreaterThan(await at(first, 'started'));
      const gapMs = (await at(second, 'started')) - (await at(first, 'succeeded'));
      expect(gapMs).toBeLessThan(1_500);
    } finally {
      await runtime.stop();
    }
  });

  it("R-UNT-09 a tenant's groups take at most its tenantConcurrency of the unit's slots; another tenant runs in the others", async () => {
    await h.fenceAbandonedPolls('bulk');
    const other = await createTenant(h.sql);
    const a = (await h.dispatch('fixture.group_fair', { key: 'fair-a', hold: true }, tenantActor())).runId;
    await h.relay();
    const runtime = await h.startWorkers({ queues: ['bulk'] });
    try {
      await waitFor(() => holds.has('fair-a'), 10_000, { what: "the tenant's first group running" });
      const b = (await h.dispatch('fixture.group_fair', { key: 'fair-b' }, tenantActor())).runId;
      const c = (await h.dispatch('fixture.group_fair', { key: 'fair-c' }, { kind: 'system' as const, tenantId: other, label: 'test' })).runId;
      await h.relay();
      // The other tenant's run takes the unit's second slot; the first tenant's second group waits for its share.
      expect((await h.waitForStatus(c, ['succeeded', 'failed'])).status).toBe('succeeded');
      await sleep(500);
      expect(quietDone.has('fair-b#1')).toBe(false);
      expect((await h.run(b))!.status).toBe('queued');
      holds.get('fair-a')!();
      for (const runId of [a, b]) expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
      expect((await h.run(b))!.attempts).toBe(1);
    } finally {
      for (const release of holds.values()) release();
      await runtime.stop();
    }
  });

  it('R-WRK-09 a group waiting for its unit slot goes back to the queue as soon as the worker stops, untouched, its receive not spent, and runs once later', async () => {
    await h.fenceAbandonedPolls('bulk');
    // The worker's SQS calls, to see how B goes back: as a copy carrying its earlier receives (none).
    const sentBack: Array<string | undefined> = [];
    const recording = {
      send(command: Parameters<SQSClient['send']>[0], options?: Parameters<SQSClient['send']>[1]) {
        if (command instanceof SendMessageCommand) sentBack.push(command.input.MessageAttributes?.[RECEIVES_BEFORE_ATTRIBUTE]?.StringValue);
        if (command instanceof ChangeMessageVisibilityCommand && command.input.VisibilityTimeout === 0) sentBack.push('visibility 0');
        return h.sqs.send(command, options);
      },
    } as unknown as SQSClient;
    const dispatch = async (key: string, hold: boolean) => (await h.dispatch('fixture.group_one', { key, hold }, tenantActor())).runId;
    const a = await dispatch('one-stop-a', true);
    await h.relay();
    const runtime = await h.startWorkers({ queues: ['bulk'], drainMs: 20_000, sqs: recording });
    let stopped: Promise<void> | undefined;
    try {
      await waitFor(() => holds.has('one-stop-a'), 10_000, { what: 'A running in the slot' });
      const b = [await dispatch('one-stop-b1', false), await dispatch('one-stop-b2', false)];
      await h.relay();
      await waitFor(async () => (await visibleInBulk()) === '0', 10_000, { what: 'B received, waiting for the slot' });
      // The drain waits for A (its handler holds) but gives B back at once, long before its window ends.
      // (Its visibility is not what is watched: fauxqs may hand a message sent back to the long poll the
      // stop aborted, and then counts it in flight until a later receive.)
      const released = await releasedDeliveries('fixture.group_one');
      stopped = runtime.stop();
      await waitFor(async () => (await releasedDeliveries('fixture.group_one')) === released + 2, 10_000, { what: 'B given back while A still runs' });
      expect(sentBack).toEqual(['0', '0']);
      expect(holds.has('one-stop-a') && !quietDone.has('one-stop-a#1')).toBe(true);
      for (const runId of b) {
        expect((await h.run(runId))!.status).toBe('queued');
        // Untouched: not even received in the trail.
        expect(events(await h.trail(runId))).not.toContain('received');
      }
      holds.get('one-stop-a')!();
      await stopped;
      expect((await h.run(a))!.status).toBe('succeeded');
      const next = await h.startWorkers({ queues: ['bulk'] });
      try {
        for (const runId of b) {
          expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
          expect((await h.run(runId))!.attempts).toBe(1);
          expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
        }
      } finally {
        await next.stop();
      }
    } finally {
      for (const release of holds.values()) release();
      await (stopped ?? runtime.stop());
    }
  });

  it('R-UNT-09 R-WRK-04 a group whose COMMIT fails after it gave its slot back runs its members again alone in a slot of the unit taken again: a later group waits for it', async () => {
    // A's COMMIT fails (a deferred check) while group B runs in the slot A gave back; A's members then
    // run again alone, in the unit's slot once B has given it back for its own tail. A's first run is
    // held on its ledger row there (the test inserts that key in a transaction of its own once A's
    // claim rolled back; alone, a1's finish inserts the key), and B's finish on a row lock: C must
    // wait, the slot being A's.
    await h.fenceAbandonedPolls('bulk');
    const unit = 'fixture.group_tail_effect';
    const dispatch = async (p: z.input<typeof payload>) => (await h.dispatch(unit, p, tenantActor())).runId;
    const a = [await dispatch({ key: 'commitfail-tail-a1' }), await dispatch({ key: 'tail-a2', sleepMs: 1_500, firstAttemptOnly: true })];
    await h.relay();
    const runtime = await h.startWorkers({ queues: ['bulk'] });
    const ledger = await h.sql.reserve();
    const rows = await h.sql.reserve();
    try {
      // A's claim of a1's key is in: the test's insert of that key waits for A's transaction, then holds the key.
      await waitFor(() => handlerTx.has('tail-a2#1'), 10_000, { what: 'group A in its last handler' });
      await ledger`BEGIN`;
      const held = ledger`INSERT INTO idempotency_keys (tenant_id, idempotency_key, request_fingerprint, expires_at)
                          VALUES (${tenantId}, ${idempotencyKeyOf(unit, a[0]!)}, ${Buffer.alloc(32)}, now() + interval '1 hour')`.execute();
      held.catch(() => {});
      // B's handlers send no statement, so nothing of B waits on the lock below before its finish.
      const b = [await dispatch({ key: 'quiet-tail-b1', sleepMs: 1_500 }), await dispatch({ key: 'quiet-tail-b2' })];
      await h.relay();
      await waitFor(() => tailStarted.has('quiet-tail-b1#1'), 15_000, { what: 'group B running in the slot A gave back' });
      // Registered on its own once its handler has run for RUNNING_VISIBLE_AFTER_MS, before the lock below.
      await h.waitForStatus(b[0]!, ['running']);
      await rows`BEGIN`;
      await rows`SELECT 1 FROM task_runs WHERE run_id = ${b[0]!} FOR UPDATE`;
      const c = await dispatch({ key: 'quiet-tail-c1' });
      await h.relay();
      await waitFor(async () => (await lockWaiters('%INSERT INTO idempotency_keys%')) === 1, 15_000, { what: "A's first run alone, held on its ledger row" });
      // The group's finish (its members' `leave_claim`), not a1's, whose finish inserts the key held above.
      await waitFor(async () => (await lockWaiters('%leave_claim%UPDATE task_runs%succeeded%')) === 1, 15_000, { what: "B's finish held on the row lock" });
      expect(await effectsOf('commitfail-tail-a1')).toEqual([]);
      // C is received and waits for its unit's slot, which would take it at once. Nothing would
      // announce C running: give it the time a run takes here, many times over.
      await waitFor(async () => (await visibleInBulk()) === '0', 10_000, { what: 'C received, waiting for its unit slot' });
      await sleep(1_000);
      expect(tailStarted.has('quiet-tail-c1#1')).toBe(false);
      expect((await h.run(c))!.status).toBe('queued');
      await ledger`ROLLBACK`;
      await rows`COMMIT`;
      for (const runId of [...a, ...b, c]) expect((await h.waitForStatus(runId, ['succeeded', 'failed'], 30_000)).status).toBe('succeeded');
      // A's refused transaction left no effect. Alone, a1 (the culprit) was refused again and its retry
      // committed; a2 committed under its first attempt.
      expect(((await Promise.all(a.map((id) => h.run(id)))) as Array<{ attempts: number }>).map((r) => r.attempts)).toEqual([2, 1]);
      expect((await effectsOf('commitfail-tail-a1')).map((e) => e.attempt)).toEqual([2]);
      expect((await effectsOf('tail-a2')).map((e) => e.attempt)).toEqual([1]);
      expect(events(await h.trail(a[0]!)).filter((e) => e !== 'sent')).toEqual(['queued', 'received', 'started', 'retry_scheduled', 'received', 'started', 'succeeded']);
      expect(events(await h.trail(a[1]!)).filter((e) => e !== 'sent')).toEqual(['queued', 'received', 'started', 'succeeded']);
      for (const runId of a) expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
      for (const runId of [...b, c]) {
        expect((await h.run(runId))!.attempts).toBe(1);
        expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
      }
      // B committed as one group.
      expect(await committedTogether(b)).toBe(true);
    } finally {
      await ledger`ROLLBACK`.catch(() => {});
      await rows`ROLLBACK`.catch(() => {});
      ledger.release();
      rows.release();
      await runtime.stop();
    }
  });

  it('R-UNT-09 R-IDM-09 a cancel that lands after the handler of a member that sent no statement leaves it out of the finish: no succeeded, its claim taken back, its neighbours commit', async () => {
    // g-qc-done finishes its handler first; g-qc-hold keeps the group open while the operator cancels g-qc-done.
    const keys = ['g-qc-done', 'g-qc-hold', 'g-qc-ok'];
    const { runIds, runtime } = await receivedTogether(
      keys.map((key) => ({ key, ...(key === 'g-qc-hold' ? { hold: true } : {}) })),
      { quiet: true },
    );
    await waitFor(() => holds.has('g-qc-hold'), 10_000, { what: 'the holding member’s handler started' });
    expect(quietDone.has('g-qc-done#1')).toBe(true); // it ran before the holder, in the same group
    // Its handler returned at once, so its registration waits for the group's finish: still `queued`.
    expect(await cancelRunNow(h.sql, { runId: runIds[0]!, by: 'alice', reason: 'wrong customer' })).toMatchObject({ result: 'cancelled', previousStatus: 'queued' });
    holds.get('g-qc-hold')!();
    const statuses = await Promise.all(runIds.map(async (id) => (await h.waitForStatus(id, ['succeeded', 'failed'])).status));
    expect(statuses).toEqual(['failed', 'succeeded', 'succeeded']);
    await waitFor(() => /the run left running under this delivery/.test(h.logs()), 10_000, { what: 'the cancelled member settled' });
    await runtime.stop();
    // The cancel stands: no succeeded row, no second attempt, and its fresh claim is gone from the ledger.
    expect(await h.run(runIds[0]!)).toMatchObject({ status: 'failed', attempts: 1, outcome: { error: { code: 'CANCELLED' } } });
    // Its attempt is still on the trail, at its instants (written after the cancel, read in causal
    // order): received, and started with its effect rolled back, before the cancel's failed.
    const causal = await causalProblems(h.sql, runIds[0]!);
    expect(causal.problems).toEqual([]);
    expect(causal.events.filter((e) => !e.startsWith('sent'))).toEqual(['queued(0)', 'received(1)', 'started(1)', 'failed(0)']);
    expect((await h.trail(runIds[0]!)).find((e) => e.event === 'started')).toMatchObject({ attempt: 1, detail: { effect: 'rolled_back' } });
    const ledger = await h.sql`SELECT status FROM idempotency_keys WHERE tenant_id = ${tenantId} AND idempotency_key = ${idempotencyKeyOf('fixture.group_quiet', runIds[0]!)}`;
    expect(ledger).toEqual([]);
    // The neighbours were not rolled back with it: one attempt each, both in one transaction.
    const [hold, ok] = [await trailTx(runIds[1]!), await trailTx(runIds[2]!)];
    expect(hold).toHaveLength(2);
    expect(new Set([...hold, ...ok]).size).toBe(1);
    for (const runId of runIds.slice(1)) {
      expect((await h.run(runId))!.attempts).toBe(1);
      expect((await causalProblems(h.sql, runId)).problems).toEqual([]);
    }
  });
});
