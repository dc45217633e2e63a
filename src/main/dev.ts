// `svc dev` (npm start): the whole service on one machine with embedded defaults. Emits the build
// artifacts, starts PostgreSQL 18 (persistent under SVC_DATA_DIR, default .data/), finds Redis at
// REDIS_URL (when set it must answer; unset, the default one or a private redis-server), runs the
// in-memory SQS-protocol server on loopback, runs `migrator deploy` and the DevSeeder (a development
// tenant, whose uid it prints), then the API (port 3000) and one
// workers process (all four queues, relay, local scheduler, health on 8081), both on loopback, as child
// processes. Ctrl-C drains and stops everything; a second Ctrl-C stops without waiting for the drain, but
// still stops every service. What a crashed launcher left running is reclaimed by the next start
// (its state file under SVC_DATA_DIR, and the embedded cluster's lease).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { emitAll, DIST_DIR, PROJECT_ROOT } from './emit.ts';
import { watchUnitFiles, type UnitWatch } from './dev-unit-watch.ts';
import { WORKERS_NODE_FLAGS } from './workers-node-flags.ts';
import { resolveDatabase } from '../db/connect.ts';
import { startRedisServer, redisServerInstalled } from '../kv/redis-server.ts';
import { startLocalSqsServer } from '../queue/local-sqs-server.ts';
import { createSqsClient } from '../queue/client.ts';
import { provisionQueues } from '../queue/provision.ts';
import { CodedError } from '../errors/coded-error.ts';
import { processAlive, processStartTime } from '../db/cluster-lease.ts';
import { writeDevStackState } from '../config/dev-stack.ts';

/** Development bootstrap operator, used only when the variables are unset (documented in the README). */
export const DEV_BOOTSTRAP = {
  PLATFORM_BOOTSTRAP_USERNAME: 'admin',
  PLATFORM_BOOTSTRAP_PASSWORD: 'dev-only-password-change-me',
  PLATFORM_BOOTSTRAP_EMAIL: 'admin@localhost.test',
  PLATFORM_BOOTSTRAP_NAME: 'Local administrator',
};

const log = (line: string) => console.log(`[dev] ${line}`);

class DevError extends CodedError {}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Where a Redis URL points: its host name (never `host`, which carries the port) and port. */
export function redisEndpoint(url: string): { host: string; port: number; tls: boolean } {
  const u = new URL(url);
  return {
    host: u.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1',
    port: Number(u.port || 6379),
    tls: u.protocol === 'rediss:',
  };
}

async function redisAnswers(url: string): Promise<boolean> {
  const { host, port, tls } = redisEndpoint(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    // Over TLS a plain PING means nothing: a connection is the answer.
    socket.once('connect', () => (tls ? done(true) : socket.write('PING\r\n')));
    socket.once('data', (d) => done(d.toString().startsWith('+PONG') || d.toString().startsWith('-NOAUTH')));
  });
}

const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
const redact = (url: string) => url.replace(/\/\/[^@/]*@/, '//***@');

interface DevRedis {
  url: string;
  /** Pid of the private redis-server, when one was started. */
  pid?: number;
  stop(): Promise<void>;
}

/**
 * A REDIS_URL the user set is used or refused, never silently replaced: a private Redis would hide that
 * their Redis is down or misaddressed. Unset, the default Redis is used when it answers, otherwise a
 * private redis-server (SVC_DEV_PRIVATE_REDIS=true asks for one always).
 */
