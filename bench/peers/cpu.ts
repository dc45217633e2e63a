// CPU time spent by everything a system needs: this process (in-process workers, producers, the
// embedded SQS server) through process.cpuUsage, plus other processes read from /proc/<pid>/stat:
// the PostgreSQL postmaster and all its children, the Redis server, and spawned worker processes.
//
// A backend that exits between two samples is not lost: the postmaster reaps it, so its time moves
// into the postmaster's cutime/cstime. Summing a process's own and reaped-children time over the whole
// process tree therefore only grows.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    const out = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim();
    const n = Number(out);
    ticksPerSecond = Number.isInteger(n) && n > 0 ? n : 100;
  }
  return ticksPerSecond;
}

interface ProcStat {
  pid: number;
  ppid: number;
  /** utime + stime + cutime + cstime, in clock ticks. */
  ticks: number;
}

/** Parses /proc/<pid>/stat (the command may contain spaces and parentheses: split after the last ')'). */
export function parseProcStat(text: string): ProcStat | undefined {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 0 || close < 0) return undefined;
  const pid = Number(text.slice(0, open).trim());
  // Fields after the command, numbered from 3 (state) in proc(5).
  const rest = text.slice(close + 2).split(' ');
  const field = (n: number) => Number(rest[n - 3]);
  const ticks = field(14) + field(15) + field(16) + field(17);
  if (!Number.isFinite(ticks)) return undefined;
  return { pid, ppid: field(4), ticks };
}

function readStat(pid: number): ProcStat | undefined {
  try {
    return parseProcStat(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

function allStats(): ProcStat[] {
  const stats: ProcStat[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const s = readStat(Number(name));
    if (s) stats.push(s);
  }
  return stats;
}

/** CPU seconds of the given processes and all their descendants (own + reaped children). */
export function treeCpuSeconds(roots: readonly number[]): number {
  if (roots.length === 0) return 0;
  const stats = allStats();
  const children = new Map<number, ProcStat[]>();
  for (const s of stats) {
    const list = children.get(s.ppid) ?? [];
    list.push(s);
    children.set(s.ppid, list);
  }
  const byPid = new Map(stats.map((s) => [s.pid, s]));
  let ticks = 0;
  const seen = new Set<number>();
  const stack = [...roots];
  while (stack.length > 0) {
    const pid = stack.pop() as number;
    if (seen.has(pid)) continue;
    seen.add(pid);
    const s = byPid.get(pid);
    if (s) ticks += s.ticks;
    for (const c of children.get(pid) ?? []) stack.push(c.pid);
  }
  return ticks / clockTicks();
}

/** This process's CPU seconds (user + system), including in-process worker code and servers. */
export function selfCpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/** PID of the postmaster of a data directory (first line of postmaster.pid). */
export function postmasterPid(dataDir: string): number | undefined {
  try {
    const pid = Number(fs.readFileSync(`${dataDir}/postmaster.pid`, 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** PID of the `redis-server` listening on the given loopback port (found by its command line). */
export function redisServerPid(port: number): number | undefined {
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (cmd.startsWith('redis-server') && cmd.includes(`:${port}`)) return Number(name);
    } catch {
      // The process ended while we looked.
    }
  }
  return undefined;
}

/** A short label of a process: its command name, plus BENCH_ROLE for the bench's own node processes. */
export function processLabel(pid: number): string {
  let label = `pid${pid}`;
  try {
    label = fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() || label;
    const role = /(?:^|\0)BENCH_ROLE=([a-z]+)/.exec(fs.readFileSync(`/proc/${pid}/environ`, 'utf8'))?.[1];
    if (role) label = `ours-${role}`;
  } catch {
    // Gone, or not ours to read: the command name (or pid) will do.
  }
  return label;
}

/** A CPU meter over this process plus a set of external process trees. */
export class CpuMeter {
  private readonly roots: () => readonly number[];
  private startSelf = 0;
  private startTree = 0;
  private startPerRoot = new Map<number, number>();

  constructor(externalRoots: () => readonly number[]) {
    this.roots = externalRoots;
  }

  begin(): void {
    this.startSelf = selfCpuSeconds();
    this.startTree = treeCpuSeconds(this.roots());
    this.startPerRoot = new Map(this.roots().map((pid) => [pid, treeCpuSeconds([pid])]));
  }

  /** CPU seconds since begin() per external tree, labelled (a profile of where the CPU went). */
  breakdown(): Array<{ label: string; seconds: number }> {
    return this.roots().map((pid) => ({
      label: processLabel(pid),
      seconds: Math.max(0, treeCpuSeconds([pid]) - (this.startPerRoot.get(pid) ?? 0)),
    }));
  }

  /** CPU seconds since begin(): this process, and the external trees. */
  end(): { self: number; external: number; total: number } {
    const self = selfCpuSeconds() - this.startSelf;
    const external = Math.max(0, treeCpuSeconds(this.roots()) - this.startTree);
    return { self, external, total: self + external };
  }
}
