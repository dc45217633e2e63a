// A Node child process run to its end on this Node (the project's Node 26), its output captured, and
// bounded: past `timeoutMs` it is SIGKILLed (code null, `timedOut` true). Used by the tests that run
// the `svc` CLI or a fixture script in a process of their own.
import { spawn } from 'node:child_process';

export interface NodeProcessResult {
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

export function runNodeProcess(
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<NodeProcessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...args], { cwd: options.cwd, env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, options.timeoutMs ?? 60_000);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, timedOut });
    });
  });
}

/**
 * The bound for a CLI that type-checks (`svc tasks check`): seconds on an idle machine, minutes when
 * both cores are busy, which the suite must survive.
 */
export const TYPECHECK_CLI_TIMEOUT_MS = 240_000;
