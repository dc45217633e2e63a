// The relay's pace while the fairness cap holds rows back: a finish's room signal waits for more room
// (fewer, fuller passes, each counting the runs in flight once); a dispatch's signal never waits.
import { describe, expect, it } from 'vitest';
import { capRefillWaitMs, waitForRefill } from '../../src/work/runtime/produce/relay.ts';
import type { WakeSignal } from '../../src/kv/wake.ts';

// What a pass reports (relayPass): held back in the tenant outbox, with or without every group alone.
const capped = { cappedScopes: ['tenant' as const] };
const cappedLone = { cappedScopes: ['tenant' as const], cappedLone: true };
const uncapped = { cappedScopes: [] };

describe('capped relay refill', () => {
  it('a room signal while capped waits until 20 ms after the last pass began', () => {
    expect(capRefillWaitMs(capped, 'any', 0)).toBe(20);
    expect(capRefillWaitMs(capped, 'any', 5)).toBe(15);
    expect(capRefillWaitMs(capped, 'any', 20)).toBe(0);
    expect(capRefillWaitMs(capped, 'any', 45)).toBe(0);
  });

  it('a room signal after a pass whose held-back groups were alone waits until 40 ms after it began', () => {
    expect(capRefillWaitMs(cappedLone, 'any', 0)).toBe(40);
    expect(capRefillWaitMs(cappedLone, 'any', 25)).toBe(15);
    expect(capRefillWaitMs(cappedLone, 'any', 40)).toBe(0);
    expect(capRefillWaitMs(capped, 'any', 25)).toBe(0);
    expect(capRefillWaitMs(cappedLone, 'recent', 1)).toBe(0);
    expect(capRefillWaitMs(cappedLone, null, 1)).toBe(0);
  });

  it("R-OBX-10 a dispatch's recent signal, a poll that timed out and an uncapped relay go at once", () => {
    expect(capRefillWaitMs(capped, 'recent', 1)).toBe(0);
    expect(capRefillWaitMs(capped, null, 1)).toBe(0);
    expect(capRefillWaitMs(uncapped, 'any', 1)).toBe(0);
    expect(capRefillWaitMs(uncapped, 'recent', 1)).toBe(0);
    // A pass that failed reported nothing held back.
    expect(capRefillWaitMs(null, 'any', 1)).toBe(0);
  });

  it("a dispatch's recent signal that comes during the refill wait ends it at once; room signals do not", async () => {
    // A fake clock: each listen spends what it is given, or 5 ms when a signal answers it.
    let t = 0;
    const listenTo = (answers: Array<WakeSignal | null>) => {
      const asked: number[] = [];
      const listen = async (ms: number) => {
        asked.push(ms);
        const answer = answers.shift() ?? null;
        t += answer === null ? ms : 5;
        return answer;
      };
      return { listen, asked };
    };
    const now = () => t;

    const recent = listenTo(['any', 'recent']);
    expect(await waitForRefill(40, recent.listen, now)).toBe(true);
    expect(recent.asked).toEqual([40, 35]);

    const rooms = listenTo(['any', 'any', 'any']);
    t = 0;
    expect(await waitForRefill(20, rooms.listen, now)).toBe(false);
    expect(rooms.asked).toEqual([20, 15, 10, 5]);
    expect(t).toBe(20);

    const quiet = listenTo([]);
    t = 0;
    expect(await waitForRefill(40, quiet.listen, now)).toBe(false);
    expect(quiet.asked).toEqual([40]);
  });
});
