// The embedded cluster's lifecycle lock (src/db/cluster-lease.ts) under faults of its `flock` helper.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { lockLifecycle } from '../../src/db/cluster-lease.ts';
import { pidsWhere } from '../support/process-list.ts';
import { waitFor, within } from '../support/wait-for.ts';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Pids of the `flock` processes locking `lockFile` (holders and waiters). */
function flockPids(lockFile: string): number[] {
  return pidsWhere((argv) => path.basename(argv[0] ?? '') === 'flock' && argv.includes(lockFile));
}

describe('cluster lifecycle lock', () => {
  it('R-EXE-05 a helper killed while it waits for the lock is replaced: the lock is taken once its holder lets go, never reported as held for 120 s', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-lease-test-'));
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    const dataDir = path.join(dir, 'pg');
    const lockFile = `${dataDir}.lock`;

    const releaseFirst = await lockLifecycle(dataDir, () => {});
    const holders = flockPids(lockFile);
    expect(holders).toHaveLength(1);
    const lines: string[] = [];
    let settled: 'locked' | Error | undefined;
    const second = lockLifecycle(dataDir, (line) => lines.push(line)).then(
      (release) => {
        settled = 'locked';
        return release;
      },
      (error: Error) => {
        settled = error;
        throw error;
      },
    );
    second.catch(() => {});
    // The fault: the second process's helper dies while it waits (killed from outside).
    let waiter: number | undefined;
    await waitFor(() => (waiter = flockPids(lockFile).find((pid) => !holders.includes(pid))) !== undefined, 10_000, { what: 'the waiting flock helper' });
    process.kill(waiter!, 'SIGKILL');
    await waitFor(() => lines.some((l) => /was ended by SIGKILL/.test(l)), 10_000, { what: 'the helper’s end logged' });
    // Still waiting for the first holder, not failed.
    expect(settled).toBeUndefined();

    await releaseFirst();
    const releaseSecond = await second;
    expect(settled).toBe('locked');
    expect(flockPids(lockFile)).toHaveLength(1);
    await releaseSecond();
    expect(flockPids(lockFile)).toHaveLength(0);
  }, 60_000);

  it('R-EXE-05 a helper that fails (its lock file cannot be created) is reported at once with flock’s own exit, not waited on for 120 s', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-lease-test-'));
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    const dataDir = path.join(dir, 'pg');
    // The fault: the lock file's path is a link into a directory that does not exist, which flock cannot open.
    fs.symlinkSync(path.join(dir, 'missing', 'pg.lock'), `${dataDir}.lock`);
    const failed = await within(lockLifecycle(dataDir, () => {}).then(() => null, (error: unknown) => error), 10_000, 'the failing helper reported');
    expect(failed).toMatchObject({ code: 'EMBEDDED_PG_LOCK' });
    expect((failed as Error).message).toMatch(/flock exited with \d+/);
  }, 30_000);
});
