// Cancel, `runs list` / `runs show`, and why a run failed, on real services (PostgreSQL 18, Redis,
// the SQS-protocol server, in-process workers, the API over a socket and the `svc` CLI as a process).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import { buildApp } from '../../src/http/app.ts';
import { createDispatcher } from '../../src/work/runtime/produce/dispatch.ts';
import { cancelRunNow } from '../../src/work/operate/cancel-run.ts';
import { listRuns } from '../../src/work/operate/list-runs.ts';
import type { WorkerRuntime } from '../../src/work/runtime/worker-runtime.ts';
import { FakeSessionResolver } from '../support/fake-session-resolver.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { createTenantMember } from './work-tables-support.ts';
import { fault, jsonLines, OPERATE_UNITS, svc, svcAll } from './operate-support.ts';

// The `svc` CLI runs as real processes (a Node start each): on a loaded machine a test takes minutes.
vi.setConfig({ testTimeout: 240_000 });

let h: WorkHarness;
let workers: WorkerRuntime;
/** Retries come back after 8 s here, so a run stays `retrying` long enough to be cancelled. */
const RETRY_SECONDS = 8;

beforeAll(async () => {
  h = await workHarness({ units: OPERATE_UNITS });
  workers = await h.startWorkers({ relay: { sweepIntervalMs: 200 }, backoff: { baseMs: RETRY_SECONDS * 1000, capMs: RETRY_SECONDS * 1000, jitter: 'none' } });
});
afterAll(async () => h?.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * What an operator command could write: runs, `failed` events (a cancel), failed runs. Not every trail
 * event: on a loaded machine a late duplicate delivery of an earlier test's run may add a `received`.
 */
async function counts(): Promise<Record<string, number>> {
  const [r] = await h.sql<Record<string, number>[]>`SELECT
    (SELECT count(*)::int FROM platform_task_runs) + (SELECT count(*)::int FROM task_runs) AS runs,
    (SELECT count(*)::int FROM platform_task_run_events WHERE event = 'failed') + (SELECT count(*)::int FROM task_run_events WHERE event = 'failed') AS failed_events,
    (SELECT count(*)::int FROM platform_task_runs WHERE status = 'failed') AS failed`;
  return r!;
}

describe('svc runs cancel', () => {
  it('a queued run ends failed with CANCELLED (who and why on the trail); its pending outbox row is withdrawn, so its message is never sent; a repeat is idempotent', async () => {
    // Dispatched but held back (delay) so the cancel finds it queued, its outbox row pending.
    const dispatchDelayed = (key: string) =>
      inUnitOfWork(h.sql, { kind: 'system', label: 'test' }, async (tx) =>
        createDispatcher({ resolve: (n) => OPERATE_UNITS.get(n), instance: 'test' }).dispatchTask(tx, 'fixture.effect', { key }, {
          actor: { kind: 'system', label: 'test' },
          delaySeconds: 2,
        }),
      );
    const { runId } = await dispatchDelayed('cancel-queued');
    expect(await cancelRunNow(h.sql, { runId, by: 'alice', reason: 'wrong customer' })).toMatchObject({ result: 'cancelled', previousStatus: 'queued' });
    const run = await h.run(runId);
    expect(run).toMatchObject({ status: 'failed', outcome: { error: { code: 'CANCELLED', type: 'RunCancelled', message: 'cancelled by alice: wrong customer' } } });
    expect(run!.finished_at).not.toBeNull();
    const failed = (await h.trail(runId)).find((t) => t.event === 'failed')!;
    expect(failed).toMatchObject({
      error_code: 'CANCELLED',
      error_type: 'RunCancelled',
      detail: { cancelled_by: 'alice', reason: 'wrong customer', previous_status: 'queued', outbox_withdrawn: true },
    });
    // Withdrawn in the cancel's transaction: no longer pending (sent_at set, purged like a sent row).
    const [row] = await h.sql`SELECT sent_at FROM platform_outbox_messages WHERE run_id = ${runId}`;
    expect(row!.sent_at).not.toBeNull();

    // A run dispatched after it with the same delay goes out and runs: the relay has passed the
    // cancelled run's due time, and never sent its message.
    const later = await dispatchDelayed('cancel-queued-later');
    await h.waitForStatus(later.runId, ['succeeded']);
    await waitIdle();
    expect(events(await h.trail(runId))).toEqual(['queued', 'failed']);
    expect(await h.effects('cancel-queued')).toBe(0);

    const again = await svc(h, ['runs', 'cancel', runId, '--by', 'bob', '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ result: 'already_cancelled', runId });
    expect(events(await h.trail(runId)).filter((e) => e === 'failed')).toHaveLength(1);
  });

  it('a retrying run ends failed with CANCELLED; its message comes back after the backoff and is acknowledged without another attempt', async () => {
    const { runId } = await h.dispatch('fixture.effect', { key: 'cancel-retrying', fail: 'transient' });
    await h.waitForStatus(runId, ['retrying']);
    // The function, not the CLI: a process start can outlast the backoff on a loaded machine.
    expect(await cancelRunNow(h.sql, { runId, by: 'carol' })).toMatchObject({ result: 'cancelled', previousStatus: 'retrying' });
    const trail = await h.waitForReceives(runId, 2, (RETRY_SECONDS + 10) * 1000);
    expect(trail.filter((t) => t.event === 'received').at(-1)!.detail).toEqual({ settled: 'failed', cancelled: true });
    expect(events(trail).filter((e) => e === 'started')).toHaveLength(1);
    expect((await h.run(runId))!.attempts).toBe(1);
    expect((await h.run(runId))!.outcome).toMatchObject({ error: { code: 'CANCELLED' } });
  });

  it('a running run is cancelled at once; the worker aborts run.signal within a heartbeat, the effect rolls back, no retry', async () => {
    const { runId } = await h.dispatch('fixture.slow', { key: 'cancel-running', sleepMs: 30_000 });
    await h.waitForStatus(runId, ['running']);
    const started = Date.now();
    const result = await cancelRunNow(h.sql, { runId, by: 'dave', reason: 'stuck' });
    // The cancel does not wait for the open effect transaction (the handler holds it 30 s).
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(result).toMatchObject({ result: 'cancelled', previousStatus: 'running' });
    // The handler sleeps 30 s unless aborted; the heartbeat here is 500 ms (the margin is for a loaded machine).
    await waitIdle(20_000);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(await h.effects('cancel-running')).toBe(0);
    const run = await h.run(runId);
    expect(run).toMatchObject({ status: 'failed', attempts: 1, outcome: { error: { code: 'CANCELLED' } } });
    const trail = events(await h.trail(runId));
    expect(trail).not.toContain('succeeded');
    expect(trail).not.toContain('retry_scheduled');
    expect(trail).not.toContain('dead_lettered');
    expect(h.logs()).toMatch(/the run left running under this delivery/);
    // The message was acknowledged: nothing comes back after the visibility timeout (2 s).
    await sleep(3_000);
    expect(events(await h.trail(runId)).filter((e) => e === 'received')).toHaveLength(1);
  });

  it('svc runs cancel prints what it did', async () => {
    // Held back an hour by its delay, so it is still queued whenever the process gets to it.
    const { runId } = await inUnitOfWork(h.sql, { kind: 'system', label: 'test' }, async (tx) =>
      createDispatcher({ resolve: (n) => OPERATE_UNITS.get(n), instance: 'test' }).dispatchTask(tx, 'fixture.effect', { key: 'cancel-cli' }, {
        actor: { kind: 'system', label: 'test' },
        delaySeconds: 3600,
      }),
    );
    const cli = await svc(h, ['runs', 'cancel', runId, '--by', 'carol', '--reason', 'not needed']);
    expect(cli.stderr).toBe('');
    expect(cli.status).toBe(0);
    expect(cli.stdout.trim()).toBe(`cancelled: run ${runId} (fixture.effect) was queued, now failed with CANCELLED`);
    expect((await h.run(runId))!.outcome).toEqual({ error: { code: 'CANCELLED', type: 'RunCancelled', message: 'cancelled by carol: not needed' } });
  });

  it('a finished run is refused with one clear line; bad input is refused without writing anything', async () => {
    const { runId } = await h.dispatch('fixture.effect', { key: 'cancel-done' });
    await h.waitForStatus(runId, ['succeeded']);
    const before = await counts();
    const cases: Array<[string[], RegExp]> = [
      [['runs', 'cancel', runId, '--by', 'x'], /^svc: RUN_ALREADY_FINAL: run .* is already succeeded: a finished run cannot be cancelled\n$/],
      [['runs', 'cancel', runId], /^svc: RUN_FILTER_INVALID: --by <label> is required/],
      [['runs', 'cancel', randomUUID(), '--by', 'x'], /^svc: RUN_NOT_FOUND: no run has id/],
      [['runs', 'cancel', '1234', '--by', 'x'], /^svc: RUN_ID_INVALID: '1234' is not a run id/],
      [['runs', 'show', 'zzz'], /^svc: RUN_ID_INVALID: 'zzz' is not a run id/],
      [['runs', 'show', randomUUID()], /^svc: RUN_NOT_FOUND: no run has id/],
      [['runs', 'list', '--status', 'done'], /^svc: RUN_FILTER_INVALID: --status takes one or more of queued, running, retrying, succeeded, failed, skipped/],
      [['runs', 'list', '--queue', 'fast'], /^svc: RUN_FILTER_INVALID: --queue must be one of critical, default, bulk, maintenance, got 'fast'/],
      [['runs', 'list', '--since', 'last week'], /^svc: RUN_FILTER_INVALID: --since must be an ISO instant with a zone/],
      [['runs', 'list', '--limit', '0'], /^svc: RUN_FILTER_INVALID: --limit must be a whole number from 1 to 1000/],
      [['runs', 'list', '--colour'], /^svc: RUN_FILTER_INVALID: Unknown option '--colour'/],
      [['dlq', 'list'], /^svc: RUN_FILTER_INVALID: --queue must be one of critical, default, bulk, maintenance\n$/],
      [['dlq', 'redrive', '--queue', 'default'], /^svc: RUN_FILTER_INVALID: --by <label> is required/],
    ];
    const results = await svcAll(h, cases.map(([args]) => args));
    results.forEach((r, i) => {
      const label = cases[i]![0].join(' ');
      expect(r.status, label).toBe(1);
      expect(r.stderr, label).toMatch(cases[i]![1]);
      expect(r.stderr.trim().split('\n'), label).toHaveLength(1);
      expect(r.stdout, label).toBe('');
    });
    expect(await counts()).toEqual(before);
  });
});

describe('why a run failed, runs list and runs show', () => {
  it('a failed run carries { error: { code, type, message } } in its outcome, through GET /task-runs/{runId} and runs show', async () => {
    const member = await createTenantMember(h.sql);
    const actor = { kind: 'system' as const, tenantId: member.tenantId, label: 'test' };
    fault.broken = true;
    const dispatched = await inUnitOfWork(h.sql, actor, (tx) =>
      createDispatcher({ resolve: (n) => OPERATE_UNITS.get(n), instance: 'test' }).dispatchTask(tx, 'fixture.tenant_broken_until_fixed', { key: 'why' }, { actor }),
    );
    await h.waitForStatus(dispatched.runId, ['failed']);
    const expected = { error: { code: 'VALIDATION_FAILED', type: 'ValidationFailure', message: 'the unit is broken for why' } };

    const [latest] = await h.sql<{ name: string }[]>`SELECT name FROM mikro_orm_migrations ORDER BY name DESC LIMIT 1`;
    const app = await buildApp({
      sql: h.sql,
      redis: h.redis!,
      resolver: new FakeSessionResolver().add('token', member),
      catalog: { version: 1, tasks: [], subscriptions: [] },
      latestMigration: latest!.name,
      config: { corsOrigins: [], corsCredentials: false },
      logger: false,
    });
    try {
      await app.listen({ port: 0, host: '127.0.0.1' });
      const address = app.server.address() as { port: number };
      const res = await fetch(`http://127.0.0.1:${address.port}/task-runs/${dispatched.runId}`, { headers: { authorization: 'Bearer token' } });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { data: { status: string; outcome: unknown } };
      expect(body.data).toMatchObject({ status: 'failed', outcome: expected });
    } finally {
      await app.close();
    }

    const shown = await svc(h, ['runs', 'show', dispatched.runId, '--json']);
    expect(shown.stderr).toBe('');
    const detail = JSON.parse(shown.stdout) as Record<string, any>;
    expect(detail.run.outcome).toEqual(expected);
    // Causal order: occurred_at, then id. Under load the message may be delivered once more after it
    // settled (a late duplicate, noted as `received`): only the first six events are fixed.
    const causal = ['queued', 'sent', 'received', 'started', 'failed', 'dead_lettered'];
    const ordered = (await h.sql<{ event: string }[]>`SELECT event FROM task_run_events WHERE run_id = ${dispatched.runId} ORDER BY occurred_at, id`).map((r) => r.event);
    expect(ordered.slice(0, 6)).toEqual(causal);
    expect(detail.trail.map((t: { event: string }) => t.event)).toEqual(ordered);
    expect(detail.trail.find((t: { event: string }) => t.event === 'started').detail).toMatchObject({ effect: 'rolled_back' });
    expect(detail.ledger).toMatchObject({ status: 'failed_permanent', attempt: 1 });
    expect(detail.outbox).toMatchObject({ queue: 'default', envelope: { run_id: dispatched.runId, payload: { key: 'why' } } });
    expect(detail.outbox.sentAt).toEqual(expect.any(String));
    const [uid] = await h.sql`SELECT uid FROM tenants WHERE id = ${member.tenantId}`;
    expect(detail.tenant).toBe(uid!.uid);
    // No numeric id anywhere in the output.
    expect(shown.stdout).not.toMatch(/"tenantId"|"tenant_id"/);

    const text = await svc(h, ['runs', 'show', dispatched.runId]);
    expect(text.stdout).toContain(`run         ${dispatched.runId}`);
    expect(text.stdout).toContain('outcome     {"error":{"code":"VALIDATION_FAILED"');
    expect(text.stdout).toMatch(/trail:\nAT\s+EVENT\s+ATTEMPT\s+RECEIVE\s+ERROR\s+WORKER\s+DETAIL/);
    const trailLines = text.stdout.split('trail:\n')[1]!.trim().split('\n').slice(1);
    expect(trailLines.map((l) => l.split(/\s+/)[1]).slice(0, 6)).toEqual(causal);
  });

  it('runs list: newest first, filters, a table and one JSON object per line; numeric ids never shown', async () => {
    const member = await createTenantMember(h.sql);
    const [tenant] = await h.sql<{ uid: string }[]>`SELECT uid FROM tenants WHERE id = ${member.tenantId}`;
    const actor = { kind: 'system' as const, tenantId: member.tenantId, label: 'test' };
    const dispatcher = createDispatcher({ resolve: (n) => OPERATE_UNITS.get(n), instance: 'test' });
    const ids: string[] = [];
    fault.broken = true;
    for (const key of ['l1', 'l2', 'l3']) {
      const r = await inUnitOfWork(h.sql, actor, (tx) => dispatcher.dispatchTask(tx, 'fixture.tenant_broken_until_fixed', { key }, { actor }));
      ids.push(r.runId);
      await h.waitForStatus(r.runId, ['failed']);
    }
    const json = await svc(h, ['runs', 'list', '--tenant', tenant!.uid, '--json']);
    expect(json.stderr).toBe('');
    const lines = jsonLines(json.stdout);
    expect(lines.map((l) => l.runId)).toEqual([...ids].reverse());
    expect(lines[0]).toEqual({
      runId: ids[2],
      tenant: tenant!.uid,
      unit: 'fixture.tenant_broken_until_fixed',
      queue: 'default',
      status: 'failed',
      trigger: 'dispatch',
      attempts: 1,
      actor: 'test',
      errorCode: 'VALIDATION_FAILED',
      queuedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
      finishedAt: expect.stringMatching(/Z$/),
    });
    expect(json.stdout).not.toContain(`"${member.tenantId}"`);

    const limited = jsonLines((await svc(h, ['runs', 'list', '--tenant', tenant!.uid, '--limit', '2', '--json'])).stdout);
    expect(limited.map((l) => l.runId)).toEqual([ids[2], ids[1]]);
    const table = await svc(h, ['runs', 'list', '--unit', 'fixture.tenant_broken_until_fixed', '--status', 'failed,succeeded', '--since', '10m', '--queue', 'default']);
    const rows = table.stdout.trim().split('\n');
    expect(rows[0]).toMatch(/^RUN\s+TENANT\s+UNIT\s+QUEUE\s+STATUS\s+TRIGGER\s+ATTEMPTS\s+ERROR\s+QUEUED AT\s+ACTOR$/);
    for (const id of ids) expect(rows.some((r) => r.startsWith(id) && r.includes(tenant!.uid) && r.includes('VALIDATION_FAILED'))).toBe(true);

    // Function-level filters: an instant window and a status that matches none of them.
    expect((await listRuns(h.sql, { tenant: tenant!.uid, statuses: ['queued'] })).length).toBe(0);
    expect((await listRuns(h.sql, { tenant: tenant!.uid, until: { at: '2000-01-01T00:00:00.000Z' } })).length).toBe(0);
    expect((await listRuns(h.sql, { unit: 'fixture.tenant_broken_until_fixed', errorCode: 'VALIDATION_FAILED', tenant: tenant!.uid })).length).toBe(3);
  });
});

/** Waits until the workers hold no message (every delivery settled). */
async function waitIdle(timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (workers.inFlight() > 0) {
    if (Date.now() > deadline) throw new Error(`workers still hold ${workers.inFlight()} message(s) after ${timeoutMs} ms`);
    await sleep(25);
  }
}
