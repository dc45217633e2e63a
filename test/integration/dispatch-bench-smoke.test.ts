// The dispatch benchmark's smoke mode runs inside the suite so it cannot rot: it must finish, find
// every run, event and outbox row it wrote, and print its fixed-format summary last. Figures are not
// asserted: speed is measured by `npm run bench -- dispatch`, never by a timed test.
import { describe, expect, it } from 'vitest';
import { runBenchSmoke } from '../support/bench-smoke.ts';

describe('bench dispatch --smoke', () => {
  it('measures single, bulk, unique and debounced dispatch on one database and prints INTERVAL, MODE and the SUMMARY line last', async () => {
    const { code, out, stdout } = await runBenchSmoke('dispatch');
    expect(code, out).toBe(0);
    const lines = stdout.trim().split('\n');
    expect(lines.filter((l) => /^INTERVAL mode=(single|bulk|unique|debounce) round=1 t_s=[\d.]+ runs=\d+ runs_per_s=[\d.]+$/.test(l)).length).toBeGreaterThanOrEqual(2);
    expect(lines.filter((l) => l.startsWith('MODE ')).map((l) => l.split(' ')[1])).toEqual(['mode=single', 'mode=bulk', 'mode=unique', 'mode=debounce']);
    // What the unique and debounce options cost per dispatch, against a plain one in the same run.
    for (const option of ['unique', 'debounce']) {
      expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^OPTION option=${option} runs_per_s=[\\d.]+ us_per_run=[\\d.]+ extra_us_per_run=-?[\\d.]+$`)));
    }
    expect(lines.some((l) => l.startsWith('COUNT_MISMATCH'))).toBe(false);
    expect(lines.at(-1)).toMatch(/^SUMMARY single_runs_per_s=[\d.]+ bulk_runs_per_s=[\d.]+ ratio=[\d.]+$/);
  }, 180_000);
});
