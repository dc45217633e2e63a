// Pure arithmetic of the benchmark: percentiles, the median of repeated measurements, number
// formatting for the fixed-format lines. No I/O here, so it is unit tested (test/unit/bench-stats.test.ts).

/**
 * Percentile by linear interpolation between closest ranks (the same definition as numpy's default),
 * so p50 of [1, 2] is 1.5 and p100 is the maximum. NaN values are ignored; NaN when nothing is left.
 */
export function percentile(values: ArrayLike<number>, p: number): number {
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile must be within 0..100, got ${p}`);
  const sorted = Array.from(values).filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (b - a) * (rank - lo);
}

export interface Spread {
  median: number;
  min: number;
  max: number;
  /** How many measurements the spread summarises (NaN measurements excluded). */
  n: number;
}

/** Median with min and max of repeated measurements (each workload runs at least 3 times). */
export function spread(values: readonly number[]): Spread {
  const kept = values.filter((v) => !Number.isNaN(v));
  if (kept.length === 0) return { median: Number.NaN, min: Number.NaN, max: Number.NaN, n: 0 };
  return { median: percentile(kept, 50), min: Math.min(...kept), max: Math.max(...kept), n: kept.length };
}

/** A number for the fixed-format lines: fixed decimals, `nan` when not measured (never `NaN`/`Infinity`). */
export function num(value: number, decimals = 1): string {
  if (!Number.isFinite(value)) return 'nan';
  return value.toFixed(decimals);
}

/** `median (min–max)` for the Markdown table. */
export function spreadText(s: Spread, decimals = 1): string {
  if (s.n === 0) return 'n/a';
  if (s.n === 1) return num(s.median, decimals);
  return `${num(s.median, decimals)} (${num(s.min, decimals)}–${num(s.max, decimals)})`;
}

/** Ratio of a system's figure to ours; `n/a` when either side was not measured. */
export function ratio(value: number, ours: number): string {
  if (!Number.isFinite(value) || !Number.isFinite(ours) || ours === 0) return 'n/a';
  return `${(value / ours).toFixed(2)}×`;
}
