// What a unit author meets first: failure classes called the natural way, schedule problems that say
// what is wrong, payload schemas refused with every field that has no JSON form.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { payloadJsonSchema, PayloadSchemaUnrepresentable } from '../../src/work/define/payload-schema.ts';
import { scheduleExpressionProblem } from '../../src/work/define/schedule-expression.ts';
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