async function ensureRedis(env: NodeJS.ProcessEnv): Promise<DevRedis> {
  const configured = env.REDIS_URL || undefined;
  const wantPrivate = env.SVC_DEV_PRIVATE_REDIS === 'true';
  if (!wantPrivate) {
    const url = configured ?? DEFAULT_REDIS_URL;
    if (await redisAnswers(url)) {
      log(`using the Redis at ${configured ? 'REDIS_URL' : 'the default address'} (${redact(url)})`);
      return { url, async stop() {} };
    }
    if (configured) {
      const { host, port } = redisEndpoint(configured);
      throw new DevError(
        'REDIS_UNREACHABLE',
        `nothing answers at REDIS_URL (${host}:${port}); start that Redis or correct REDIS_URL, or unset it and npm start uses ${DEFAULT_REDIS_URL} or runs a private redis-server`,
      );
    }
  }
  if (!redisServerInstalled()) {
    throw new DevError(
      'REDIS_SERVER_MISSING',
      wantPrivate
        ? 'SVC_DEV_PRIVATE_REDIS=true needs redis-server, which is not installed: install it (apt-get install redis-server) or unset SVC_DEV_PRIVATE_REDIS'
        : `nothing answers at ${DEFAULT_REDIS_URL} and redis-server is not installed: install it (apt-get install redis-server) or set REDIS_URL to a running Redis`,
    );
  }
  const server = await startRedisServer();
  log(`${wantPrivate ? 'SVC_DEV_PRIVATE_REDIS=true' : `nothing answered at ${DEFAULT_REDIS_URL}`}; started a private redis-server on ${server.url}`);
  return { url: server.url, pid: server.pid, stop: () => server.stop() };
}

interface LauncherState {
  pid: number;
  start: string;
  processes: Array<{ name: string; pid: number; start: string }>;
}

/**
 * The launcher's state file under SVC_DATA_DIR: its own pid and the processes it started (private Redis,
 * migrator, API, workers), so the next start finds what a crashed launcher left and stops it.
 */
class LauncherStateFile {
  readonly file: string;
  #state: LauncherState;
  constructor(dataDir: string) {
    this.file = path.join(dataDir, 'dev-launcher.json');
    this.#state = { pid: process.pid, start: processStartTime(process.pid) ?? '', processes: [] };
  }

  /** Refuses when another launcher runs on the data directory; stops what a dead one left. */
  async reclaim(): Promise<void> {
    let previous: LauncherState | undefined;
    try {
      previous = JSON.parse(fs.readFileSync(this.file, 'utf8')) as LauncherState;
    } catch {
      previous = undefined;
    }
    if (previous && processAlive(previous.pid, previous.start)) {
      throw new DevError(
        'DEV_ALREADY_RUNNING',
        `npm start is already running on this data directory (pid ${previous.pid}); stop it first, or set SVC_DATA_DIR to another directory`,
      );
    }
    const left = (previous?.processes ?? []).filter((p) => processAlive(p.pid, p.start));
    for (const p of left) {
      log(`stopping the ${p.name} (pid ${p.pid}) a crashed run left running`);
      try {
        process.kill(p.pid, 'SIGTERM');
      } catch {}
    }
    const gone = async (ms: number) => {
      const deadline = Date.now() + ms;
      while (left.some((p) => processAlive(p.pid, p.start)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    };
    // Their own stop budget to drain, then SIGKILL, and wait until the kernel let go of their ports.
    await gone(Number(process.env.SVC_STOP_TIMEOUT_MS ?? 30_000) + 5_000);
    for (const p of left) {
      if (processAlive(p.pid, p.start)) {
        try {
          process.kill(p.pid, 'SIGKILL');
        } catch {}
      }
    }
    await gone(10_000);
    this.#write();
  }

  add(name: string, pid: number | undefined): void {
    if (!pid) return;
    this.#state.processes.push({ name, pid, start: processStartTime(pid) ?? '' });
    this.#write();
  }

  remove(): void {
    fs.rmSync(this.file, { force: true });
  }

  #write(): void {
    fs.mkdirSync(path.dirname(this.file), { recursive: true });
    fs.writeFileSync(this.file, `${JSON.stringify(this.#state)}\n`);
  }
}

function startChild(name: string, args: string[], env: NodeJS.ProcessEnv, nodeFlags: readonly string[] = []): ChildProcess {
  const child = spawn(process.execPath, [...nodeFlags, path.join(PROJECT_ROOT, 'src', 'main', 'cli.ts'), ...args], {
    env,
    stdio: 'inherit',
    cwd: PROJECT_ROOT,
    // Its own process group: a terminal's Ctrl-C reaches only this launcher, which then stops the
    // children one signal each, so none is killed by a second signal in the middle of its drain.
    detached: true,
  });
  child.on('error', (e) => log(`${name} failed to start: ${e.message}`));
  return child;
}

function exitOf(child: ChildProcess): Promise<number> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1))));
}

