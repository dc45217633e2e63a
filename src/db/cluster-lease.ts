// Who may start and stop an embedded cluster, when several `svc` processes share one data directory
// (five `migrator deploy` at once, `npm start` and a `migrator status` beside it). Two mechanisms:
// - a lifecycle lock: an flock(2) on `<data dir>.lock`, held by a small `flock` helper process while one
//   process initialises, starts or stops the cluster; the kernel releases it when the holder dies, so a
//   crash never leaves it behind;
// - a lease: one file per user under `<data dir>.users/`, named by pid and process start time. The last
//   live user stops the cluster; a user that died (a crash, SIGKILL) is pruned, so its cluster is reclaimed
//   by the next user instead of running on forever.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CodedError } from '../errors/coded-error.ts';

/** How long a process waits for another one's start or stop of the same cluster. */
const LIFECYCLE_LOCK_TIMEOUT_MS = 120_000;

export class ClusterLeaseError extends CodedError {}

/** The process's start time from /proc (clock ticks since boot); '' where /proc is unavailable. */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name (which may contain spaces): state, ..., start time (22).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // A zombie has ended; only its parent's wait is missing (an orphan's parent may never reap it).
    if (fields[0] === 'Z') return undefined;
    return fields[19];
  } catch {
    if (!fs.existsSync('/proc/self/stat')) {
      try {
        process.kill(pid, 0);
        return '';
      } catch {
        return undefined;
      }
    }
    return undefined;
  }
}

/** True when the process `pid` that started at `startTime` still runs (a reused pid does not count). */
export function processAlive(pid: number, startTime: string): boolean {
  const now = processStartTime(pid);
  return now !== undefined && (now === startTime || now === '');
}

