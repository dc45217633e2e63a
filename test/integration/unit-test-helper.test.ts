// testUnit: a unit author runs a handler once against a real database transaction with a real run row,
// without SQS, Redis or the relay.
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUN_JSON_MAX_BYTES } from '../../src/config/limits.ts';
import { DispatchError } from '../../src/work/runtime/produce/dispatch.ts';
import { deliverAgain, testUnit } from '../../src/work/testing.ts';
import { defineTask } from '../../src/work/define/unit.ts';
import { NotFoundFailure } from '../../src/work/define/unit-errors.ts';
import { loginNotificationEmail } from '../../units/identity/login-notification-email.handler.ts';
import { refusal } from '../support/refusal.ts';
import { waitFor } from '../support/wait-for.ts';
import type { TestDatabase } from '../support/services.ts';
import { createTenant, workDatabase } from './work-tables-support.ts';

let db: TestDatabase;
let tenant: string;

beforeAll(async () => {
  db = await workDatabase();
  tenant = await createTenant(db.sql);
  await db.sql`CREATE TABLE notes (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, run_id uuid NOT NULL, body text NOT NULL)`;
});
afterAll(async () => {
  await db?.drop();
});

const followUp = defineTask({ name: 'notes.index', queue: 'bulk', payload: z.object({ body: z.string() }), async handler() {} });
const writeNote = defineTask({
  name: 'notes.write',
  queue: 'default',
  payload: z.object({ body: z.string().min(1), fail: z.enum(['missing', 'transient']).optional() }),
  async handler(p, run) {
    await run.transaction`INSERT INTO notes (run_id, body) VALUES (${run.runId}, ${p.body})`;
    await run.progress(50);
    await run.dispatch(followUp, { body: p.body });
    if (p.fail === 'missing') throw new NotFoundFailure('the note book does not exist');
    if (p.fail === 'transient') throw new Error('the search service is down');
    return { written: p.body.length };
  },
});

// An outcome over the run's limit: the worker refuses it after the handler returned.
const oversized = defineTask({
  name: 'notes.oversized',
  queue: 'default',
  payload: z.object({}),
  async handler() {
    return { text: 'x'.repeat(RUN_JSON_MAX_BYTES + 100) };
  },
});

// Ignores run.signal past its 1 s timeout, then writes on the run.transaction it kept.
let lateWrite: unknown;
const lateWriter = defineTask({
  name: 'notes.late',
  queue: 'default',
  timeoutSeconds: 1,
  payload: z.object({ body: z.string() }),
  async handler(p, run) {
    await sleep(1_500); // a slow call that does not honour the signal
    lateWrite = await run.transaction`INSERT INTO notes (run_id, body) VALUES (${run.runId}, ${p.body})`.then(
      () => 'written',
      (error: unknown) => error,
    );
  },
});

// Always fails: transiently, or for good; its own backoff without jitter, so the delay is known.
const flaky = defineTask({
  name: 'notes.flaky',
  queue: 'default',
  payload: z.object({ permanent: z.boolean() }),
  retry: { backoff: { baseMs: 2_000, capMs: 60_000, jitter: 'none' } },
  async handler(p) {
    if (p.permanent) throw new NotFoundFailure('the note book is gone');
    throw new Error('the search service is down');
  },
});

// A groupCommit unit runs through the worker's group commit (one member here).
const groupedNote = defineTask({
  name: 'notes.grouped',
  queue: 'default',
  groupCommit: true,
  payload: z.object({ body: z.string() }),
  async handler(p, run) {
    await run.transaction`INSERT INTO notes (run_id, body) VALUES (${run.runId}, ${p.body})`;
    return { ok: true };
  },
});

// Waits on its signal: only a release (or its timeout) ends it.
const patient = defineTask({
  name: 'notes.patient',
  queue: 'default',
  payload: z.object({}),
  async handler(_p, run) {
    await new Promise((resolve) => run.signal.addEventListener('abort', resolve, { once: true }));
  },
});

