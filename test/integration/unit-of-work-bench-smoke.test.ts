// The unit-of-work benchmark's smoke mode runs inside the suite so it cannot rot: it must finish, find
// every run its units dispatched, and print its fixed-format summary last. Figures are not asserted:
// speed is measured by `npm run bench -- unit-of-work`, never by a timed test.
import { describe, expect, it } from 'vitest';
import { runBenchSmoke } from '../support/bench-smoke.ts';

describe('bench unit-of-work --smoke', () => {
  it('measures the sql.begin form and inUnitOfWork on one connection and prints INTERVAL, MODE and the SUMMARY line last', async () => {
    const { code, out, stdout } = await runBenchSmoke('unit-of-work');
    expect(code, out).toBe(0);
    const lines = stdout.trim().split('\n');
    expect(lines.filter((l) => /^INTERVAL mode=(begin|pipelined) round=1 t_s=[\d.]+ units=\d+ units_per_s=[\d.]+$/.test(l)).length).toBeGreaterThanOrEqual(2);
    expect(lines.filter((l) => l.startsWith('MODE ')).map((l) => l.split(' ')[1])).toEqual(['mode=begin', 'mode=pipelined']);
    expect(lines.filter((l) => /^MODE mode=\w+ round=1 units=300 us_per_unit=[\d.]+ pg_cpu_us_per_unit=[\d.]+$/.test(l))).toHaveLength(2);
    expect(lines.some((l) => l.startsWith('COUNT_MISMATCH'))).toBe(false);
    expect(lines.at(-1)).toMatch(/^SUMMARY begin_us_per_unit=[\d.]+ pipelined_us_per_unit=[\d.]+ ratio=[\d.]+ begin_pg_cpu_us=[\d.]+ pipelined_pg_cpu_us=[\d.]+$/);
  }, 180_000);
});
