// `rateLimit` in a unit definition: defineTask/defineSubscriber refuse a wrong one with
// UNIT_RATE_LIMIT_INVALID (naming the unit and the field), fill in the default scope, and unitProblems
// (tasks:check) reports the same problems for a definition built another way.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineSubscriber, defineTask, rateLimitProblems, unitProblems, type RateLimit } from '../../src/work/define/unit.ts';
import { RateLimitInvalid } from '../../src/work/define/unit-errors.ts';

const task = (rateLimit: RateLimit, context: 'tenant' | 'platform' | 'system' = 'tenant') =>
  defineTask({ name: 'demo.limited', queue: 'default', context, payload: z.object({}), rateLimit, async handler() {} });

function refusal(make: () => unknown): RateLimitInvalid {
  try {
    make();
  } catch (error) {
    expect(error).toBeInstanceOf(RateLimitInvalid);
    return error as RateLimitInvalid;
  }
  throw new Error('the definition was accepted');
}

describe('rateLimit definition', () => {
  it('keeps a valid limit and defaults its scope to unit; none is null', () => {
    expect(task({ max: 10, perSeconds: 1 }).rateLimit).toEqual({ max: 10, perSeconds: 1, scope: 'unit' });
    expect(task({ max: 3, perSeconds: 0.5, scope: 'tenant' }).rateLimit).toEqual({ max: 3, perSeconds: 0.5, scope: 'tenant' });
    expect(defineTask({ name: 'demo.free', queue: 'default', payload: z.object({}), async handler() {} }).rateLimit).toBeNull();
    expect(unitProblems(task({ max: 10, perSeconds: 1 }))).toEqual([]);
  });

  it.each([
    [{ max: 0, perSeconds: 1 }, 'rateLimit.max must be a whole number from 1'],
    [{ max: 2.5, perSeconds: 1 }, 'rateLimit.max must be a whole number from 1'],
    [{ max: '10' as unknown as number, perSeconds: 1 }, 'rateLimit.max must be a whole number from 1'],
    [{ max: 10, perSeconds: 0 }, 'rateLimit.perSeconds must be a number of seconds above 0'],
    [{ max: 10, perSeconds: -1 }, 'rateLimit.perSeconds must be a number of seconds above 0'],
    [{ max: 10, perSeconds: Number.NaN }, 'rateLimit.perSeconds must be a number of seconds above 0'],
    [{ max: 10, perSeconds: 86_401 }, 'at most 86400'],
    [{ max: 10, perSeconds: 1, scope: 'global' as never }, "rateLimit.scope must be unit or tenant, not 'global'"],
  ])('defineTask refuses %j with UNIT_RATE_LIMIT_INVALID', (rateLimit, problem) => {
    const error = refusal(() => task(rateLimit));
    expect(error.code).toBe('UNIT_RATE_LIMIT_INVALID');
    expect(error.message).toContain("unit 'demo.limited'");
    expect(error.message).toContain(problem);
  });

  it("refuses scope 'tenant' on a unit whose runs belong to no tenant", () => {
    const error = refusal(() => task({ max: 1, perSeconds: 1, scope: 'tenant' }, 'platform'));
    expect(error.problems).toEqual([expect.stringContaining("rateLimit.scope 'tenant' needs context 'tenant'")]);
    expect(task({ max: 1, perSeconds: 1 }, 'system').rateLimit?.scope).toBe('unit');
  });

  it('defineSubscriber checks it the same way', () => {
    const sub = (rateLimit: RateLimit) =>
      defineSubscriber({ name: 'demo.on_event', event: { type: 'demo.happened', version: 1 }, queue: 'bulk', payload: z.object({}), rateLimit, async handler() {} });
    expect(sub({ max: 5, perSeconds: 60 }).rateLimit).toEqual({ max: 5, perSeconds: 60, scope: 'unit' });
    expect(refusal(() => sub({ max: 5, perSeconds: 0 })).code).toBe('UNIT_RATE_LIMIT_INVALID');
  });

  it('unitProblems reports a wrong limit on a definition built without defineTask (tasks:check)', () => {
    const unit = { ...task({ max: 1, perSeconds: 1 }), rateLimit: { max: 0, perSeconds: 1, scope: 'unit' as const } };
    expect(unitProblems(unit)).toEqual([expect.stringMatching(/^unit 'demo.limited': rateLimit.max must be a whole number/)]);
    expect(rateLimitProblems(null, 'tenant')).toEqual([]);
    expect(rateLimitProblems('fast' as never, 'tenant')).toEqual(['rateLimit must be an object { max, perSeconds, scope? }']);
  });
});