describe('testUnit', () => {
  it('runs identity.login_notification_email once and returns its outcome, the succeeded run and its trail', async () => {
    const { outcome, error, run, trail } = await testUnit(
      loginNotificationEmail,
      { userId: '1', email: 'ana@example.com', occurredAt: '2030-01-01T00:00:00Z' },
      { sql: db.sql, tenant },
    );
    expect(error).toBeNull();
    expect(outcome).toEqual({ notified: true });
    expect(run).toMatchObject({ name: 'identity.login_notification_email', status: 'succeeded', attempts: 1, tenantId: tenant, outcome: { notified: true } });
    // `sent`: the delivery records the send of its own message (the relay did not run).
    expect(trail.map((t) => t.event)).toEqual(['queued', 'sent', 'received', 'started', 'succeeded']);
  });

  it('the effect, progress and a follow-up commit with the run; the follow-up is caused by it and carries its correlation id', async () => {
    const result = await testUnit(writeNote, { body: 'hello' }, { sql: db.sql, tenant });
    expect(result.outcome).toEqual({ written: 5 });
    expect(result.trail.map((t) => t.event)).toEqual(['queued', 'sent', 'received', 'started', 'progress', 'succeeded']);
    expect(result).toMatchObject({ delivery: 'acked', retryInSeconds: null, deadLetter: null, result: 'succeeded' });
    const [note] = await db.sql`SELECT body FROM notes WHERE run_id = ${result.run.runId}`;
    expect(note!.body).toBe('hello');
    const [child] = await db.sql`SELECT name, status, causation_id, correlation_id FROM task_runs WHERE causation_id = ${result.run.runId}`;
    expect(child).toEqual({ name: 'notes.index', status: 'queued', causation_id: result.run.runId, correlation_id: result.run.correlationId });
    expect(result.followUps.map((r) => r.name)).toEqual(['notes.index']);
  });

  it('a failure returns the classified error, rolls the effect and the follow-up back, and settles the run as the worker would', async () => {
    const permanent = await testUnit(writeNote, { body: 'lost', fail: 'missing' }, { sql: db.sql, tenant });
    expect(permanent.outcome).toBeNull();
    expect(permanent.error).toMatchObject({ code: 'NOT_FOUND', type: 'NotFoundFailure', permanent: true });
    expect(permanent.run.status).toBe('failed');
    // As the worker: the rolled-back attempt's `started` is kept on the trail, and the message is dead-lettered.
    expect(permanent.trail.map((t) => [t.event, t.errorCode])).toEqual([
      ['queued', ''],
      ['sent', ''],
      ['received', ''],
      ['started', ''],
      ['progress', ''],
      ['failed', 'NOT_FOUND'],
      ['dead_lettered', 'NOT_FOUND'],
    ]);
    expect(permanent.trail.find((t) => t.event === 'started')!.detail).toMatchObject({ effect: 'rolled_back' });
    const transient = await testUnit(writeNote, { body: 'later', fail: 'transient' }, { sql: db.sql, tenant });
    expect(transient.error).toMatchObject({ code: 'UNIT_FAILED', type: 'Error', permanent: false });
    expect(transient.run.status).toBe('retrying');
    expect(transient.trail.at(-1)).toMatchObject({ event: 'retry_scheduled', detail: { retryInSeconds: expect.any(Number) } });
    for (const r of [permanent, transient]) {
      expect(await db.sql`SELECT 1 FROM notes WHERE run_id = ${r.run.runId}`).toHaveLength(0);
      expect(await db.sql`SELECT 1 FROM task_runs WHERE causation_id = ${r.run.runId}`).toHaveLength(0);
    }
  });

  it('a payload the schema refuses, or a tenant unit without a tenant, is refused at dispatch: nothing is written', async () => {
    const [before] = await db.sql`SELECT count(*)::int AS n FROM task_runs`;
    const bad = await refusal(testUnit(writeNote, { body: '' }, { sql: db.sql, tenant }));
    expect(bad).toBeInstanceOf(DispatchError);
    expect((bad as DispatchError).details).toMatchObject({ unit: 'notes.write', issues: [{ path: 'body' }] });
    const noTenant = await refusal(testUnit(writeNote, { body: 'x' }, { sql: db.sql }));
    expect((noTenant as DispatchError).code).toBe('RUN_CONTEXT_MISMATCH');
    const [after] = await db.sql`SELECT count(*)::int AS n FROM task_runs`;
    expect(after!.n).toBe(before!.n);
  });

  it('an outcome over the run limit fails the run as the worker does (VALIDATION_FAILED, dead-lettered), not at the CHECK', async () => {
    const r = await testUnit(oversized, {}, { sql: db.sql, tenant });
    expect(r.outcome).toBeNull();
    expect(r.error).toMatchObject({ code: 'VALIDATION_FAILED', type: 'ValidationFailure', permanent: true });
    expect(r.error!.message).toContain(`outcome over ${RUN_JSON_MAX_BYTES} bytes`);
    expect(r.run.status).toBe('failed');
    expect(r.run.outcome).toMatchObject({ error: { code: 'VALIDATION_FAILED' } });
    expect(r.delivery).toBe('dead_lettered');
    expect(r.deadLetter).toMatchObject({ runId: r.run.runId, unit: 'notes.oversized', errorCode: 'VALIDATION_FAILED', receiveCount: 1 });
    expect(r.trail.map((t) => t.event).slice(-2)).toEqual(['failed', 'dead_lettered']);
  });

  it('a handler that writes on run.transaction after its timeout is refused (RUN_TRANSACTION_CLOSED): nothing reaches the database', async () => {
    lateWrite = undefined;
    const r = await testUnit(lateWriter, { body: 'too late' }, { sql: db.sql, tenant });
    expect(r.error).toMatchObject({ code: 'UNIT_TIMED_OUT', permanent: false });
    expect(r.run.status).toBe('retrying');
    expect(r.delivery).toBe('retry');
    await waitFor(() => lateWrite !== undefined, 10_000, { what: 'the late write' });
    expect(lateWrite).toMatchObject({ code: 'RUN_TRANSACTION_CLOSED' });
    expect(await db.sql`SELECT 1 FROM notes WHERE run_id = ${r.run.runId}`).toHaveLength(0);
  });

  it("a transient failure schedules the retry with the unit's backoff; delivered again it is attempt 2; on the last receive it fails and is dead-lettered", async () => {
    const first = await testUnit(flaky, { permanent: false }, { sql: db.sql, tenant });
    expect(first.error).toMatchObject({ code: 'UNIT_FAILED', permanent: false });
    expect(first).toMatchObject({ delivery: 'retry', retryInSeconds: 2, deadLetter: null });
    expect(first.run).toMatchObject({ status: 'retrying', attempts: 1 });
    expect(first.trail.at(-1)).toMatchObject({ event: 'retry_scheduled', receiveCount: 1, detail: { retryInSeconds: 2 } });

    const second = await deliverAgain(flaky, first, { sql: db.sql, tenant });
    expect(second).toMatchObject({ delivery: 'retry', retryInSeconds: 4 });
    expect(second.run).toMatchObject({ runId: first.run.runId, status: 'retrying', attempts: 2 });
    expect(second.trail.at(-1)).toMatchObject({ event: 'retry_scheduled', attempt: 2, receiveCount: 2 });

    const last = await deliverAgain(flaky, second, { sql: db.sql, tenant, receiveCount: 5 });
    expect(last.error).toMatchObject({ code: 'UNIT_FAILED', permanent: false });
    expect(last).toMatchObject({ delivery: 'dead_lettered', retryInSeconds: null, deadLetter: { errorCode: 'UNIT_FAILED', receiveCount: 5 } });
    expect(last.run).toMatchObject({ status: 'failed', attempts: 3 });
    expect(last.trail.find((t) => t.event === 'failed')).toMatchObject({ receiveCount: 5, detail: { receivesExhausted: true } });
  });

  it('a permanent failure fails the run and dead-letters its message on the first receive; a fifth receive of a fresh run takes the same path', async () => {
    const permanent = await testUnit(flaky, { permanent: true }, { sql: db.sql, tenant });
    expect(permanent).toMatchObject({ delivery: 'dead_lettered', deadLetter: { errorCode: 'NOT_FOUND', receiveCount: 1 } });
    expect(permanent.run.status).toBe('failed');
    const fifth = await testUnit(flaky, { permanent: false }, { sql: db.sql, tenant, receiveCount: 5 });
    expect(fifth).toMatchObject({ delivery: 'dead_lettered', deadLetter: { errorCode: 'UNIT_FAILED', receiveCount: 5 } });
    expect(fifth.run).toMatchObject({ status: 'failed', attempts: 1 });
  });

  it("a groupCommit unit commits through the worker's group commit; a release on shutdown puts the run back in the queue", async () => {
    const grouped = await testUnit(groupedNote, { body: 'grouped' }, { sql: db.sql, tenant });
    expect(grouped).toMatchObject({ outcome: { ok: true }, error: null, delivery: 'acked', result: 'succeeded' });
    expect(await db.sql`SELECT body FROM notes WHERE run_id = ${grouped.run.runId}`).toEqual([{ body: 'grouped' }]);

    const release = new AbortController();
    const releasing = testUnit(patient, {}, { sql: db.sql, tenant, releaseSignal: release.signal });
    await waitFor(async () => (await db.sql`SELECT 1 FROM task_runs WHERE name = 'notes.patient' AND status = 'running'`).length > 0, 10_000, { what: 'the run running' });
    release.abort();
    const released = await releasing;
    expect(released).toMatchObject({ delivery: 'retry', retryInSeconds: 0, error: null, result: 'released' });
    expect(released.run.status).toBe('queued');
    expect(released.trail.at(-1)!.event).toBe('released_on_shutdown');
  });
});
