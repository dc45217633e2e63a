// Pure pieces of the worker runtime: schedule expressions and moments, backoff, idempotency digests,
// unit definitions and their checks, slot limits, failure classification, the pool rule.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { checkPoolSize } from '../../src/config/workers.ts';
import { backoffSeconds, clampToReceipt, RECEIPT_MARGIN_SECONDS } from '../../src/work/runtime/complete/backoff.ts';
import { envelopeBody } from '../../src/work/runtime/produce/envelope.ts';
import { advisoryKeyOf, canonicalJson, fingerprintOf, idempotencyKeyOf } from '../../src/work/runtime/store/idempotency.ts';
import { nextScheduledMoment, parseScheduleExpression, scheduledMomentAt } from '../../src/work/define/schedule-expression.ts';
import { SlotLimit } from '../../src/work/runtime/consume/slot-limit.ts';
import { classifyFailure, ForbiddenFailure, NotFoundFailure, TransientFailure, UnitNotRegistered, ValidationFailure } from '../../src/work/define/unit-errors.ts';
import { defineSubscriber, defineTask, unitProblems } from '../../src/work/define/unit.ts';
import { messagesForQueue, slotsForQueues } from '../../src/work/runtime/worker-runtime.ts';

const noop = async () => ({});

describe('schedule expressions', () => {
  it('R-UNT-07 accepts rate(<n> <unit>) with minute, hour, day in the right number', () => {
    expect(parseScheduleExpression('rate(1 hour)')).toMatchObject({ every: 1, unit: 'hour', intervalMs: 3_600_000 });
    expect(parseScheduleExpression('rate(5 minutes)')).toMatchObject({ every: 5, unit: 'minute', intervalMs: 300_000 });
    expect(parseScheduleExpression('rate(2 days)').intervalMs).toBe(172_800_000);
    for (const bad of ['rate(1 hours)', 'rate(5 minute)', 'rate(0 minutes)', 'rate(1 second)', 'cron(0 * * * ? *)', 'rate(1  hour)', 'rate(-1 hour)', 'every hour']) {
      expect(() => parseScheduleExpression(bad), bad).toThrow(expect.objectContaining({ code: 'SCHEDULE_INVALID' }));
    }
  });

  it('R-SCH-04 maps any instant to one scheduled moment, so every scheduler agrees', () => {
    const hourly = parseScheduleExpression('rate(1 hour)');
    const t = Date.parse('2030-06-01T10:59:59.999Z');
    expect(new Date(scheduledMomentAt(hourly, t)).toISOString()).toBe('2030-06-01T10:00:00.000Z');
    expect(new Date(nextScheduledMoment(hourly, t)).toISOString()).toBe('2030-06-01T11:00:00.000Z');
    expect(scheduledMomentAt(hourly, Date.parse('2030-06-01T10:00:00.000Z'))).toBe(Date.parse('2030-06-01T10:00:00.000Z'));
  });
});

describe('backoff', () => {
  it('R-WRK-04 doubles per receive from the base and stops at the cap, in whole seconds', () => {
    expect([1, 2, 3, 4, 5].map((n) => backoffSeconds(n, { baseMs: 2_000, capMs: 300_000 }))).toEqual([2, 4, 8, 16, 32]);
    expect(backoffSeconds(20, { baseMs: 2_000, capMs: 300_000 })).toBe(300);
    expect(backoffSeconds(1)).toBe(2);
  });

  it('a delay is clamped to what is left of the 12 h a message may stay invisible past its receipt, less a margin', () => {
    // Held 10.2 s: 43200 - 11 - margin at most; a short delay stands as it is.
    expect(clampToReceipt(43_200, 10_200)).toBe(43_200 - 11 - RECEIPT_MARGIN_SECONDS);
    expect(clampToReceipt(30, 10_200)).toBe(30);
    // Held (nearly) 12 h: nothing left, 0 (visible at once), never negative.
    expect(clampToReceipt(600, 43_200_000)).toBe(0);
    // Receipt unknown: bounded by the 12 h only.
    expect(clampToReceipt(50_000, undefined)).toBe(43_200);
  });
});

