// tasks:check refuses a unit whose timeout plus the idempotency lease margin cannot fit the longest
// invisibility SQS allows (12 hours), naming the unit, its queue and the numbers.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { visibilityProblem } from '../../src/work/catalog.ts';
import { defineTask } from '../../src/work/define/unit.ts';

const task = (timeoutSeconds: number) =>
  defineTask({ name: 'demo.long', queue: 'bulk', context: 'system', timeoutSeconds, payload: z.object({}), handler: async () => ({}) });

describe('tasks:check visibility rule', () => {
  it('refuses a unit whose timeout + lease margin exceeds 43200 s, naming unit, queue and numbers', () => {
    expect(visibilityProblem(task(43_200))).toBe(
      "unit 'demo.long' on queue 'bulk': timeoutSeconds 43200 + lease margin 30 s = 43230 s exceeds the SQS maximum visibility of 43200 s (12 hours); lower timeoutSeconds to at most 43170",
    );
    expect(visibilityProblem(task(43_171))).toContain('43201 s');
  });

  it('accepts a unit that fits, at the boundary too', () => {
    expect(visibilityProblem(task(43_170))).toBeNull();
    expect(visibilityProblem(task(900))).toBeNull();
  });
});
