// The size of a JSON value as the jsonb CHECKs measure it (octet_length(x::jsonb::text)), and the
// trail detail fitting that limit. The integration test worker-transitions compares with PostgreSQL.
import { describe, expect, it } from 'vitest';
import { jsonbText, jsonbTextBytes } from '../../src/db/jsonb-text.ts';
import { fitDetail } from '../../src/work/runtime/consume/runner.ts';

describe('jsonb text size', () => {
  it('R-RUN-09 R-TRL-05 renders as PostgreSQL does: a space after every colon and comma, numbers without exponent', () => {
    expect(jsonbText({ a: 1, b: [1, 2, { c: 'x' }] })).toBe('{"a": 1, "b": [1, 2, {"c": "x"}]}');
    expect(jsonbText({})).toBe('{}');
    expect(jsonbText({ e: [] })).toBe('{"e": []}');
    expect(jsonbText({ small: 1.5e-7, big: 1e21, neg: -2.5e-3, n: -1.25e22 })).toBe(
      '{"small": 0.00000015, "big": 1000000000000000000000, "neg": -0.0025, "n": -12500000000000000000000}',
    );
    expect(jsonbText({ s: 'é\n"', u: undefined, d: new Date(0) })).toBe('{"s": "é\\n\\"", "d": "1970-01-01T00:00:00.000Z"}');
    expect(jsonbTextBytes({ s: 'é' })).toBe(Buffer.byteLength('{"s": "é"}'));
  });

  it('R-TRL-05 fitDetail keeps a detail under 2048 bytes as jsonb text even when its compact JSON already fits', () => {
    // 200 short members: ~1.8 KB compact, ~2.2 KB as jsonb text.
    const detail = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`k${String(i).padStart(3, '0')}`, 1]));
    expect(Buffer.byteLength(JSON.stringify(detail))).toBeLessThanOrEqual(2048);
    expect(jsonbTextBytes(detail)).toBeGreaterThan(2048);
    expect(jsonbTextBytes(fitDetail(detail))).toBeLessThanOrEqual(2048);
    // A detail that fits either way is left as it is.
    expect(fitDetail({ message: 'short' })).toEqual({ message: 'short' });
  });
});
