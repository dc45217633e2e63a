// Redrive on real services (PostgreSQL 18, Redis, the SQS-protocol server, in-process workers and the
// `svc` CLI as a child process): a permanently failing unit dead-letters, the operator fixes it and
// redrives the dead-letter queue, every message yields one new run that succeeds, and nothing is
// redriven twice.
import { ReceiveMessageCommand, DeleteMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import { dlqUrl, queueUrl } from '../../src/queue/names.ts';
import { createDispatcher } from '../../src/work/runtime/produce/dispatch.ts';
import { listDeadLetters, redriveDeadLetters } from '../../src/work/operate/dead-letter-queue.ts';
import { cancelRunNow } from '../../src/work/operate/cancel-run.ts';
import { OperateError } from '../../src/work/operate/operate-error.ts';
import { redriveRunNow, redriveRuns, unitKeySource } from '../../src/work/operate/redrive-run.ts';
import { showRun } from '../../src/work/operate/show-run.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { createTenant } from './work-tables-support.ts';
import { fault, jsonLines, OPERATE_UNITS, svc, svcAll } from './operate-support.ts';

// The `svc` CLI runs as real processes (a Node start each): on a loaded machine a test takes minutes.
vi.setConfig({ testTimeout: 240_000 });

let h: WorkHarness;
const dlq = () => ({ sqs: h.sqs, dlqUrl: dlqUrl(h.queueUrlPrefix, 'default') });

beforeAll(async () => {
  h = await workHarness({ units: OPERATE_UNITS });
  await h.startWorkers({ relay: { sweepIntervalMs: 200 } });
});
afterAll(async () => h?.close());

async function redriveRunsOf(failedRunId: string): Promise<Array<Record<string, unknown>>> {
  return h.sql`SELECT run_id::text, trigger, actor_kind, actor_label, correlation_id::text, causation_id::text, status
                 FROM platform_task_runs WHERE causation_id = ${failedRunId} AND trigger = 'redrive'`;
}

/**
 * What a redrive writes: runs, outbox rows, `redriven` events, reopened ledger rows. Not every trail
 * event: on a loaded machine a late duplicate delivery of an earlier run may add a `received`.
 */
async function rowCounts(): Promise<Record<string, number>> {
  const [r] = await h.sql<Record<string, number>[]>`SELECT
    (SELECT count(*)::int FROM platform_task_runs) + (SELECT count(*)::int FROM task_runs) AS runs,
    (SELECT count(*)::int FROM platform_task_run_events WHERE event = 'redriven') + (SELECT count(*)::int FROM task_run_events WHERE event = 'redriven') AS redriven,
    (SELECT count(*)::int FROM platform_outbox_messages) + (SELECT count(*)::int FROM outbox_messages) AS outbox,
    (SELECT count(*)::int FROM platform_idempotency_keys WHERE status = 'failed_retryable') AS reopened`;
  return r!;
}

describe('dead-letter redrive', () => {
  it('a permanently failing unit dead-letters; after the fix `svc dlq redrive` makes one new run per message that succeeds, the old trail ends with redriven, the DLQ is empty and a second redrive creates nothing', async () => {
    fault.broken = true;
    const runs: string[] = [];
    for (const key of ['dlq-a', 'dlq-b']) runs.push((await h.dispatch('fixture.broken_until_fixed', { key })).runId);
    for (const runId of runs) {
      const run = await h.waitForStatus(runId, ['failed']);
      // Why it failed, publicly, in the outcome.
      expect(run.outcome).toEqual({ error: { code: 'VALIDATION_FAILED', type: 'ValidationFailure', message: expect.stringContaining('the unit is broken for dlq-') } });
      await h.waitForEvent(runId, 'dead_lettered');
    }

    // svc dlq list: what is there, as JSON lines and as a table.
    const listed = await svc(h, ['dlq', 'list', '--queue', 'default', '--json']);
    expect(listed.stderr).toBe('');
    expect(listed.status).toBe(0);
    const letters = jsonLines(listed.stdout).filter((l) => runs.includes(l.runId as string));
    expect(letters).toHaveLength(2);
    for (const l of letters) {
      expect(l).toMatchObject({ unit: 'fixture.broken_until_fixed', errorCode: 'VALIDATION_FAILED', receiveCount: 1, runStatus: 'failed', sourceQueue: 'default' });
      expect(l.ageSeconds).toEqual(expect.any(Number));
    }
    const table = await svc(h, ['dlq', 'list', '--queue', 'default']);
    expect(table.stdout.split('\n')[0]).toMatch(/^UNIT\s+RUN\s+RUN STATUS\s+ERROR\s+RECEIVES\s+AGE\s+MESSAGE$/);
    for (const runId of runs) expect(table.stdout).toContain(runId);

    // A dry run writes nothing, leaves the queue as it was, and says exactly what it would do.
    const before = await rowCounts();
    const dry = await svc(h, ['dlq', 'redrive', '--queue', 'default', '--by', 'alice', '--dry-run', '--json']);
    expect(dry.status).toBe(0);
    expect(jsonLines(dry.stdout).filter((o) => runs.includes(o.runId as string)).map((o) => o.action)).toEqual(['would_redrive', 'would_redrive']);
    expect(await rowCounts()).toEqual(before);
    expect((await listDeadLetters(h.sql, dlq())).filter((l) => runs.includes(l.runId!))).toHaveLength(2);

    // The fix is deployed; the operator redrives.
    fault.broken = false;
    const redrive = await svc(h, ['dlq', 'redrive', '--queue', 'default', '--by', 'alice']);
    expect(redrive.stderr).toBe('');
    expect(redrive.status).toBe(0);
    expect(redrive.stdout).toMatch(/2 run\(s\) redriven, 0 message\(s\) of already redriven runs deleted, 0 left in place/);
    for (const runId of runs) {
      const children = await redriveRunsOf(runId);
      expect(children).toHaveLength(1);
      const [parent] = await h.sql`SELECT correlation_id::text FROM platform_task_runs WHERE run_id = ${runId}`;
      expect(children[0]).toMatchObject({ trigger: 'redrive', actor_kind: 'system', actor_label: 'redrive:alice', causation_id: runId, correlation_id: parent!.correlation_id });
      const done = await h.waitForStatus(children[0]!.run_id as string, ['succeeded', 'failed']);
      expect(done.status).toBe('succeeded');
      // The failed run stays failed; its trail ends with `redriven` naming the new run.
      expect((await h.run(runId))!.status).toBe('failed');
      const trail = await h.trail(runId);
      expect(events(trail).at(-1)).toBe('redriven');
      expect(trail.at(-1)!.detail).toEqual({ redrive_run_id: children[0]!.run_id, by: 'alice' });
    }
    // Each key: the failed attempt rolled back, the redriven one committed once.
    expect(await h.effects('dlq-a')).toBe(1);
    expect(await h.effects('dlq-b')).toBe(1);
    expect((await listDeadLetters(h.sql, dlq())).filter((l) => runs.includes(l.runId!))).toEqual([]);

    // A second redrive finds nothing to do and creates nothing.
    const runsBefore = (await rowCounts()).runs;
    const again = await redriveDeadLetters(h.sql, dlq(), { by: 'alice' });
    expect(again.outcomes.filter((o) => runs.includes(o.letter.runId!))).toEqual([]);
    expect((await rowCounts()).runs).toBe(runsBefore);
  });

  it('two dead-letter messages of one run (the runner\'s copy and SQS\'s own move) yield one redrive run; both messages are deleted', async () => {
    fault.broken = true;
    const { runId, envelope } = await h.dispatch('fixture.broken_until_fixed', { key: 'dlq-twice' });
    await h.waitForEvent(runId, 'dead_lettered');
    // SQS's own redrive moves the original body without the runner's attributes.
    await h.sqs.send(new SendMessageCommand({ QueueUrl: dlqUrl(h.queueUrlPrefix, 'default'), MessageBody: JSON.stringify(envelope) }));
    fault.broken = false;
    const report = await redriveDeadLetters(h.sql, dlq(), { by: 'bob' });
    const mine = report.outcomes.filter((o) => o.letter.runId === runId);
    expect(mine.map((o) => o.action).sort()).toEqual(['already_redriven', 'redriven']);
    expect(new Set(mine.map((o) => o.newRunId)).size).toBe(1);
    expect(await redriveRunsOf(runId)).toHaveLength(1);
    expect((await listDeadLetters(h.sql, dlq())).filter((l) => l.runId === runId)).toEqual([]);
    expect((await h.waitForStatus(mine[0]!.newRunId!, ['succeeded', 'failed'])).status).toBe('succeeded');
  });

  it('a dead-letter message whose run does not exist or is not final is reported and left in place', async () => {
    const ghost = randomUUID();
    const { runId: queuedId, envelope } = await h.dispatch('fixture.effect', { key: 'succeeds' });
    await h.waitForStatus(queuedId, ['succeeded']);
    await h.sqs.send(new SendMessageCommand({ QueueUrl: dlqUrl(h.queueUrlPrefix, 'default'), MessageBody: JSON.stringify({ ...envelope, run_id: ghost }) }));
    await h.sqs.send(new SendMessageCommand({ QueueUrl: dlqUrl(h.queueUrlPrefix, 'default'), MessageBody: JSON.stringify(envelope) }));
    const report = await redriveDeadLetters(h.sql, dlq(), { by: 'carol' });
    expect(report.outcomes.find((o) => o.letter.runId === ghost)).toMatchObject({ action: 'left', reason: `run ${ghost} does not exist` });
    expect(report.outcomes.find((o) => o.letter.runId === queuedId)).toMatchObject({ action: 'left', reason: `run ${queuedId} is succeeded: only failed runs are redriven` });
    const left = (await listDeadLetters(h.sql, dlq())).map((l) => l.runId);
    expect(left).toEqual(expect.arrayContaining([ghost, queuedId]));
    // Clean the queue for the next tests.
    for (;;) {
      const out = await h.sqs.send(new ReceiveMessageCommand({ QueueUrl: dlqUrl(h.queueUrlPrefix, 'default'), MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
      if (!out.Messages?.length) break;
      for (const m of out.Messages) await h.sqs.send(new DeleteMessageCommand({ QueueUrl: dlqUrl(h.queueUrlPrefix, 'default'), ReceiptHandle: m.ReceiptHandle! }));
    }
  });

  it('a message moved back from the dead-letter queue by SQS meets the final run: acknowledged without running, a warning names svc dlq redrive, a trail note on the run', async () => {
    fault.broken = true;
    const { runId, envelope } = await h.dispatch('fixture.broken_until_fixed', { key: 'native-back' });
    await h.waitForEvent(runId, 'dead_lettered');
    fault.broken = false;
    // What SQS's own DLQ redrive does: the message goes back to its source queue.
    await h.sqs.send(new SendMessageCommand({ QueueUrl: queueUrl(h.queueUrlPrefix, 'default'), MessageBody: JSON.stringify(envelope) }));
    const trail = await h.waitForReceives(runId, 2);
    const note = trail.filter((t) => t.event === 'received').at(-1)!;
    expect(note.detail).toMatchObject({ settled: 'failed', note: expect.stringContaining('svc dlq redrive') });
    // The warning is logged by the settlement, right after the registration committed the note.
    const deadline = Date.now() + 10_000;
    while (!h.logs().includes('svc dlq redrive') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    expect(h.logs()).toContain('svc dlq redrive');
    expect((await h.run(runId))!.status).toBe('failed');
    expect(await h.effects('native-back')).toBe(0);
    // Not dead-lettered a second time.
    expect(events(await h.trail(runId)).filter((e) => e === 'dead_lettered')).toHaveLength(1);
  });
});

describe('svc runs redrive', () => {
  it('redrives one failed run (tenant) with the same tenant, payload and correlation; a second call reports the first; a failing redrive run can itself be redriven', async () => {
    const tenantId = await createTenant(h.sql);
    const dispatcher = createDispatcher({ resolve: (n) => OPERATE_UNITS.get(n), instance: 'test' });
    fault.broken = true;
    const actor = { kind: 'system' as const, tenantId, label: 'test' };
    const first = await inUnitOfWork(h.sql, actor, (tx) => dispatcher.dispatchTask(tx, 'fixture.tenant_broken_until_fixed', { key: 'tenant-chain' }, { actor }));
    await h.waitForStatus(first.runId, ['failed']);

    const cli = await svc(h, ['runs', 'redrive', first.runId, '--by', 'dave', '--json']);
    expect(cli.stderr).toBe('');
    const result = JSON.parse(cli.stdout) as { result: string; newRunId: string; tenant: string };
    expect(result.result).toBe('redriven');
    const [uid] = await h.sql`SELECT uid FROM tenants WHERE id = ${tenantId}`;
    expect(result.tenant).toBe(uid!.uid);
    const [second] = await h.sql`SELECT tenant_id::text, trigger, causation_id::text, correlation_id::text FROM task_runs WHERE run_id = ${result.newRunId}`;
    expect(second).toEqual({ tenant_id: tenantId, trigger: 'redrive', causation_id: first.runId, correlation_id: first.envelope.correlation_id });
    const [outbox] = await h.sql`SELECT envelope FROM outbox_messages WHERE run_id = ${result.newRunId}`;
    expect((outbox!.envelope as { payload: unknown }).payload).toEqual({ key: 'tenant-chain' });

    // Again: the first redrive is reported, nothing new is written.
    const again = await redriveRunNow(h.sql, { runId: first.runId, by: 'erin' });
    expect(again).toMatchObject({ result: 'already_redriven', newRunId: result.newRunId });

    // The redrive run fails too (still broken): it can be redriven in turn.
    await h.waitForStatus(result.newRunId, ['failed']);
    fault.broken = false;
    const third = await redriveRunNow(h.sql, { runId: result.newRunId, by: 'dave' });
    expect(third.result).toBe('redriven');
    expect((await h.waitForStatus(third.newRunId, ['succeeded', 'failed'])).status).toBe('succeeded');
    const shown = await showRun(h.sql, result.newRunId);
    expect(shown).toMatchObject({ redriveOf: first.runId, redrivenAs: third.newRunId, tenant: uid!.uid });
  });

  it('a unit with a business idempotency key: the redrive reopens its permanently failed ledger row, so the new run executes', async () => {
    fault.broken = true;
    const { runId } = await h.dispatch('fixture.broken_business_key', { key: 'order-7' });
    await h.waitForStatus(runId, ['failed']);
    fault.broken = false;
    // Without the key source the same key meets its failed_permanent ledger row.
    const blind = await redriveRunNow(h.sql, { runId, by: 'frank' });
    expect((await h.waitForStatus(blind.newRunId, ['succeeded', 'failed'])).outcome).toMatchObject({ error: { code: 'IDEMPOTENCY_FAILED_PERMANENTLY' } });
    const second = await redriveRunNow(h.sql, { runId: blind.newRunId, by: 'frank', keySource: unitKeySource(OPERATE_UNITS) });
    expect((await h.waitForStatus(second.newRunId, ['succeeded', 'failed'])).status).toBe('succeeded');
    expect((await h.trail(blind.newRunId)).find((t) => t.event === 'redriven')!.detail).toEqual({ redrive_run_id: second.newRunId, by: 'frank', ledger_reopened: true });
    expect(await h.effects('order-7')).toBe(1);
  });

  it('refuses, writing nothing: a run that is not failed, an unknown run, a malformed id, a missing --by; --dry-run writes nothing', async () => {
    const { runId: ok } = await h.dispatch('fixture.effect', { key: 'redrive-refused' });
    await h.waitForStatus(ok, ['succeeded']);
    const before = await rowCounts();
    const cases: Array<[string[], RegExp]> = [
      [['runs', 'redrive', ok, '--by', 'x'], /^svc: RUN_NOT_FAILED: run .* is succeeded: only failed runs are redriven\n$/],
      [['runs', 'redrive', randomUUID(), '--by', 'x'], /^svc: RUN_NOT_FOUND: no run has id /],
      [['runs', 'redrive', 'not-a-uuid', '--by', 'x'], /^svc: RUN_ID_INVALID: 'not-a-uuid' is not a run id/],
      [['runs', 'redrive', ok], /^svc: RUN_FILTER_INVALID: --by <label> is required/],
      [['runs', 'redrive', '--status', 'succeeded', '--unit', 'fixture.effect', '--since', '1h', '--by', 'x'], /^svc: RUN_NOT_FAILED: only failed runs are redriven/],
      [['runs', 'redrive', '--status', 'failed', '--unit', 'fixture.effect', '--since', 'yesterday', '--by', 'x'], /^svc: RUN_FILTER_INVALID: --since must be an ISO instant/],
    ];
    const results = await svcAll(h, cases.map(([args]) => args));
    results.forEach((r, i) => {
      expect(r.status, cases[i]![0].join(' ')).toBe(1);
      expect(r.stderr).toMatch(cases[i]![1]);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stdout).toBe('');
    });
    await expect(redriveRunNow(h.sql, { runId: ok, by: '' })).rejects.toThrow(OperateError);
    expect(await rowCounts()).toEqual(before);

    fault.broken = true;
    const { runId: failed } = await h.dispatch('fixture.broken_until_fixed', { key: 'dry-single' });
    await h.waitForEvent(failed, 'dead_lettered');
    const mid = await rowCounts();
    const dry = await svc(h, ['runs', 'redrive', failed, '--by', 'x', '--dry-run']);
    expect(dry.stdout.trim()).toBe(`dry run: would redrive run ${failed} (fixture.broken_until_fixed) as a new run on default; nothing written`);
    expect(await rowCounts()).toEqual(mid);
    expect(before.runs!).toBeLessThan(mid.runs!);
  });

  it('bulk redrive refuses more than 1,000 matching runs without --max; --max limits it; --dry-run lists what it would do and writes nothing', async () => {
    // 1,001 failed runs of one unit (as an old incident leaves them; no outbox rows any more).
    await h.sql`INSERT INTO platform_task_runs (run_id, name, queue, trigger, actor_kind, actor_label, correlation_id, causation_id, status, attempts, started_at, finished_at)
      SELECT gen_random_uuid(), 'fixture.bulk_incident', 'bulk', 'dispatch', 'system', 'test', c, c, 'failed', 1, clock_timestamp(), clock_timestamp()
        FROM (SELECT gen_random_uuid() AS c FROM generate_series(1, 1001)) g`;
    const before = await rowCounts();
    const refused = await svc(h, ['runs', 'redrive', '--status', 'failed', '--unit', 'fixture.bulk_incident', '--since', '1h', '--by', 'ops']);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/^svc: BULK_LIMIT_EXCEEDED: more than 1000 failed runs match: narrow the filters or pass --max <n>/);
    const dry = await svc(h, ['runs', 'redrive', '--status', 'failed', '--unit', 'fixture.bulk_incident', '--since', '1h', '--by', 'ops', '--max', '3', '--dry-run', '--json']);
    expect(dry.status).toBe(0);
    const planned = jsonLines(dry.stdout);
    expect(planned).toHaveLength(3);
    expect(planned.every((p) => p.result === 'would_redrive' && p.unit === 'fixture.bulk_incident')).toBe(true);
    expect(await rowCounts()).toEqual(before);
    // Their payload is gone (no outbox row): each is refused on its own, nothing is written.
    const outcome = await redriveRuns(h.sql, { filters: { unit: 'fixture.bulk_incident' }, by: 'ops', max: 2 });
    expect(outcome.results.map((r) => r.result)).toEqual(['refused', 'refused']);
    expect(outcome.results[0]).toMatchObject({ code: 'RUN_PAYLOAD_GONE' });
    expect(await rowCounts()).toEqual(before);
  });
});

/** Deletes every message of the default dead-letter queue, so a test sees only its own. */
async function emptyDlq(): Promise<void> {
  for (;;) {
    const out = await h.sqs.send(new ReceiveMessageCommand({ QueueUrl: dlqUrl(h.queueUrlPrefix, 'default'), MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
    if (!out.Messages?.length) break;
    for (const m of out.Messages) await h.sqs.send(new DeleteMessageCommand({ QueueUrl: dlqUrl(h.queueUrlPrefix, 'default'), ReceiptHandle: m.ReceiptHandle! }));
  }
}

/** Any control character a terminal may act on (C0 but the newline, DEL, C1, line/paragraph separators, bidi overrides). */
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

describe('bulk tools do what the operator asked', () => {
  it('bulk redrive leaves runs an operator cancelled, unless asked for them by name (--include-cancelled or --error-code CANCELLED)', async () => {
    fault.broken = true;
    const unit = 'fixture.broken_until_fixed';
    const { runId: broken } = await h.dispatch(unit, { key: 'bulk-broken' });
    const actor = { kind: 'system' as const, label: 'test' };
    // Held back an hour so the cancel finds it queued.
    const { runId: cancelled } = await inUnitOfWork(h.sql, actor, (tx) =>
      createDispatcher({ resolve: (n) => OPERATE_UNITS.get(n), instance: 'test' }).dispatchTask(tx, unit, { key: 'bulk-cancelled' }, { actor, delaySeconds: 3600 }),
    );
    expect(await cancelRunNow(h.sql, { runId: cancelled, by: 'alice', reason: 'wrong customer' })).toMatchObject({ result: 'cancelled' });
    await h.waitForStatus(broken, ['failed']);

    const bulk = ['runs', 'redrive', '--status', 'failed', '--unit', unit, '--since', '1h', '--by', 'ops', '--dry-run', '--json'];
    const [plain, named] = await svcAll(h, [bulk, [...bulk, '--include-cancelled']]);
    expect(plain!.stderr).toBe('');
    const plainIds = jsonLines(plain!.stdout).map((p) => p.failedRunId);
    expect(plainIds).toContain(broken);
    expect(plainIds).not.toContain(cancelled);
    expect(named!.stderr).toBe('');
    expect(jsonLines(named!.stdout).map((p) => p.failedRunId)).toEqual(expect.arrayContaining([broken, cancelled]));

    const byCode = await redriveRuns(h.sql, { filters: { unit, errorCode: 'CANCELLED', since: { agoSeconds: 3600 } }, by: 'ops', dryRun: true });
    expect(byCode.selected.map((r) => r.runId)).toEqual([cancelled]);

    fault.broken = false;
    const done = await redriveRuns(h.sql, { filters: { unit, since: { agoSeconds: 3600 } }, by: 'ops' });
    expect(done.results.map((r) => r.failedRunId)).toContain(broken);
    expect(done.results.map((r) => r.failedRunId)).not.toContain(cancelled);
    expect(await redriveRunsOf(cancelled)).toEqual([]);
    const asked = await redriveRuns(h.sql, { filters: { unit, since: { agoSeconds: 3600 } }, by: 'ops', includeCancelled: true });
    expect(asked.results.map((r) => [r.failedRunId, r.result])).toEqual([[cancelled, 'redriven']]);
  });

  it('svc dlq redrive --max n redrives n runs, however many messages that do not match come first', async () => {
    await emptyDlq();
    const url = dlqUrl(h.queueUrlPrefix, 'default');
    for (let i = 0; i < 3; i++) {
      await h.sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: JSON.stringify({ note: `not a run ${i}` }), MessageAttributes: { error_code: { DataType: 'String', StringValue: 'OTHER_ERROR' } } }));
    }
    fault.broken = true;
    const runs: string[] = [];
    for (const key of ['max-a', 'max-b']) {
      const { runId } = await h.dispatch('fixture.broken_until_fixed', { key });
      await h.waitForEvent(runId, 'dead_lettered');
      runs.push(runId);
    }
    fault.broken = false;
    const dry = await redriveDeadLetters(h.sql, dlq(), { by: 'ops', errorCode: 'VALIDATION_FAILED', max: 1, dryRun: true });
    expect(dry.outcomes.map((o) => o.action)).toEqual(['would_redrive']);
    const report = await redriveDeadLetters(h.sql, dlq(), { by: 'ops', errorCode: 'VALIDATION_FAILED', max: 1 });
    expect(report.outcomes.map((o) => o.action)).toEqual(['redriven']);
    const left = await listDeadLetters(h.sql, dlq());
    expect(left.filter((l) => l.errorCode === 'OTHER_ERROR')).toHaveLength(3);
    expect(left.filter((l) => runs.includes(l.runId!))).toHaveLength(1);
    // The CLI the same way: the other run now.
    const cli = await svc(h, ['dlq', 'redrive', '--queue', 'default', '--error-code', 'VALIDATION_FAILED', '--max', '1', '--by', 'ops', '--json']);
    expect(cli.stderr).toBe('');
    expect(jsonLines(cli.stdout).map((o) => o.action)).toEqual(['redriven']);
    for (const runId of runs) expect(await redriveRunsOf(runId)).toHaveLength(1);
    await emptyDlq();
  });

  it('svc dlq list and svc runs show print control characters of message and run fields escaped, never raw', async () => {
    await emptyDlq();
    const evil = 'evil\u001b]0;pwned\u0007\u001b[2J\u009b31m\u2028\u202e';
    const { runId, envelope } = await h.dispatch('fixture.effect', { key: 'terminal-safe' });
    await h.waitForStatus(runId, ['succeeded']);
    await h.sqs.send(new SendMessageCommand({ QueueUrl: dlqUrl(h.queueUrlPrefix, 'default'), MessageBody: JSON.stringify({ ...envelope, run_id: randomUUID(), name: evil }) }));
    fault.broken = true;
    const { runId: failed } = await h.dispatch('fixture.broken_until_fixed', { key: 'ctl-\u009b2J\u2029\u001b]0;x\u0007' });
    await h.waitForStatus(failed, ['failed']);
    // One list after the other: a list hides what it reads until it releases it (SQS has no peek), so two
    // lists at once may each see part of the queue.
    const table = await svc(h, ['dlq', 'list', '--queue', 'default']);
    const json = await svc(h, ['dlq', 'list', '--queue', 'default', '--json']);
    const [shown, shownJson] = await svcAll(h, [
      ['runs', 'show', failed],
      ['runs', 'show', failed, '--json'],
    ]);
    for (const r of [table, json, shown, shownJson]) {
      expect(r!.status).toBe(0);
      expect(r!.stdout).not.toMatch(RAW_CONTROL);
    }
    expect(table.stdout).toContain('evil\\u001b]0;pwned\\u0007\\u001b[2J\\u009b31m\\u2028\\u202e');
    // JSON stays lossless: the escapes are JSON's own.
    expect(jsonLines(json.stdout).map((l) => l.unit)).toContain(evil);
    expect(shown!.stdout).toContain('ctl-\\u009b2J');
    expect(JSON.parse(shownJson!.stdout).run.outcome.error.message).toContain('ctl-\u009b2J\u2029\u001b]0;x\u0007');
    await emptyDlq();
  });
});
