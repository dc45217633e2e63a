// The default lone room of each queue (loneRoomsOf): what the units' slots hold at once, plus twice the cap.
import { describe, expect, it } from 'vitest';
import { loneRoomsOf } from '../../src/work/runtime/produce/tenant-inflight.ts';

const unit = (queue: string, concurrency: number, groupCommit = false) => ({ queue: queue as 'default', concurrency, groupCommit });

describe('the lone room per queue, from its units', () => {
  it('a queue of ordinary units: one message per slot, plus twice the cap (10 slots at cap 40: 90)', () => {
    expect(loneRoomsOf([unit('default', 10)], 40)).toEqual({ default: 90 });
    expect(loneRoomsOf([unit('default', 10)], 5)).toEqual({ default: 20 });
  });

  it('a groupCommit unit: 40 messages per slot (10 slots at cap 40: 480), summed with the other units of its queue', () => {
    expect(loneRoomsOf([unit('bulk', 10, true)], 40)).toEqual({ bulk: 480 });
    expect(loneRoomsOf([unit('bulk', 10, true), unit('bulk', 3), unit('critical', 2)], 40)).toEqual({ bulk: 483, critical: 82 });
  });

  it('a queue without units is absent (the relay gives it the cap only)', () => {
    expect(loneRoomsOf([], 40)).toEqual({});
    expect(Object.keys(loneRoomsOf([unit('default', 1)], 40))).toEqual(['default']);
  });
});
