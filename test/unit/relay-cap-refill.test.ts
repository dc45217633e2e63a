// The relay's pace while the fairness cap holds rows back: a finish's room signal waits for more room
// (fewer, fuller passes, each counting the runs in flight once); a dispatch's signal never waits.
import { describe, expect, it } from 'vitest';
import { capRefillWaitMs } from '../../src/work/runtime/produce/relay.ts';

describe('capped relay refill', () => {
  it('a room signal while capped waits until 20 ms after the last pass began', () => {
    expect(capRefillWaitMs(true, 'any', 0)).toBe(20);
    expect(capRefillWaitMs(true, 'any', 5)).toBe(15);
    expect(capRefillWaitMs(true, 'any', 20)).toBe(0);
    expect(capRefillWaitMs(true, 'any', 45)).toBe(0);
  });

  it('a room signal after a pass whose held-back groups were alone waits until 40 ms after it began', () => {
    expect(capRefillWaitMs(true, 'any', 0, true)).toBe(40);
    expect(capRefillWaitMs(true, 'any', 25, true)).toBe(15);
    expect(capRefillWaitMs(true, 'any', 40, true)).toBe(0);
    expect(capRefillWaitMs(true, 'any', 25, false)).toBe(0);
    expect(capRefillWaitMs(true, 'recent', 1, true)).toBe(0);
    expect(capRefillWaitMs(true, null, 1, true)).toBe(0);
  });

  it("R-OBX-10 a dispatch's recent signal, a poll that timed out and an uncapped relay go at once", () => {
    expect(capRefillWaitMs(true, 'recent', 1)).toBe(0);
    expect(capRefillWaitMs(true, null, 1)).toBe(0);
    expect(capRefillWaitMs(false, 'any', 1)).toBe(0);
    expect(capRefillWaitMs(false, 'recent', 1)).toBe(0);
  });
});
