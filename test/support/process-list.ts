// The machine's processes as /proc lists them: a test looks for the helper, server or command it
// expects to be running (or gone) by its command line.
import fs from 'node:fs';

/** Pids of the processes whose command line (argv) `matches`; a process that ends while being read is skipped. */
export function pidsWhere(matches: (argv: string[]) => boolean): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let argv: string[];
    try {
      argv = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    if (matches(argv)) pids.push(Number(entry));
  }
  return pids;
}
