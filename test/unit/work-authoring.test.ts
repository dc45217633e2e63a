// What a unit author meets first: failure classes called the natural way, schedule problems that say
// what is wrong, payload schemas refused with every field that has no JSON form.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { payloadJsonSchema, PayloadSchemaUnrepresentable } from '../../src/work/define/payload-schema.ts';
import { nextScheduledMoment, parseScheduleExpression, scheduledMomentAt, scheduleExpressionProblem } from '../../src/work/define/schedule-expression.ts';
import { defineTask, unitProblems } from '../../src/work/define/unit.ts';
import { classifyFailure, ForbiddenFailure, PermanentFailure, TransientFailure } from '../../src/work/define/unit-errors.ts';

describe('failure classes', () => {
  it('a single message argument is the message, with the class default code', () => {
    const p = new PermanentFailure('amount -5 is negative');
    expect({ code: p.code, message: p.message }).toEqual({ code: 'PERMANENT_FAILURE', message: 'amount -5 is negative' });
    const t = new TransientFailure('the bank did not answer');
    expect({ code: t.code, message: t.message }).toEqual({ code: 'TRANSIENT_FAILURE', message: 'the bank did not answer' });
    expect(classifyFailure(p)).toMatchObject({ code: 'PERMANENT_FAILURE', message: 'amount -5 is negative', permanent: true });
  });

  it('(code, message) and { code, message } still set both; a lone code-shaped argument is the code', () => {
    expect(new PermanentFailure('AMOUNT_NEGATIVE', 'amount -5 is negative')).toMatchObject({ code: 'AMOUNT_NEGATIVE', message: 'amount -5 is negative' });
    expect(new TransientFailure({ code: 'BANK_DOWN', message: 'the bank did not answer' })).toMatchObject({ code: 'BANK_DOWN', message: 'the bank did not answer', permanent: false });
    expect(new PermanentFailure({ message: 'no code given' })).toMatchObject({ code: 'PERMANENT_FAILURE', message: 'no code given' });
    const lone = new PermanentFailure('AMOUNT_NEGATIVE');
    expect({ code: lone.code, message: lone.message }).toEqual({ code: 'AMOUNT_NEGATIVE', message: 'AMOUNT_NEGATIVE' });
    const cause = new Error('root');
    expect(new PermanentFailure('X_Y', 'm', { cause }).cause).toBe(cause);
    expect(new PermanentFailure('just text', { cause }).cause).toBe(cause);
  });

  it('a first argument that is not code-shaped never becomes the code', () => {
    const odd = new PermanentFailure('amount is negative', 'see the invoice');
    expect(odd.code).toMatch(/^[A-Z][A-Z0-9_]{1,63}$/);
    expect(odd.message).toBe('amount is negative: see the invoice');
    expect(new ForbiddenFailure('not yours')).toMatchObject({ code: 'FORBIDDEN', message: 'not yours' });
  });
});

describe('schedule problems say what is wrong', () => {
  const scheduled = (schedule: string) =>
    unitProblems(defineTask({ name: 'demo.tick', queue: 'bulk', context: 'system', schedule, payload: z.object({}), async handler() {} }));

  it('tasks:check names the reason the parser found', () => {
    expect(scheduled('rate(1 minutes)')).toEqual([expect.stringContaining("use the singular 'minute' with 1")]);
    expect(scheduled('rate(2 minute)')).toEqual([expect.stringContaining("use the plural 'minutes' with 2")]);
    expect(scheduled('rate(0 minutes)')).toEqual([expect.stringContaining('at least 1')]);
    expect(scheduled('every hour')).toEqual([expect.stringContaining("invalid schedule 'every hour'")]);
    expect(scheduled('rate(5 minutes)')).toEqual([]);
    expect(scheduleExpressionProblem('rate(1 hour)')).toBeNull();
    expect(scheduleExpressionProblem('rate(1 hours)')).toMatch(/singular 'hour'/);
  });
});

