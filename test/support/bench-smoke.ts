// Runs `npm run bench -- <name> --smoke` as its own process (Node 26, the project root) and returns its
// exit code with what it printed, so a test can check the benchmark's fixed-format lines.
import { spawn } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..', '..');

export interface BenchSmoke {
  code: number | null;
  /** stdout and stderr interleaved (for failure messages). */
  out: string;
  /** stdout only: the benchmark's own lines. */
  stdout: string;
}

export async function runBenchSmoke(name: string): Promise<BenchSmoke> {
  const child = spawn(process.execPath, ['bench/run.ts', name, '--smoke'], {
    cwd: root,
    env: { PATH: process.env.PATH, HOME: process.env.HOME },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let stdout = '';
  child.stdout.on('data', (d) => {
    out += String(d);
    stdout += String(d);
  });
  child.stderr.on('data', (d) => (out += String(d)));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, out, stdout };
}
