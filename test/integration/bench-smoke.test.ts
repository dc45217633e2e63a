// The work benchmark's smoke mode runs inside the suite so the benchmark cannot rot: it must finish,
// print its fixed-format summary last, and find nothing lost or duplicated. Figures are not asserted:
// speed is measured by `npm run bench`, never by a timed test.
import { describe, expect, it } from 'vitest';
import { runBenchSmoke } from '../support/bench-smoke.ts';

describe('bench work --smoke', () => {
  it('runs dispatch → relay → SQS → workers end to end with a default unit, then with group commit, and prints SUMMARY with nothing lost or duplicated', async () => {
    const { code, out } = await runBenchSmoke('work');
    expect(code, out).toBe(0);
    // The raw hop through both clients (the service's own, which baseline_ratio divides by, and the
    // plain SDK the first figures used), each with the hop's CPU per message.
    for (const client of ['direct', 'sdk']) {
      expect(out).toMatch(new RegExp(`^BASELINE round=1 client=${client} messages=\\d+ messages_per_s=[\\d.]+ cpu_ms_per_message=[\\d.]+ lost=0 duplicated=0$`, 'm'));
    }
    expect(out).toMatch(/^BASELINES direct_messages_per_s=[\d.]+ sdk_messages_per_s=[\d.]+ ratio_to_sdk=[\d.]+$/m);
    // Where the steady round's runs spent their time, read from the trail: every run past the warm-up
    // (2 s at 50 runs/s, the first 0.5 s skipped), each step's median no earlier than the one before.
    // `queued` compares the harness's clock with the database's, so only it may come out at or below 0.
    const chain = out.match(/^# STEADY_CHAIN round=1 runs=(\d+) queued_ms=(\S+) sent_ms=(\S+) received_ms=(\S+) started_ms=(\S+) succeeded_ms=(\S+)$/m);
    expect(chain, out).not.toBeNull();
    expect(Number(chain![1])).toBe(75);
    const steps = chain!.slice(2).map(Number);
    for (const step of steps) expect(Number.isFinite(step), chain![0]).toBe(true);
    for (let i = 1; i < steps.length; i++) expect(steps[i], `step ${i}: ${chain![0]}`).toBeGreaterThanOrEqual(steps[i - 1]!);
    // The slowest hundredth of the same runs (at least one of 75), in at least one 100 ms window and at most
    // one per run, its median start no earlier than the whole round's.
    const tail = out.match(/^# STEADY_TAIL round=1 runs=(\d+) windows_100ms=(\d+) queued_ms=(\S+) sent_ms=(\S+) received_ms=(\S+) started_ms=(\S+)$/m);
    expect(tail, out).not.toBeNull();
    const [tailRuns, windows] = [Number(tail![1]), Number(tail![2])];
    expect(tailRuns).toBeGreaterThanOrEqual(1);
    expect(windows).toBeGreaterThanOrEqual(1);
    expect(windows).toBeLessThanOrEqual(tailRuns);
    expect(Number(tail![6]), tail![0]).toBeGreaterThanOrEqual(steps[3]!);
    // The steady round's GC pauses, per process: the harness (producer and SQS server) may not collect in
    // 2 s; the workers process allocates a few hundred KB per run, so 100 runs fill its young generation.
    const gcField = String.raw`scavenges=(\d+) scavenge_p50_ms=(\S+) scavenge_max_ms=(\S+) major=(\d+) major_max_ms=(\S+) gc_ms=([\d.]+)`;
    expect(out, 'harness GC line').toMatch(new RegExp(`^# STEADY_GC round=1 process=harness ${gcField}$`, 'm'));
    const workersGc = out.match(new RegExp(`^# STEADY_GC round=1 process=workers ${gcField}$`, 'm'));
    expect(workersGc, out).not.toBeNull();
    const [scavenges, p50, max, gcMs] = [Number(workersGc![1]), Number(workersGc![2]), Number(workersGc![3]), Number(workersGc![6])];
    expect(scavenges, workersGc![0]).toBeGreaterThanOrEqual(1);
    expect(p50, workersGc![0]).toBeGreaterThan(0);
    expect(max, workersGc![0]).toBeGreaterThanOrEqual(p50);
    expect(gcMs, workersGc![0]).toBeGreaterThanOrEqual(max);
    // The same rounds with the opt-in group commit, reported beside the default unit under their own name.
    expect(out).toMatch(/^ROUND system=ours-group workload=burn round=1 /m);
    expect(out).toMatch(/^ROUND system=ours-group workload=steady round=1 /m);
    expect(out).toMatch(/^MODE system=ours-group runs_per_s=[\d.]+ p50_ms=[\d.]+ p99_ms=[\d.]+ cpu_ms_per_run=[\d.]+ lost=0 duplicated=0$/m);
    // SUMMARY reports the default unit (the first system's rounds), never the group-commit one.
    expect(out.indexOf('ROUND system=ours workload=burn round=1 ')).toBeLessThan(out.indexOf('ROUND system=ours-group '));
    const last = out.trim().split('\n').at(-1)!;
    expect(last).toMatch(
      /^SUMMARY runs_per_s=[\d.]+ p50_ms=[\d.]+ p99_ms=[\d.]+ lost=0 duplicated=0 baseline_ratio=[\d.]+ cpu_ms_per_run=[\d.]+$/,
    );
  }, 180_000);
});