/** How a lock helper that did not take the lock ended. */
interface HelperEnd {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

/**
 * One `flock` helper waiting up to `waitSeconds` for the lock: 'locked' with its release, or how it
 * ended without the lock (its wait timed out, it was killed, or it failed).
 */
async function lockHelper(
  lockFile: string,
  waitSeconds: number,
): Promise<{ locked: () => Promise<void> } | { ended: HelperEnd } | { spawnError: Error }> {
  // -o: only `flock` holds the lock, so it ends with that process. Its stdin is a pipe from us: when we
  // exit (or are killed) `cat` reads end-of-file and the helper exits, releasing the lock.
  const holder = spawn('flock', ['-o', '-x', '-w', String(waitSeconds), lockFile, 'sh', '-c', 'echo locked; exec cat >/dev/null'], {
    stdio: ['pipe', 'pipe', 'pipe'],
    // Not in our process group: a terminal's Ctrl-C must not release the lock in the middle of a stop.
    detached: true,
  });
  let stderr = '';
  holder.stderr.on('data', (d: Buffer) => {
    if (stderr.length < 500) stderr += String(d);
  });
  const exited = new Promise<HelperEnd>((resolve) => holder.once('exit', (code, signal) => resolve({ code, signal, stderr: stderr.trim() })));
  const spawnError = new Promise<Error>((resolve) => holder.once('error', resolve));
  const locked = new Promise<void>((resolve) => holder.stdout.once('data', () => resolve()));
  const outcome = await Promise.race([locked.then(() => 'locked' as const), exited, spawnError]);
  if (outcome instanceof Error) return { spawnError: outcome };
  if (outcome !== 'locked') return { ended: outcome };
  // Held: the helper must not keep this process alive (it ends with us anyway).
  holder.unref();
  (holder.stdout as NodeJS.ReadableStream & { unref?: () => void }).unref?.();
  (holder.stderr as NodeJS.ReadableStream & { unref?: () => void }).unref?.();
  (holder.stdin as NodeJS.WritableStream & { unref?: () => void }).unref?.();
  return {
    locked: async () => {
      // Waiting for the helper to exit (and so the lock to be free) keeps this process alive again.
      holder.ref();
      holder.stdin.end();
      await exited;
    },
  };
}

/** `flock`'s exit status when its -w wait ran out. */
const FLOCK_TIMED_OUT = 1;

/**
 * Holds the lifecycle lock of `dataDir` until the returned function is called. Waits up to
 * LIFECYCLE_LOCK_TIMEOUT_MS for another holder; a helper killed while it waits is replaced within that
 * time, never reported as a holder that kept the lock, and a helper that fails is reported as it failed.
 */
export async function lockLifecycle(dataDir: string, log: (line: string) => void): Promise<() => Promise<void>> {
  const lockFile = `${dataDir}.lock`;
  fs.mkdirSync(path.dirname(lockFile), { recursive: true });
  const started = Date.now();
  const deadline = started + LIFECYCLE_LOCK_TIMEOUT_MS;
  let waitingSaid = false;
  const waiting = setTimeout(() => {
    waitingSaid = true;
    log(`waiting for another process starting or stopping the PostgreSQL cluster of ${dataDir}`);
  }, 1000);
  try {
    for (;;) {
      const waitSeconds = Math.max(1, Math.ceil((deadline - Date.now()) / 1000));
      const attempt = await lockHelper(lockFile, waitSeconds);
      if ('locked' in attempt) {
        if (waitingSaid) log('lock acquired');
        return attempt.locked;
      }
      if ('spawnError' in attempt) {
        throw new ClusterLeaseError('EMBEDDED_PG_LOCK', `cannot lock ${lockFile}: the \`flock\` command (util-linux) is needed: ${attempt.spawnError.message}`);
      }
      const { code, signal, stderr } = attempt.ended;
      const waitedS = Math.round((Date.now() - started) / 1000);
      // Killed from outside while it waited: another helper takes over the rest of the wait.
      if (signal !== null && Date.now() < deadline) {
        log(`the helper waiting for ${lockFile} was ended by ${signal} after ${waitedS} s; waiting again`);
        continue;
      }
      if (code === FLOCK_TIMED_OUT || signal !== null) {
        throw new ClusterLeaseError(
          'EMBEDDED_PG_LOCK_TIMEOUT',
          `another process held ${lockFile} for ${waitedS} s while starting or stopping the cluster; retry, or stop that process`,
        );
      }
      // Any other exit is flock's own failure (the lock file cannot be opened, …): waiting again would not mend it.
      throw new ClusterLeaseError('EMBEDDED_PG_LOCK', `cannot lock ${lockFile}: flock exited with ${code}${stderr ? `: ${stderr}` : ''}`);
    }
  } finally {
    clearTimeout(waiting);
  }
}

/** The lease directory of `dataDir`: one file per live user. */
function usersDir(dataDir: string): string {
  return `${dataDir}.users`;
}

/** Removes the lease files of users that no longer run; returns the live ones. Call under the lock. */
export function liveUsers(dataDir: string): string[] {
  const dir = usersDir(dataDir);
  if (!fs.existsSync(dir)) return [];
  const live: string[] = [];
  for (const name of fs.readdirSync(dir)) {
    const [pid, startTime] = name.split('-');
    if (pid && startTime !== undefined && processAlive(Number(pid), startTime)) live.push(name);
    else fs.rmSync(path.join(dir, name), { force: true });
  }
  return live;
}

let leaseSequence = 0;

/** Records this process as a user of the cluster; returns its lease name. Call under the lock. */
export function addUser(dataDir: string): string {
  fs.mkdirSync(usersDir(dataDir), { recursive: true });
  const name = `${process.pid}-${processStartTime(process.pid) ?? ''}-${++leaseSequence}`;
  fs.writeFileSync(path.join(usersDir(dataDir), name), '');
  return name;
}

/** Removes a lease. Call under the lock. */
export function removeUser(dataDir: string, lease: string): void {
  fs.rmSync(path.join(usersDir(dataDir), lease), { force: true });
}
