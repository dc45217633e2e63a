// The results of one invocation: fixed-format lines, the Markdown page and the SVG plot. Pure
// functions of the measured rounds (unit tested), so a reader of bench/results/ sees exactly what
// the harness computed.
import type { Machine } from './machine.ts';
import { num, percentile, ratio, spread, spreadText, type Spread } from './stats.ts';
import type { Workload } from './system.ts';

export interface RoundResult {
  system: string;
  workload: Workload;
  /** 0 for the warm-up round (verified, not part of the medians). */
  round: number;
  jobs: number;
  /** burn/effect: jobs / (last completion − first start); steady: completed / production time. */
  jobsPerS: number;
  /** Jobs per second of the bulk enqueue (burn/effect only). */
  enqueuePerS: number;
  /** Enqueue-to-start latencies (steady only, warm-up seconds excluded). */
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  /** CPU seconds per 1,000 jobs over the drain (this process + servers + the system's processes). */
  cpuPer1000: number;
  lost: number;
  duplicated: number;
  unexpected: number;
  timedOut: boolean;
  /** Steady workload: the producer's rate in jobs/s. */
  rate?: number;
  /** Steady workload: how many of the first jobs (the warm-up) the latency figures leave out. */
  warmup?: number;
}

export interface SystemInfo {
  name: string;
  durable: boolean;
  settings: string;
  /** Why the job count or rate was reduced for this system, when it was. */
  scaled?: string;
}

export interface SystemSummary {
  name: string;
  durable: boolean;
  burn: Spread;
  effect: Spread;
  p50: Spread;
  p95: Spread;
  p99: Spread;
  cpuPer1000: Spread;
  lost: number;
  duplicated: number;
}

export function summarize(name: string, durable: boolean, rounds: readonly RoundResult[]): SystemSummary {
  const mine = rounds.filter((r) => r.system === name);
  const measured = (w: Workload) => mine.filter((r) => r.workload === w && r.round > 0);
  return {
    name,
    durable,
    burn: spread(measured('burn').map((r) => r.jobsPerS)),
    effect: spread(measured('effect').map((r) => r.jobsPerS)),
    p50: spread(measured('steady').map((r) => r.p50Ms)),
    p95: spread(measured('steady').map((r) => r.p95Ms)),
    p99: spread(measured('steady').map((r) => r.p99Ms)),
    cpuPer1000: spread(measured('burn').map((r) => r.cpuPer1000)),
    // Every run counts, warm-up included: a loss is a loss.
    lost: mine.reduce((n, r) => n + r.lost + r.unexpected, 0),
    duplicated: mine.reduce((n, r) => n + r.duplicated, 0),
  };
}

export function intervalLine(f: {
  system: string;
  workload: Workload;
  round: number;
  tS: number;
  done: number;
  rate: number;
}): string {
  return `INTERVAL system=${f.system} workload=${f.workload} round=${f.round} t_s=${num(f.tS, 1)} done=${f.done} rate=${num(f.rate, 1)}`;
}

export function roundLine(r: RoundResult): string {
  return (
    `ROUND system=${r.system} workload=${r.workload} round=${r.round} jobs=${r.jobs} jobs_per_s=${num(r.jobsPerS)} ` +
    `p50_ms=${num(r.p50Ms, 2)} p99_ms=${num(r.p99Ms, 2)} cpu_s_per_1000=${num(r.cpuPer1000, 3)} ` +
    `lost=${r.lost + r.unexpected} duplicated=${r.duplicated}${r.timedOut ? ' timed_out=1' : ''}`
  );
}

/** The COUNT_MISMATCH line of a round that lost or duplicated a job (lost includes unexpected), else undefined. */
export function countMismatchLine(r: RoundResult): string | undefined {
  const lost = r.lost + r.unexpected;
  if (lost === 0 && r.duplicated === 0) return undefined;
  return `COUNT_MISMATCH system=${r.system} workload=${r.workload} round=${r.round} lost=${lost} duplicated=${r.duplicated}${r.timedOut ? ' (drain timed out)' : ''}`;
}

export function summaryLine(s: SystemSummary): string {
  return (
    `SUMMARY system=${s.name} jobs_per_s=${num(s.burn.median)} p50_ms=${num(s.p50.median, 2)} ` +
    `p99_ms=${num(s.p99.median, 2)} lost=${s.lost} duplicated=${s.duplicated}`
  );
}

