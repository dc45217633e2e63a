import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bodyBytes, MAX_BATCH_BYTES, MAX_BATCH_ENTRIES, packBatches } from '../../src/queue/batch.ts';

/** The spec's relay batch limits (R-OBX-13), written out so a drifting constant fails here. */
const SPEC_BATCH_BYTES = 256 * 1024; // 262144
const SPEC_BATCH_ENTRIES = 10;

describe('packBatches', () => {
  it('R-OBX-13 puts at most 10 entries in a call', () => {
    const items = Array.from({ length: 25 }, (_, i) => i);
    const { batches } = packBatches(items, () => 100);
    expect(batches.map((b) => b.length)).toEqual([10, 10, 5]);
    expect(batches.flat()).toEqual(items);
  });

  it('R-OBX-13 keeps each call within 256 KiB', () => {
    const size = 100_000;
    const { batches } = packBatches([1, 2, 3, 4, 5], () => size);
    expect(batches.map((b) => b.length)).toEqual([2, 2, 1]);
  });

  it('R-OBX-13 the limits are the spec\'s: 10 entries and 256 KiB (262144 bytes) per call', () => {
    expect([MAX_BATCH_ENTRIES, MAX_BATCH_BYTES]).toEqual([SPEC_BATCH_ENTRIES, 262_144]);
    expect(SPEC_BATCH_BYTES).toBe(262_144);
  });

  it('R-OBX-13 fills a call exactly to 262144 bytes, not one byte more', () => {
    const { batches } = packBatches([1, 2], () => 131_072);
    expect(batches).toEqual([[1, 2]]);
    const over = packBatches([1, 2], (i) => (i === 1 ? 131_072 : 131_073));
    expect(over.batches).toEqual([[1], [2]]);
    expect(packBatches(['whole'], () => 262_144)).toEqual({ batches: [['whole']], oversized: [] });
    expect(packBatches(['over'], () => 262_145)).toEqual({ batches: [], oversized: ['over'] });
  });

  it('sets aside an item that alone exceeds the byte limit', () => {
    const { batches, oversized } = packBatches(['a', 'big', 'b'], (s) => (s === 'big' ? SPEC_BATCH_BYTES + 1 : 10));
    expect(batches).toEqual([['a', 'b']]);
    expect(oversized).toEqual(['big']);
  });

  it('returns no batch for no items and refuses non-positive limits', () => {
    expect(packBatches([], () => 1)).toEqual({ batches: [], oversized: [] });
    expect(() => packBatches([1], () => 1, { maxEntries: 0 })).toThrow(RangeError);
  });

  it('counts UTF-8 bytes, not characters', () => {
    expect(bodyBytes('é')).toBe(2);
    expect(bodyBytes('€')).toBe(3);
  });

  it('R-OBX-13 any input: every item kept once, in order, each batch within both limits', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: SPEC_BATCH_BYTES + 1000 }), { maxLength: 60 }),
        fc.integer({ min: 1, max: SPEC_BATCH_ENTRIES }),
        (sizes, maxEntries) => {
          const items = sizes.map((size, index) => ({ size, index }));
          const { batches, oversized } = packBatches(items, (i) => i.size, { maxEntries });
          for (const b of batches) {
            expect(b.length).toBeGreaterThan(0);
            expect(b.length).toBeLessThanOrEqual(maxEntries);
            expect(b.reduce((n, i) => n + i.size, 0)).toBeLessThanOrEqual(SPEC_BATCH_BYTES);
          }
          const kept = batches.flat();
          expect(kept.map((i) => i.index)).toEqual(items.filter((i) => i.size <= SPEC_BATCH_BYTES).map((i) => i.index));
          expect(oversized.every((i) => i.size > SPEC_BATCH_BYTES)).toBe(true);
          expect(kept.length + oversized.length).toBe(items.length);
        },
      ),
    );
  });
});
