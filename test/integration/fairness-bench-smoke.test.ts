// The fairness benchmark's smoke mode runs inside the suite so the harness cannot rot: it must finish
// both modes, print its fixed-format lines and summary last, and find nothing lost or duplicated.
// Figures are not asserted: speed and latency are measured by `npm run bench -- fairness`.
import { describe, expect, it } from 'vitest';
import { runBenchSmoke } from '../support/bench-smoke.ts';

describe('bench fairness --smoke', () => {
  it('runs the burst with and without a second tenant with fairness on, and with it off, the lone burst and fairness off in turns, and prints SUMMARY with nothing lost or duplicated', async () => {
    const { code, out } = await runBenchSmoke('fairness');
    expect(code, out).toBe(0);
    const lines = out.trim().split('\n');
    expect(lines.some((l) => /^INTERVAL mode=fair t_s=\d+ a_done=\d+ b_done=\d+ b_p99_ms=(?:[\d.]+|nan) a_in_flight=\d+ count_ms=[\d.]+$/.test(l)), out).toBe(true);
    // Fair with a second tenant, then fairness off and fair with the burst alone (the work-conserving case) in turns, three and two.
    expect(lines.filter((l) => l.startsWith('MODE ')).map((l) => l.split(' ')[1])).toEqual(['mode=fair', 'mode=unfair', 'mode=lone', 'mode=unfair', 'mode=lone', 'mode=unfair']);
    expect(lines.at(-1)).toMatch(
      /^SUMMARY victim_p99_ms=[\d.]+ unfair_victim_p99_ms=[\d.]+ throughput_ratio=[\d.]+ lone_throughput_ratio=[\d.]+ lone_cpu_ratio=[\d.]+ lost=0 duplicated=0$/,
    );
  }, 240_000);
});