export interface ReportInput {
  date: string;
  smoke: boolean;
  machine: Machine;
  concurrency: number;
  rounds: number;
  burnJobs: number;
  effectJobs: number;
  steadyRate: number;
  steadySeconds: number;
  steadyWarmupSeconds: number;
  systems: readonly SystemInfo[];
  results: readonly RoundResult[];
  plotFile: string;
  notes: readonly string[];
}

function esc(text: string): string {
  return text.replaceAll('|', '\\|');
}

export function renderMarkdown(input: ReportInput): string {
  const summaries = input.systems.map((s) => summarize(s.name, s.durable, input.results));
  const ours = summaries.find((s) => s.name === 'ours');
  const m = input.machine;
  const lines: string[] = [];
  lines.push(`# Peers benchmark, ${input.date}${input.smoke ? ' (smoke: too small to compare, only proves the harness runs)' : ''}`);
  lines.push('');
  lines.push('Produced by `npm run bench -- peers` (bench/peers/). Every system ran in the same invocation, on the');
  lines.push('same machine, against the same PostgreSQL 18 cluster and the same Redis server.');
  lines.push('');
  lines.push('## Machine');
  lines.push('');
  lines.push('| nproc | memory | CPU | kernel | Node | PostgreSQL | Redis | load (1 min) at start |');
  lines.push('| --- | --- | --- | --- | --- | --- | --- | --- |');
  lines.push(`| ${m.nproc} | ${m.memoryGiB} GiB | ${esc(m.cpuModel)} | ${esc(m.kernel)} | ${m.node} | ${esc(m.postgres)} | ${esc(m.redis)} | ${m.load1} |`);
  lines.push('');
  lines.push('## Results');
  lines.push('');
  lines.push(`![throughput and latency per system](${input.plotFile})`);
  lines.push('');
  lines.push('Median of the measured rounds with (min–max). jobs/s: burn-down (a). p50/p99: enqueue-to-start latency of the');
  lines.push('steady workload (b). CPU: CPU seconds per 1,000 jobs of the burn-down. Ratio: the system\'s burn-down jobs/s divided');
  lines.push('by ours.');
  lines.push('');
  lines.push('| system | durable | jobs/s | p50 ms | p99 ms | CPU s / 1,000 jobs | ratio to ours | lost | duplicated |');
  lines.push('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const s of summaries) {
    lines.push(
      `| ${s.name} | ${s.durable ? 'yes' : 'no (ceiling)'} | ${spreadText(s.burn)} | ${spreadText(s.p50, 2)} | ${spreadText(s.p99, 2)} | ` +
        `${spreadText(s.cpuPer1000, 3)} | ${ratio(s.burn.median, ours?.burn.median ?? Number.NaN)} | ${s.lost} | ${s.duplicated} |`,
    );
  }
  lines.push('');
  lines.push('| system | effect workload (c) jobs/s | steady p95 ms | bulk enqueue jobs/s |');
  lines.push('| --- | --- | --- | --- |');
  for (const s of summaries) {
    const enqueue = spread(
      input.results.filter((r) => r.system === s.name && r.workload === 'burn' && r.round > 0).map((r) => r.enqueuePerS),
    );
    lines.push(`| ${s.name} | ${spreadText(s.effect)} | ${spreadText(s.p95, 2)} | ${spreadText(enqueue, 0)} |`);
  }
  lines.push('');
  lines.push('## Workloads and method');
  lines.push('');
  lines.push(`- Concurrency: **${input.concurrency}** jobs at once per system (each adapter maps it to its own knob, see Settings).`);
  lines.push(`- (a) burn-down: enqueue ${input.burnJobs.toLocaleString('en')} no-op jobs with the system's bulk API while no worker runs, then start the workers and drain. jobs/s = jobs / (moment the system's store reports every job complete − first job start), so worker boot time is excluded.`);
  lines.push(`- (b) steady: workers running, one producer enqueues one job at a time at ${input.steadyRate} jobs/s for ${input.steadySeconds} s; latency = handler start − instant just before the enqueue call; the first ${input.steadyWarmupSeconds} s are warm-up and excluded.`);
  lines.push(`- (c) effect: like (a) with ${input.effectJobs.toLocaleString('en')} jobs whose handler inserts one row into \`bench_effects\` inside the job's transaction where the system has one (pg-boss \`transactional\`, ours: the run's effect transaction); graphile-worker and BullMQ commit it in a transaction of its own. Rows are counted per job at the end: exactly one each.`);
  lines.push(`- Each workload runs ${input.rounds} measured round(s) per system after one verified warm-up burn-down; rounds are interleaved across systems (round 1 of every system, then round 2, ...) so drifting background load hits all alike.`);
  lines.push('- `ANALYZE` runs on every PostgreSQL system\'s tables (peers and ours) after each bulk enqueue, before the drain, so a stale planner estimate after a burst does not slow anyone down.');
  lines.push('- Counts are verified after every round (warm-up included): each enqueued job must have started exactly once, be complete in the system\'s own store, and (c) have exactly one effect row. A loss or duplicate prints a `COUNT_MISMATCH` line and the harness exits non-zero.');
  lines.push('- CPU: this process (in-process workers and producers, the embedded SQS server) by `process.cpuUsage`, plus the PostgreSQL postmaster and all its backends, the Redis server and the system\'s own worker processes, from `/proc/<pid>/stat` (own + reaped children time), sampled at the start and end of the drain.');
  for (const note of input.notes) lines.push(`- ${note}`);
  lines.push('');
  lines.push('## Settings');
  lines.push('');
  lines.push('| system | settings |');
  lines.push('| --- | --- |');
  for (const s of input.systems) lines.push(`| ${s.name} | ${esc(s.settings)}${s.scaled ? ` **Scaled:** ${esc(s.scaled)}` : ''} |`);
  lines.push('');
  lines.push('## Every round');
  lines.push('');
  lines.push('| system | workload | round | jobs | jobs/s | p50 ms | p95 ms | p99 ms | CPU s / 1,000 | lost | duplicated |');
  lines.push('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const r of input.results) {
    lines.push(
      `| ${r.system} | ${r.workload}${r.rate ? ` @${r.rate}/s` : ''} | ${r.round === 0 ? 'warm-up' : r.round} | ${r.jobs} | ${num(r.jobsPerS)} | ` +
        `${num(r.p50Ms, 2)} | ${num(r.p95Ms, 2)} | ${num(r.p99Ms, 2)} | ${num(r.cpuPer1000, 3)} | ${r.lost + r.unexpected} | ${r.duplicated}${r.timedOut ? ' (timed out)' : ''} |`,
    );
  }
  lines.push('');
  return lines.join('\n');
}