describe('message body', () => {
  it('escapes every character SQS refuses (and every surrogate) so the body is accepted, and parses back to the same envelope', () => {
    const envelope = { run_id: 'r', payload: { 'k\uFFFF': ['\uFFFE', 'a\uFFFFb', '\u{1F600}', '\u0001', 'plain é ✓'] } };
    const body = envelopeBody(envelope);
    // Nothing outside what the strictest SQS-protocol server takes: #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD, one UTF-16 unit at a time.
    expect(body).not.toMatch(/[^\x09\x0A\x0D\x20-\uD7FF\uE000-\uFFFD]/);
    expect(JSON.parse(body)).toEqual(envelope);
    expect(body).toContain('\\uffff');
    // A body without such characters is JSON.stringify's, unchanged.
    expect(envelopeBody({ a: 'é ✓' })).toBe(JSON.stringify({ a: 'é ✓' }));
  });
});

describe('idempotency digests', () => {
  it('R-IDM-03 R-IDM-10 key and fingerprint are 32-byte SHA-256 digests; the fingerprint ignores key order', () => {
    const key = idempotencyKeyOf('demo.task', '6f1c0f0e-0000-4000-8000-000000000000');
    expect(key).toHaveLength(32);
    expect(idempotencyKeyOf('demo.task', 'a')).not.toEqual(idempotencyKeyOf('demo.tas', 'ka'));
    expect(fingerprintOf({ b: 1, a: [1, { y: 2, x: 1 }] })).toEqual(fingerprintOf({ a: [1, { x: 1, y: 2 }], b: 1 }));
    expect(fingerprintOf({ a: 1 })).not.toEqual(fingerprintOf({ a: 2 }));
    expect(fingerprintOf({ a: 1 })).toHaveLength(32);
    expect(canonicalJson({ b: undefined, a: 'x' })).toBe('{"a":"x"}');
    expect(advisoryKeyOf(key)).toMatch(/^-?\d+$/);
  });
});

describe('unit definitions', () => {
  it('R-UNT-03 R-UNT-04 R-UNT-05 defaults: tenant context, concurrency 1, overlap skip only with a schedule', () => {
    const plain = defineTask({ name: 'demo.plain', queue: 'default', payload: z.object({}), handler: noop });
    expect(plain).toMatchObject({ kind: 'task', context: 'tenant', concurrency: 1, schedule: null, overlap: null });
    const scheduled = defineTask({ name: 'demo.tick', queue: 'bulk', context: 'system', schedule: 'rate(5 minutes)', payload: z.object({}), handler: noop });
    expect(scheduled.overlap).toBe('skip');
    expect(unitProblems(scheduled)).toEqual([]);
    const overlapNoSchedule = defineTask({ name: 'demo.odd', queue: 'default', overlap: 'allow', payload: z.object({}), handler: noop });
    expect(unitProblems(overlapNoSchedule)).toEqual(['overlap is only for scheduled tasks: remove it or add a schedule']);
  });

  it('R-UNT-02 R-UNT-06 checks names (segments, length, database rule) and subscriber event versions', () => {
    const named = (name: string) => unitProblems(defineTask({ name, queue: 'default', payload: z.object({}), handler: noop }));
    expect(named('billing.invoice_paid.v2')).toEqual([]);
    expect(named('a')).toHaveLength(1); // the database needs at least 2 characters
    expect(named('billing..paid')).toHaveLength(1);
    expect(named('Billing.paid')).toHaveLength(1);
    expect(named('billing.1paid')).toHaveLength(1);
    expect(named(`x.${'a'.repeat(63)}`)).toEqual([expect.stringContaining('longer than 64')]);
    const sub = defineSubscriber({ name: 'demo.sub', event: { type: 'demo.happened', version: 0 }, queue: 'critical', payload: z.object({}), handler: noop });
    expect(unitProblems(sub)).toEqual(['event.version must be a whole number of at least 1']);
  });

  it('groupCommit is off unless a unit turns it on, and only true or false is accepted', () => {
    expect(defineTask({ name: 'demo.plain', queue: 'default', payload: z.object({}), handler: noop }).groupCommit).toBe(false);
    const grouped = defineSubscriber({ name: 'demo.fast', event: { type: 'demo.happened', version: 1 }, queue: 'bulk', groupCommit: true, payload: z.object({}), handler: noop });
    expect(grouped.groupCommit).toBe(true);
    expect(unitProblems(grouped)).toEqual([]);
    expect(unitProblems({ ...grouped, groupCommit: 'yes' as never })).toEqual(['groupCommit must be true or false']);
  });
});

