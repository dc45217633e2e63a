// Pure pieces of the peers benchmark (bench/peers/): percentile and spread arithmetic, the count
// verifier, /proc/<pid>/stat parsing, option parsing and the fixed-format lines. No services.
import { describe, expect, it } from 'vitest';
import { parseProcStat } from '../../bench/peers/cpu.ts';
import { OptionsError, parsePeersOptions, scaleForCeiling } from '../../bench/peers/options.ts';
import { countMismatchLine, intervalLine, niceMax, renderMarkdown, renderSvg, summarize, summaryLine, type RoundResult } from '../../bench/peers/report.ts';
import { num, percentile, ratio, spread } from '../../bench/peers/stats.ts';
import { RoundTally, TallyBook, wallOffset } from '../../bench/peers/tally.ts';

const round = (over: Partial<RoundResult>): RoundResult => ({
  system: 'ours',
  workload: 'burn',
  round: 1,
  jobs: 100,
  jobsPerS: 100,
  enqueuePerS: 1000,
  p50Ms: Number.NaN,
  p95Ms: Number.NaN,
  p99Ms: Number.NaN,
  cpuPer1000: 1,
  lost: 0,
  duplicated: 0,
  unexpected: 0,
  timedOut: false,
  ...over,
});

describe('bench stats', () => {
  it('percentile interpolates between closest ranks and ignores NaN', () => {
    expect(percentile([1, 2], 50)).toBe(1.5);
    expect(percentile([5, 1, 3], 50)).toBe(3);
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 99)).toBeCloseTo(9.91, 10);
    expect(percentile([1, Number.NaN, 3], 100)).toBe(3);
    expect(percentile([], 50)).toBeNaN();
    expect(() => percentile([1], 101)).toThrow(RangeError);
  });

  it('spread gives median, min and max of repeated measurements', () => {
    expect(spread([30, 10, 20])).toEqual({ median: 20, min: 10, max: 30, n: 3 });
    expect(spread([Number.NaN]).n).toBe(0);
  });

  it('num never prints NaN or Infinity in a fixed-format line', () => {
    expect(num(Number.NaN)).toBe('nan');
    expect(num(Number.POSITIVE_INFINITY)).toBe('nan');
    expect(num(1.26, 1)).toBe('1.3');
    expect(ratio(50, 100)).toBe('0.50×');
    expect(ratio(50, Number.NaN)).toBe('n/a');
  });

  it('niceMax rounds an axis up to 1, 2 or 5 times a power of ten', () => {
    expect(niceMax(7)).toBe(10);
    expect(niceMax(1234)).toBe(2000);
    expect(niceMax(0)).toBe(1);
  });
});

describe('bench wall clock', () => {
  it('the harness clock follows a wall clock stepped since the process started: its offset is taken where the integer wall clock ticks', () => {
    for (const skew of [-9.3, 4.7, 0.25]) {
      // A monotonic clock read every 3 µs, and an integer wall clock `skew` ms off it (a VM clock stepped or slewed).
      let mono = 1_000_000.0004;
      const readMono = () => (mono += 0.003);
      const readWall = () => Math.floor(mono + skew);
      expect(Math.abs(wallOffset(readWall, readMono) - skew)).toBeLessThan(0.01);
    }
  });
});

describe('bench count verifier', () => {
  it('counts losses, duplicates and foreign sequence numbers', () => {
    const tally = new RoundTally(1, 4);
    tally.start({ s: 0, t: 0 }, 5);
    tally.start({ s: 1, t: 0 }, 6);
    tally.start({ s: 1, t: 0 }, 9);
    tally.start({ s: 2, t: 1 }, 7);
    tally.start({ s: 9, t: 0 }, 7);
    const v = tally.verdict();
    expect(v).toEqual({ enqueued: 4, completed: 3, lost: 1, duplicated: 1, unexpected: 1 });
    // The first start of a job is its latency; a duplicate does not overwrite it.
    expect(tally.latencyMs[1]).toBe(6);
    expect(tally.latencyMs[2]).toBe(6);
  });

  it('counts jobs the store never marked complete as lost', () => {
    const tally = new RoundTally(1, 2);
    tally.start({ s: 0, t: 0 });
    tally.start({ s: 1, t: 0 });
    expect(tally.verdict(1).lost).toBe(1);
  });

  it('attributes a late execution to its own round and counts strays', () => {
    const book = new TallyBook();
    const a = book.open(2);
    const b = book.open(2);
    book.start({ r: a.round, s: 0, t: 0 });
    book.start({ r: b.round, s: 0, t: 0 });
    book.start({ r: a.round, s: 0, t: 0 });
    book.start({ r: 99, s: 0, t: 0 });
    expect(a.verdict().duplicated).toBe(1);
    expect(b.verdict().duplicated).toBe(0);
    expect(book.strays).toBe(1);
  });
});

describe('bench CPU accounting', () => {
  it('parses /proc/<pid>/stat with spaces and parentheses in the command', () => {
    const line = '4242 (postgres: a (b) c) S 100 4242 4242 0 -1 4194560 1 0 0 0 150 50 7 3 20 0 1 0 1000 1 1';
    expect(parseProcStat(line)).toEqual({ pid: 4242, ppid: 100, ticks: 210 });
  });
});

