// Command-line options of `npm run bench -- peers`. Pure (unit tested).

export const ALL_SYSTEMS = ['ours', 'ours-group', 'graphile-worker', 'graphile-worker-batched', 'pg-boss', 'pg-boss-default', 'bullmq'] as const;
export type SystemName = (typeof ALL_SYSTEMS)[number];

export interface PeersOptions {
  smoke: boolean;
  systems: SystemName[];
  /** (a) burn-down job count. */
  jobs: number;
  /** (c) effect workload job count. */
  effectJobs: number;
  /** Jobs one worker process may run at once, the same for every system. */
  concurrency: number;
  /** Measured rounds per workload and system (warm-up excluded). */
  rounds: number;
  /** (b) producer rate in jobs/s, its duration and the excluded warm-up at its start. */
  rate: number;
  steadySeconds: number;
  steadyWarmupSeconds: number;
  /** Drain deadline of one round. */
  timeoutSeconds: number;
  /** Where the Markdown and SVG go. */
  outDir: string;
  help: boolean;
}

export const USAGE = `usage: npm run bench -- peers [--smoke] [options]
  --smoke                    a few hundred jobs per system, one round (under a minute); results go to dist/bench/results
  --systems a,b,...          subset of: ${ALL_SYSTEMS.join(', ')} (default: all)
  --jobs N                   burn-down jobs (default 50000; smoke 300)
  --effect-jobs N            effect-workload jobs (default 10000; smoke 200)
  --concurrency N            jobs at once per system (default 10)
  --rounds N                 measured rounds per workload (default 3; smoke 1)
  --rate N                   steady producer rate, jobs/s (default 200; smoke 100)
  --steady-seconds N         steady duration (default 20; smoke 2)
  --steady-warmup-seconds N  excluded start of the steady run (default 3; smoke 0.5)
  --timeout-seconds N        drain deadline per round (default 900; smoke 20)
  --out DIR                  results directory (default bench/results; smoke dist/bench/results)`;

export class OptionsError extends Error {
  readonly code = 'BENCH_BAD_OPTION';
}

export function parsePeersOptions(args: readonly string[]): PeersOptions {
  const smoke = args.includes('--smoke');
  const o: PeersOptions = {
    smoke,
    systems: [...ALL_SYSTEMS],
    jobs: smoke ? 300 : 50_000,
    effectJobs: smoke ? 200 : 10_000,
    concurrency: 10,
    rounds: smoke ? 1 : 3,
    rate: smoke ? 100 : 200,
    steadySeconds: smoke ? 2 : 20,
    steadyWarmupSeconds: smoke ? 0.5 : 3,
    timeoutSeconds: smoke ? 20 : 900,
    outDir: smoke ? 'dist/bench/results' : 'bench/results',
    help: false,
  };
  const positive = (flag: string, value: string | undefined, integer = true): number => {
    const n = Number(value);
    if (value === undefined || !Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
      throw new OptionsError(`${flag} needs a positive ${integer ? 'integer' : 'number'}, got ${value ?? 'nothing'}`);
    }
    return n;
  };
  for (let i = 0; i < args.length; i++) {
    const flag = args[i] as string;
    const value = () => args[++i];
    switch (flag) {
      case '--smoke':
        break;
      case '--help':
      case '-h':
        o.help = true;
        break;
      case '--systems': {
        const names = (value() ?? '').split(',').map((s) => s.trim()).filter(Boolean);
        const unknown = names.filter((n) => !(ALL_SYSTEMS as readonly string[]).includes(n));
        if (names.length === 0 || unknown.length > 0) {
          throw new OptionsError(`--systems takes a comma list of ${ALL_SYSTEMS.join(', ')}; unknown: ${unknown.join(', ') || '(empty)'}`);
        }
        o.systems = [...new Set(names)] as SystemName[];
        break;
      }
      case '--jobs':
        o.jobs = positive(flag, value());
        break;
      case '--effect-jobs':
        o.effectJobs = positive(flag, value());
        break;
      case '--concurrency':
        o.concurrency = positive(flag, value());
        break;
      case '--rounds':
        o.rounds = positive(flag, value());
        break;
      case '--rate':
        o.rate = positive(flag, value(), false);
        break;
      case '--steady-seconds':
        o.steadySeconds = positive(flag, value(), false);
        break;
      case '--steady-warmup-seconds':
        o.steadyWarmupSeconds = positive(flag, value(), false);
        break;
      case '--timeout-seconds':
        o.timeoutSeconds = positive(flag, value(), false);
        break;
      case '--out':
        o.outDir = value() ?? o.outDir;
        break;
      default:
        throw new OptionsError(`unknown option ${flag}\n${USAGE}`);
    }
  }
  if (o.steadyWarmupSeconds >= o.steadySeconds) {
    throw new OptionsError('--steady-warmup-seconds must be shorter than --steady-seconds');
  }
  return o;
}

/**
 * Job count and rate for a system whose documented design caps it far below the machine (pg-boss
 * defaults: one fetch per 2 s polling interval per worker): a burst sized to about `burstSeconds` of
 * its ceiling and a steady rate of half its ceiling, so every round still ends and is verified.
 */
export function scaleForCeiling(
  ceiling: number | undefined,
  wanted: { jobs: number; effectJobs: number; rate: number },
  burstSeconds: number,
): { jobs: number; effectJobs: number; rate: number; scaled: boolean } {
  if (ceiling === undefined || !Number.isFinite(ceiling)) return { ...wanted, scaled: false };
  const cap = Math.max(1, Math.ceil(ceiling * burstSeconds));
  const jobs = Math.min(wanted.jobs, cap);
  const effectJobs = Math.min(wanted.effectJobs, cap);
  const rate = Math.min(wanted.rate, ceiling / 2);
  return { jobs, effectJobs, rate, scaled: jobs !== wanted.jobs || effectJobs !== wanted.effectJobs || rate !== wanted.rate };
}