const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#9c755f'];

function xmlEsc(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
}

/** Rounded-up axis maximum: 1, 2 or 5 times a power of ten. */
export function niceMax(value: number): number {
  if (!(value > 0) || !Number.isFinite(value)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

/**
 * Three panels: burn-down and effect throughput (linear, bar = median, whisker = min–max) and steady
 * latency p50/p95/p99 (logarithmic: the fastest and slowest systems differ by orders of magnitude).
 */
export function renderSvg(systems: readonly SystemInfo[], results: readonly RoundResult[], title: string): string {
  const summaries = systems.map((s) => summarize(s.name, s.durable, results));
  const labelW = 190;
  const plotW = 520;
  const rowH = 26;
  const panelGap = 56;
  const width = labelW + plotW + 90;
  const parts: string[] = [];
  let y = 40;
  const colour = (i: number) => PALETTE[i % PALETTE.length] as string;

  const throughputPanel = (heading: string, pick: (s: SystemSummary) => Spread) => {
    const max = niceMax(Math.max(...summaries.map((s) => (Number.isFinite(pick(s).max) ? pick(s).max : 0))));
    parts.push(`<text x="10" y="${y}" class="h">${xmlEsc(heading)}</text>`);
    y += 14;
    const top = y;
    summaries.forEach((s, i) => {
      const v = pick(s);
      const rowY = top + i * rowH;
      parts.push(`<text x="${labelW - 8}" y="${rowY + 15}" class="l" text-anchor="end">${xmlEsc(s.name)}</text>`);
      if (!Number.isFinite(v.median)) {
        parts.push(`<text x="${labelW + 4}" y="${rowY + 15}" class="v">not measured</text>`);
        return;
      }
      const w = (v.median / max) * plotW;
      parts.push(`<rect x="${labelW}" y="${rowY + 3}" width="${w.toFixed(1)}" height="${rowH - 8}" fill="${colour(i)}"${s.durable ? '' : ' fill-opacity="0.45"'}/>`);
      if (v.n > 1) {
        const x1 = labelW + (v.min / max) * plotW;
        const x2 = labelW + (v.max / max) * plotW;
        const cy = rowY + rowH / 2 - 1;
        parts.push(`<path d="M${x1.toFixed(1)} ${cy}H${x2.toFixed(1)}M${x1.toFixed(1)} ${cy - 5}v10M${x2.toFixed(1)} ${cy - 5}v10" class="w"/>`);
      }
      parts.push(`<text x="${(labelW + Math.max(w, (v.max / max) * plotW) + 6).toFixed(1)}" y="${rowY + 15}" class="v">${num(v.median, 0)}</text>`);
    });
    const bottom = top + summaries.length * rowH;
    parts.push(`<path d="M${labelW} ${top}V${bottom}H${labelW + plotW}" class="a"/>`);
    for (let k = 0; k <= 4; k++) {
      const x = labelW + (k / 4) * plotW;
      parts.push(`<text x="${x}" y="${bottom + 14}" class="t" text-anchor="middle">${num((max * k) / 4, 0)}</text>`);
    }
    y = bottom + panelGap;
  };

  const latencyPanel = () => {
    const values = summaries.flatMap((s) => [s.p50.median, s.p95.median, s.p99.median]).filter((v) => Number.isFinite(v) && v > 0);
    const lo = 10 ** Math.floor(Math.log10(Math.max(0.01, Math.min(...values, 1))));
    const hi = 10 ** Math.ceil(Math.log10(Math.max(...values, 10)));
    const scale = (v: number) => ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * plotW;
    parts.push(`<text x="10" y="${y}" class="h">Steady enqueue-to-start latency, ms (log scale): p50 solid, p95 and p99 lighter</text>`);
    y += 14;
    const top = y;
    const subH = 7;
    summaries.forEach((s, i) => {
      const rowY = top + i * rowH;
      parts.push(`<text x="${labelW - 8}" y="${rowY + 15}" class="l" text-anchor="end">${xmlEsc(s.name)}</text>`);
      if (!Number.isFinite(s.p50.median)) {
        parts.push(`<text x="${labelW + 4}" y="${rowY + 15}" class="v">not measured</text>`);
        return;
      }
      const bars: Array<[number, number]> = [
        [s.p50.median, 1],
        [s.p95.median, 0.6],
        [s.p99.median, 0.35],
      ];
      bars.forEach(([v, opacity], k) => {
        if (!Number.isFinite(v)) return;
        parts.push(`<rect x="${labelW}" y="${rowY + 2 + k * subH}" width="${scale(v).toFixed(1)}" height="${subH - 1}" fill="${colour(i)}" fill-opacity="${opacity}"/>`);
      });
      parts.push(`<text x="${(labelW + scale(s.p99.median) + 6).toFixed(1)}" y="${rowY + 15}" class="v">${num(s.p50.median, 1)} / ${num(s.p95.median, 1)} / ${num(s.p99.median, 1)}</text>`);
    });
    const bottom = top + summaries.length * rowH;
    parts.push(`<path d="M${labelW} ${top}V${bottom}H${labelW + plotW}" class="a"/>`);
    for (let e = Math.log10(lo); e <= Math.log10(hi) + 1e-9; e++) {
      const v = 10 ** e;
      parts.push(`<text x="${(labelW + scale(v)).toFixed(1)}" y="${bottom + 14}" class="t" text-anchor="middle">${v >= 1 ? v.toFixed(0) : v.toString()}</text>`);
    }
    y = bottom + 30;
  };

  throughputPanel('(a) Burn-down throughput, jobs/s (median, whiskers min–max; pale = not durable)', (s) => s.burn);
  throughputPanel('(c) Effect workload throughput, jobs/s (one database write per job)', (s) => s.effect);
  latencyPanel();
  const height = y + 10;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">`,
    '<style>.h{font-size:13px;font-weight:bold}.l{font-size:12px}.v{font-size:11px;fill:#333}.t{font-size:10px;fill:#555}.a{stroke:#333;fill:none}.w{stroke:#111;stroke-width:1.2;fill:none}</style>',
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="10" y="20" font-size="15" font-weight="bold">${xmlEsc(title)}</text>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}

/** Latency percentiles (ms) of a steady round. */
export function latencyPercentiles(latencies: readonly number[]): { p50: number; p95: number; p99: number } {
  return { p50: percentile(latencies, 50), p95: percentile(latencies, 95), p99: percentile(latencies, 99) };
}