describe('payload schemas with no JSON form', () => {
  it('names every unrepresentable field with its path, however deep', () => {
    const schema = z.object({
      invoice: z.object({ issuedAt: z.date(), lines: z.array(z.object({ cents: z.bigint() })) }),
      dueAt: z.date().optional(),
      tags: z.record(z.string(), z.date()),
      pair: z.tuple([z.string(), z.date()]),
      ok: z.string(),
    });
    let error: unknown;
    try {
      payloadJsonSchema(schema);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(PayloadSchemaUnrepresentable);
    const refused = error as PayloadSchemaUnrepresentable;
    expect(refused.fields).toEqual([
      { path: 'invoice.issuedAt', type: 'Date' },
      { path: 'invoice.lines[].cents', type: 'BigInt' },
      { path: 'dueAt', type: 'Date' },
      { path: 'tags.*', type: 'Date' },
      { path: 'pair[1]', type: 'Date' },
    ]);
    expect(refused.message).toContain('invoice.issuedAt (Date), invoice.lines[].cents (BigInt), dueAt (Date), tags.* (Date), pair[1] (Date)');
    expect(() => payloadJsonSchema(z.date())).toThrow(/\(payload\) \(Date\)/);
  });
});

describe('cron schedules', () => {
  const iso = (ms: number) => new Date(ms).toISOString();
  const at = (schedule: string, instant: string) => {
    const parsed = parseScheduleExpression(schedule);
    const t = Date.parse(instant);
    return { moment: iso(scheduledMomentAt(parsed, t)), next: iso(nextScheduledMoment(parsed, t)) };
  };

  it('five fields in UTC with lists, ranges and steps; the moment is the latest matching minute, as for rate()', () => {
    expect(at('cron(30 2 * * *)', '2030-06-01T10:59:59.999Z')).toEqual({ moment: '2030-06-01T02:30:00.000Z', next: '2030-06-02T02:30:00.000Z' });
    expect(at('cron(*/15 * * * *)', '2030-06-01T10:59:59.999Z')).toEqual({ moment: '2030-06-01T10:45:00.000Z', next: '2030-06-01T11:00:00.000Z' });
    // On the minute itself the moment is that minute; the next one is strictly after.
    expect(at('cron(0 9-17/4 * * 1-5)', '2030-06-03T13:00:00.000Z')).toEqual({ moment: '2030-06-03T13:00:00.000Z', next: '2030-06-03T17:00:00.000Z' });
    // 2030-06-01 is a Saturday: the weekday schedule's latest moment is Friday's last, the next Monday's first.
    expect(at('cron(0 9-17/4 * * 1-5)', '2030-06-01T12:00:00.000Z')).toEqual({ moment: '2030-05-31T17:00:00.000Z', next: '2030-06-03T09:00:00.000Z' });
    expect(at('cron(0 0 1,15 * *)', '2030-06-10T00:00:00.000Z')).toEqual({ moment: '2030-06-01T00:00:00.000Z', next: '2030-06-15T00:00:00.000Z' });
    // Day of month and day of week both restricted: either matches (as cron does); 7 is Sunday too.
    expect(at('cron(0 0 13 * 7)', '2030-06-10T00:00:00.000Z')).toEqual({ moment: '2030-06-09T00:00:00.000Z', next: '2030-06-13T00:00:00.000Z' });
    expect(at('cron(0 0 29 2 *)', '2030-06-10T00:00:00.000Z')).toEqual({ moment: '2028-02-29T00:00:00.000Z', next: '2032-02-29T00:00:00.000Z' });
    expect(parseScheduleExpression('cron(5 4 * * 0)')).toMatchObject({ kind: 'cron', expression: 'cron(5 4 * * 0)' });
  });

  it('a cron expression that is malformed or never fires is refused with its reason', () => {
    const reasons: Record<string, RegExp> = {
      'cron(0 * * * ? *)': /5 fields/,
      'cron(0 24 * * *)': /hour.*0\.\.23/,
      'cron(60 * * * *)': /minute.*0\.\.59/,
      'cron(0 0 0 * *)': /day of month.*1\.\.31/,
      'cron(*/0 * * * *)': /step/,
      'cron(5-1 * * * *)': /range/,
      'cron(0 0 31 2 *)': /never/,
      'cron(0 0 * JAN *)': /month/,
      'cron(0 0 * * 8)': /day of week.*0\.\.7/,
    };
    for (const [expression, reason] of Object.entries(reasons)) {
      expect(scheduleExpressionProblem(expression), expression).toMatch(reason);
      expect(() => parseScheduleExpression(expression), expression).toThrow(expect.objectContaining({ code: 'SCHEDULE_INVALID' }));
    }
  });
});