/** Thrown inside the boot when a stop was asked for: the finally block stops what already runs. */
class StopRequested extends Error {}

export async function run(args: string[]): Promise<number> {
  if (args.length > 0) {
    console.error('usage: svc dev   (npm start)');
    return 2;
  }
  const env = process.env;

  // Signals first, so a Ctrl-C at any moment (during the boot included) stops what already runs. The
  // launcher never dies of a signal: the first drains, the second stops at once without the drain (the
  // children get SIGKILL), the services (PostgreSQL, Redis, the SQS server) are stopped either way.
  let stopRequests = 0;
  let hurry = () => {};
  let requestStop = () => {};
  const stopRequested = new Promise<void>((resolve) => (requestStop = resolve));
  const onSignal = (signal: NodeJS.Signals) => {
    stopRequests += 1;
    if (stopRequests === 1) {
      log(`${signal}: draining and stopping (press Ctrl-C again to skip the drain)`);
      requestStop();
    } else if (stopRequests === 2) {
      log(`${signal} again: stopping now without waiting for the drain; the services are still stopped`);
      hurry();
    } else {
      log('already stopping without the drain; PostgreSQL and Redis stop in a moment');
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('SIGHUP', onSignal);
  const checkStop = () => {
    if (stopRequests > 0) throw new StopRequested();
  };

  const apiPort = Number(env.SVC_API_PORT ?? 3000);
  const healthPort = Number(env.SVC_HEALTH_PORT ?? 8081);
  const metricsPort = Number(env.SVC_API_METRICS_PORT ?? 9464);
  const state = new LauncherStateFile(path.resolve(env.SVC_DATA_DIR ?? '.data'));
  const cleanups: Array<() => Promise<void>> = [];
  const cleanup = async () => {
    for (const stop of cleanups.reverse()) await stop().catch((e: Error) => log(`cleanup: ${e.message}`));
    cleanups.length = 0;
  };

  const children: ChildProcess[] = [];
  const childNames: string[] = [];
  let hurried = false;
  const killAll = (signal: NodeJS.Signals) => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill(signal);
  };
  hurry = () => {
    hurried = true;
    killAll('SIGKILL');
  };
  /** Stops every child with one signal, SIGKILL after the stop budget (or at once on a second Ctrl-C); true when all exited 0. */
  let childrenStopped = false;
  const stopChildren = async (): Promise<boolean> => {
    if (childrenStopped) return true;
    childrenStopped = true;
    const budget = Number(env.SVC_STOP_TIMEOUT_MS ?? 30_000) + 5_000;
    killAll(hurried ? 'SIGKILL' : 'SIGTERM');
    const timer = setTimeout(() => killAll('SIGKILL'), budget);
    const codes = await Promise.all(children.map(exitOf));
    clearTimeout(timer);
    codes.forEach((code, i) => {
      if (code !== 0) log(`${childNames[i]} exited with code ${code}`);
    });
    return !hurried && codes.every((code) => code === 0);
  };
  const spawnTracked = (name: string, cliArgs: string[], childEnv: NodeJS.ProcessEnv, nodeFlags: readonly string[] = []): ChildProcess => {
    const child = startChild(name, cliArgs, childEnv, nodeFlags);
    children.push(child);
    childNames.push(name);
    state.add(name, child.pid);
    return child;
  };

  try {
    // What a crashed run left (its API, workers, private Redis) would hold the ports: stop it first.
    await state.reclaim();
    cleanups.push(async () => state.remove());
    for (const [variable, port] of [['SVC_API_PORT', apiPort], ['SVC_HEALTH_PORT', healthPort], ['SVC_API_METRICS_PORT', metricsPort]] as const) {
      if (!(await portFree(port))) {
        throw new DevError('PORT_IN_USE', `port ${port} is already in use; stop what holds it or set ${variable} to another port`);
      }
    }

    await emitAll(log);
    checkStop();
    const db = await resolveDatabase(env, log);
    cleanups.push(() => db.stop());
    checkStop();
    const redis = await ensureRedis(env);
    cleanups.push(() => redis.stop());
    state.add('private redis-server', redis.pid);
    checkStop();
    const sqs = await startLocalSqsServer({ port: Number(env.SVC_LOCAL_SQS_PORT ?? 0) });
    cleanups.push(() => sqs.stop());
    const sqsEnv = {
      SVC_SQS_REGION: env.SVC_SQS_REGION ?? 'us-east-1',
      SVC_SQS_ENDPOINT: sqs.endpoint,
      SVC_SQS_QUEUE_URL_PREFIX: sqs.queueUrlPrefix,
      SVC_SQS_LOCAL_CREDENTIALS: 'true',
    };
    const client = createSqsClient({
      region: sqsEnv.SVC_SQS_REGION,
      endpoint: sqs.endpoint,
      localCredentials: true,
    });
    await provisionQueues(client, sqs.queueUrlPrefix);
    client.destroy();
    log(`SQS-protocol server (in memory) on ${sqs.endpoint} with queues critical, default, bulk, maintenance and their dead-letter queues`);
    // `svc dlq`, `svc runs`, `svc queues` find this server from here when no SVC_SQS_* is set (src/config/dev-stack.ts).
    const removeStackState = writeDevStackState(env.SVC_DATA_DIR, { ...sqsEnv, REDIS_URL: redis.url });
    cleanups.push(async () => removeStackState());
    checkStop();

    const childEnv: NodeJS.ProcessEnv = {
      ...DEV_BOOTSTRAP,
      ...env,
      ...sqsEnv,
      NODE_ENV: env.NODE_ENV ?? 'development',
      DATABASE_URL: db.url,
      REDIS_URL: redis.url,
      SVC_TASKS_CATALOG: path.join(DIST_DIR, 'tasks.json'),
      SVC_SCHEMA_VERSION: path.join(DIST_DIR, 'schema-version.json'),
      SVC_PERMISSIONS_REGISTRY: path.join(DIST_DIR, 'permissions.json'),
      SVC_API_PORT: String(apiPort),
      // A laptop's API and workers' health answer on loopback only unless asked otherwise.
      SVC_API_HOST: env.SVC_API_HOST ?? '127.0.0.1',
      SVC_HEALTH_PORT: String(healthPort),
      SVC_HEALTH_HOST: env.SVC_HEALTH_HOST ?? '127.0.0.1',
    };

    const migrator = spawnTracked('migrator', ['migrator', 'deploy'], childEnv);
    const migrated = await Promise.race([exitOf(migrator), stopRequested.then(() => null)]);
    checkStop();
    if (migrated !== 0) throw new DevError('DEPLOY_FAILED', `migrator deploy exited with ${migrated}; see its message above`);
    // A development tenant to dispatch for (DevSeeder, idempotent: a later start creates nothing); the
    // seeder prints its uid and id. It refuses NODE_ENV=production, so such a start goes without one.
    if (childEnv.NODE_ENV !== 'production') {
      const seeder = spawnTracked('seeder', ['migrator', 'db-seed', '--class', 'DevSeeder'], childEnv);
      const seeded = await Promise.race([exitOf(seeder), stopRequested.then(() => null)]);
      checkStop();
      if (seeded !== 0) throw new DevError('DEV_SEED_FAILED', `migrator db-seed --class DevSeeder exited with ${seeded}; see its message above`);
    } else {
      log('NODE_ENV=production: no development tenant is seeded');
    }
    // The migrator is done: the children to watch and stop from now on are the API and the workers.
    children.length = 0;
    childNames.length = 0;

    const workersEnv = {
      ...childEnv,
      QUEUES: env.QUEUES ?? 'critical,default,bulk,maintenance',
      SVC_RELAY: 'true',
      SVC_LOCAL_SCHEDULER: env.SVC_LOCAL_SCHEDULER ?? 'true',
      // The in-memory queue server started empty just now: what an earlier start sent is lost, and the
      // rescuer sends it again on its first pass instead of after its window. Later losses (a killed
      // worker) are rescued within seconds on one machine.
      SVC_RESCUE_QUEUE_STARTED_EMPTY: 'true',
      SVC_RESCUE_INTERVAL_MS: env.SVC_RESCUE_INTERVAL_MS ?? '5000',
      SVC_RESCUE_MARGIN_MS: env.SVC_RESCUE_MARGIN_MS ?? '10000',
    };
    let workers = spawnTracked('workers', ['workers'], workersEnv, WORKERS_NODE_FLAGS);
    let api = spawnTracked('api', ['api'], childEnv);
    log(`API on http://127.0.0.1:${apiPort} (docs at /docs), workers health on http://127.0.0.1:${healthPort}/healthz; Ctrl-C stops everything`);

    // A change to a unit file reloads the units: the catalog is emitted again in a process of its own
    // (this one has the old unit modules cached), and only when the units pass do the workers and the
    // API restart with them; otherwise they keep the last good ones and the problem is printed.
    const unitsDir = path.join(env.SVC_UNITS_ROOT ?? PROJECT_ROOT, env.SVC_UNITS_DIR ?? 'units');
    let watch: UnitWatch | undefined;
    try {
      watch = watchUnitFiles(unitsDir);
      cleanups.push(async () => watch?.close());
      log(`watching ${path.relative(process.cwd(), unitsDir) || unitsDir}: a changed unit reloads the workers and the API`);
    } catch (error) {
      log(`unit files not watched (${(error as Error).message}): restart npm start after changing a unit`);
    }
    const replace = async (old: ChildProcess, start: () => ChildProcess): Promise<ChildProcess> => {
      old.kill('SIGTERM');
      await exitOf(old);
      const at = children.indexOf(old);
      children.splice(at, 1);
      childNames.splice(at, 1);
      return start();
    };
    for (;;) {
      const exited = [workers, api].map((child) => exitOf(child).then((c) => ({ c })));
      const first = await Promise.race([stopRequested.then(() => 'stop' as const), ...(watch ? [watch.next().then(() => 'units' as const)] : []), ...exited]);
      if (first === 'stop') break;
      if (first === 'units') {
        log('unit files changed: checking the units');
        const emitted = await exitOf(spawnTracked('tasks emit', ['tasks', 'emit', '--out', childEnv.SVC_TASKS_CATALOG!], childEnv));
        children.splice(-1, 1);
        childNames.splice(-1, 1);
        if (stopRequests > 0) break;
        if (emitted !== 0) {
          log('the units do not pass (see above): the workers and the API keep the last good units');
          continue;
        }
        workers = await replace(workers, () => spawnTracked('workers', ['workers'], workersEnv, WORKERS_NODE_FLAGS));
        api = await replace(api, () => spawnTracked('api', ['api'], childEnv));
        log('units reloaded: the workers and the API restarted with them');
        continue;
      }
      log(`a child process exited (code ${first.c}); stopping the rest`);
      await stopChildren();
      return 1;
    }
    const clean = await stopChildren();
    // Asked to stop (once, or twice to skip the drain): 0 once everything stopped.
    return clean || hurried ? 0 : 1;
  } catch (error) {
    if (error instanceof StopRequested) return 0;
    throw error;
  } finally {
    // Whatever happened above, every child and every service this launcher started is stopped.
    await stopChildren();
    await cleanup();
    log('stopped');
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('SIGHUP', onSignal);
  }
}