describe('slot limit', () => {
  it('R-UNT-03 holds at most `limit` at once and serves waiters in order; an aborted wait holds nothing', async () => {
    const slots = new SlotLimit(2);
    expect(await slots.acquire()).toBe(true);
    expect(await slots.acquire()).toBe(true);
    const order: string[] = [];
    const third = slots.acquire().then((ok) => order.push(`third:${ok}`));
    const abort = new AbortController();
    const fourth = slots.acquire(abort.signal).then((ok) => order.push(`fourth:${ok}`));
    abort.abort();
    await fourth;
    slots.release();
    await third;
    expect(order).toEqual(['fourth:false', 'third:true']);
    expect(slots.held).toBe(2);
  });
});

describe('failure classification', () => {
  it('R-WRK-03 validation, forbidden, not found and zod errors are permanent; unknown errors and unknown units transient', () => {
    expect(classifyFailure(new ValidationFailure('x')).permanent).toBe(true);
    expect(classifyFailure(new ForbiddenFailure('x'))).toMatchObject({ permanent: true, code: 'FORBIDDEN' });
    expect(classifyFailure(new NotFoundFailure('x'))).toMatchObject({ permanent: true, code: 'NOT_FOUND' });
    expect(classifyFailure(z.object({ a: z.string() }).safeParse({}).error)).toMatchObject({ permanent: true, code: 'VALIDATION_FAILED' });
    expect(classifyFailure(new Error('socket hang up'))).toMatchObject({ permanent: false, code: 'UNIT_FAILED' });
    expect(classifyFailure(new TransientFailure('X', 'y')).permanent).toBe(false);
    expect(classifyFailure(new UnitNotRegistered('a.b'))).toMatchObject({ permanent: false, code: 'UNIT_NOT_REGISTERED' });
  });
});

describe('pool rule', () => {
  it('R-WRK-11 DATABASE_POOL_SIZE must be at least 2 x slots + 2, slots summing the concurrency of units on the consumed queues', () => {
    const units = [
      defineTask({ name: 'a.one', queue: 'default', concurrency: 3, payload: z.object({}), handler: noop }),
      defineTask({ name: 'a.two', queue: 'critical', concurrency: 2, payload: z.object({}), handler: noop }),
      defineTask({ name: 'a.three', queue: 'bulk', concurrency: 10, payload: z.object({}), handler: noop }),
    ];
    const slots = slotsForQueues(units, ['default', 'critical']);
    expect(slots).toBe(5);
    expect(checkPoolSize(12, slots)).toBe(12);
    expect(checkPoolSize(undefined, slots)).toBe(12);
    expect(() => checkPoolSize(11, slots)).toThrow(/DATABASE_POOL_SIZE/);
  });

  it('R-WRK-11 R-UNT-09 a groupCommit unit counts its concurrency in the pool rule, while its consumer holds 40 messages per slot (a slot runs a whole group)', () => {
    const units = [
      defineTask({ name: 'g.grouped', queue: 'default', concurrency: 3, groupCommit: true, payload: z.object({}), handler: noop }),
      defineTask({ name: 'g.plain', queue: 'default', concurrency: 2, payload: z.object({}), handler: noop }),
    ];
    expect(slotsForQueues(units, ['default'])).toBe(5);
    expect(checkPoolSize(undefined, slotsForQueues(units, ['default']))).toBe(12);
    expect(messagesForQueue(units, 'default')).toBe(122);
    expect(messagesForQueue(units, 'critical')).toBe(1);
  });

  it('R-WRK-11 a consumed queue without units counts the one slot its consumer still takes, so the pool floor covers it', () => {
    const units = [defineTask({ name: 'a.one', queue: 'default', concurrency: 3, payload: z.object({}), handler: noop })];
    // default 3 + maintenance (no units, still one message at a time) 1.
    const slots = slotsForQueues(units, ['default', 'maintenance']);
    expect(slots).toBe(4);
    expect(slotsForQueues(units, ['maintenance'])).toBe(1);
    expect(checkPoolSize(undefined, slots)).toBe(10);
    expect(() => checkPoolSize(9, slots)).toThrow(/DATABASE_POOL_SIZE/);
  });
});