describe('bench options', () => {
  it('defaults to the full measurement and shrinks everything in smoke mode', () => {
    const full = parsePeersOptions([]);
    expect(full).toMatchObject({ jobs: 50_000, rounds: 3, concurrency: 10, outDir: 'bench/results' });
    expect(full.systems).toContain('ours');
    const smoke = parsePeersOptions(['--smoke', '--systems', 'bullmq,pg-boss']);
    expect(smoke).toMatchObject({ smoke: true, jobs: 300, rounds: 1, systems: ['bullmq', 'pg-boss'] });
  });

  it('refuses unknown systems, options and non-positive numbers', () => {
    expect(() => parsePeersOptions(['--systems', 'sidekiq'])).toThrow(OptionsError);
    expect(() => parsePeersOptions(['--jobs', '0'])).toThrow(/positive integer/);
    expect(() => parsePeersOptions(['--frobnicate'])).toThrow(/unknown option/);
    expect(() => parsePeersOptions(['--steady-seconds', '2', '--steady-warmup-seconds', '3'])).toThrow(OptionsError);
  });

  it('scales a system capped by its design to bounded rounds', () => {
    expect(scaleForCeiling(undefined, { jobs: 100, effectJobs: 50, rate: 200 }, 30).scaled).toBe(false);
    expect(scaleForCeiling(5, { jobs: 50_000, effectJobs: 10_000, rate: 200 }, 30)).toEqual({
      jobs: 150,
      effectJobs: 150,
      rate: 2.5,
      scaled: true,
    });
  });
});

describe('bench report', () => {
  const results: RoundResult[] = [
    round({ round: 0, jobsPerS: 1, lost: 1 }),
    round({ round: 1, jobsPerS: 100 }),
    round({ round: 2, jobsPerS: 300 }),
    round({ round: 3, jobsPerS: 200 }),
    round({ workload: 'steady', p50Ms: 4, p95Ms: 8, p99Ms: 10 }),
    round({ system: 'bullmq', jobsPerS: 1000, duplicated: 2 }),
  ];

  it('summarises medians of measured rounds and counts every loss, warm-up included', () => {
    const s = summarize('ours', true, results);
    expect(s.burn).toEqual({ median: 200, min: 100, max: 300, n: 3 });
    expect(s.p50.median).toBe(4);
    expect(s.lost).toBe(1);
    expect(summaryLine(s)).toBe('SUMMARY system=ours jobs_per_s=200.0 p50_ms=4.00 p99_ms=10.00 lost=1 duplicated=0');
    expect(summaryLine(summarize('bullmq', false, results))).toBe(
      'SUMMARY system=bullmq jobs_per_s=1000.0 p50_ms=nan p99_ms=nan lost=0 duplicated=2',
    );
  });

  it('prints interval lines in a fixed format', () => {
    expect(intervalLine({ system: 'pg-boss', workload: 'burn', round: 2, tS: 3.04, done: 1200, rate: 401.25 })).toBe(
      'INTERVAL system=pg-boss workload=burn round=2 t_s=3.0 done=1200 rate=401.3',
    );
  });

  it('renders the Markdown table with the ratio to ours and a well-formed SVG', () => {
    const systems = [
      { name: 'ours', durable: true, settings: 'x' },
      { name: 'bullmq', durable: false, settings: 'y | z' },
    ];
    const md = renderMarkdown({
      date: '2026-01-01',
      smoke: false,
      machine: { nproc: 2, memoryGiB: 4, cpuModel: 'cpu', kernel: 'k', node: 'v26', postgres: '18.4', redis: '7', load1: 0 },
      concurrency: 10,
      rounds: 3,
      burnJobs: 100,
      effectJobs: 10,
      steadyRate: 10,
      steadySeconds: 2,
      steadyWarmupSeconds: 1,
      systems,
      results,
      plotFile: 'p.svg',
      notes: [],
    });
    expect(md).toContain('| ours | yes | 200.0 (100.0–300.0) | 4.00 | 10.00 | 1.000 (1.000–1.000) | 1.00× | 1 | 0 |');
    expect(md).toContain('| bullmq | no (ceiling) | 1000.0 |');
    expect(md).toContain('5.00×');
    expect(md).toContain('y \\| z');
    const svg = renderSvg(systems, results, 'title <&>');
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('title &lt;&amp;&gt;');
    expect(svg.match(/<rect/g)?.length).toBeGreaterThan(3);
  });
});

describe('bench work options', () => {
  it('smoke mode is small and explicit options override it', async () => {
    const { parseWorkOptions } = await import('../../bench/work.ts');
    expect(parseWorkOptions(['--smoke'])).toMatchObject({ runs: 200, rounds: 1, rate: 50 });
    expect(parseWorkOptions(['--runs', '1000', '--rate', '300'])).toMatchObject({ runs: 1000, rate: 300, rounds: 3 });
    expect(() => parseWorkOptions(['--runs', '-1'])).toThrow(/BENCH_BAD_OPTION/);
  });
});

describe('countMismatchLine', () => {
  it('names a round that lost (unexpected included) or duplicated jobs, and stays silent otherwise', () => {
    const base = { system: 'ours', workload: 'burn', round: 1, lost: 0, unexpected: 0, duplicated: 0, timedOut: false } as unknown as RoundResult;
    expect(countMismatchLine(base)).toBeUndefined();
    expect(countMismatchLine({ ...base, lost: 1, unexpected: 2 })).toBe('COUNT_MISMATCH system=ours workload=burn round=1 lost=3 duplicated=0');
    expect(countMismatchLine({ ...base, duplicated: 1, timedOut: true })).toBe(
      'COUNT_MISMATCH system=ours workload=burn round=1 lost=0 duplicated=1 (drain timed out)',
    );
  });
});
