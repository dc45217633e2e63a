// The fairness benchmark's smoke mode runs inside the suite so the harness cannot rot: it must finish
// both modes, print its fixed-format lines and summary last, and find nothing lost or duplicated.
// Figures are not asserted: speed and latency are measured by `npm run bench -- fairness`.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '..', '..');

describe('bench fairness --smoke', () => {
  it('runs the burst and the victim tenant with fairness on and off and prints SUMMARY with nothing lost or duplicated', async () => {
    const child = spawn(process.execPath, ['bench/run.ts', 'fairness', '--smoke'], {
      cwd: root,
      env: { PATH: process.env.PATH, HOME: process.env.HOME },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (d) => (out += String(d)));
    child.stderr!.on('data', (d) => (out += String(d)));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code, out).toBe(0);
    const lines = out.trim().split('\n');
    expect(lines.some((l) => /^INTERVAL mode=fair t_s=\d+ a_done=\d+ b_done=\d+ b_p99_ms=(?:[\d.]+|nan) a_in_flight=\d+ count_ms=[\d.]+$/.test(l)), out).toBe(true);
    expect(lines.filter((l) => l.startsWith('MODE ')).map((l) => l.split(' ')[1])).toEqual(['mode=fair', 'mode=unfair']);
    expect(lines.at(-1)).toMatch(/^SUMMARY victim_p99_ms=[\d.]+ unfair_victim_p99_ms=[\d.]+ throughput_ratio=[\d.]+ lost=0 duplicated=0$/);
  }, 240_000);
});
