// The benchmarks' command lines: `--smoke` plus `--<flag> <positive number>` pairs mapped onto an options
// object. One parser, so every benchmark refuses a bad flag the same way (BENCH_BAD_OPTION and its usage).

/** Sets `target[keys[flag]]` for each `--flag n` of `args`; throws BENCH_BAD_OPTION naming the flag otherwise. */
export function applyNumericFlags<T extends object>(
  args: readonly string[],
  keys: Record<string, keyof T>,
  target: T,
  usage: string,
  options: { integers: boolean },
): void {
  for (let i = 0; i < args.length; i++) {
    const flag = args[i] as string;
    if (flag === '--smoke') continue;
    const key = keys[flag];
    const n = Number(args[i + 1]);
    if (!key || !(n > 0) || (options.integers && !Number.isInteger(n))) throw new Error(`BENCH_BAD_OPTION: ${flag} ${args[i + 1] ?? ''}\n${usage}`);
    (target as Record<keyof T, unknown>)[key] = n;
    i += 1;
  }
}
