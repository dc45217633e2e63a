// CPU time of another process, read from /proc/<pid>/stat: what a test measures of a child it started
// (a worker process that must be idle while it waits), never of itself.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';

let ticksPerSecond: number | undefined;

function clockTicksPerSecond(): number {
  if (ticksPerSecond === undefined) {
    const n = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim());
    ticksPerSecond = Number.isInteger(n) && n > 0 ? n : 100;
  }
  return ticksPerSecond;
}

/** Seconds of CPU (user + system) the process `pid` has used so far. */
export function cpuSeconds(pid: number): number {
  const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command may hold spaces and parentheses: the fields start after the last ')', at field 3 (state).
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[14 - 3]);
  const stime = Number(fields[15 - 3]);
  return (utime + stime) / clockTicksPerSecond();
}
