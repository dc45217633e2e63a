// `svc dev` (npm start): the whole service on one machine with embedded defaults. Emits the build
// artifacts, starts PostgreSQL 18 (persistent under SVC_DATA_DIR, default .data/), finds Redis at
// REDIS_URL or starts a private redis-server, runs the in-memory SQS-protocol server on loopback,
// runs `migrator deploy`, then the API (port 3000) and one workers process (all four queues, relay,
// local scheduler, health on 8081) as child processes. Ctrl-C drains and stops everything.
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { emitAll, DIST_DIR, PROJECT_ROOT } from './emit.ts';
import { resolveDatabase } from '../db/connect.ts';
import { startRedisServer, redisServerInstalled, RedisServerMissingError } from '../kv/redis-server.ts';
import { startLocalSqsServer } from '../queue/local-sqs-server.ts';
import { createSqsClient } from '../queue/client.ts';
import { provisionQueues } from '../queue/provision.ts';
import { CodedError } from '../errors/coded-error.ts';

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

async function redisAnswers(url: string): Promise<boolean> {
  const { host, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: host || '127.0.0.1', port: Number(port || 6379) });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (d) => done(d.toString().startsWith('+PONG') || d.toString().startsWith('-NOAUTH')));
  });
}

async function ensureRedis(url: string): Promise<{ url: string; stop(): Promise<void> }> {
  if (await redisAnswers(url)) {
    log(`Redis answers at ${url.replace(/\/\/[^@]*@/, '//***@')}`);
    return { url, async stop() {} };
  }
  if (!redisServerInstalled()) throw new RedisServerMissingError();
  const server = await startRedisServer();
  log(`nothing answered at REDIS_URL; started a private redis-server on ${server.url}`);
  return { url: server.url, stop: () => server.stop() };
}

function startChild(name: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess {
  const child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'src', 'main', 'cli.ts'), ...args], {
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

export async function run(args: string[]): Promise<number> {
  if (args.length > 0) {
    console.error('usage: svc dev   (npm start)');
    return 2;
  }
  const env = process.env;
  const apiPort = Number(env.SVC_API_PORT ?? 3000);
  const healthPort = Number(env.SVC_HEALTH_PORT ?? 8081);
  const metricsPort = Number(env.SVC_API_METRICS_PORT ?? 9464);
  for (const [variable, port] of [['SVC_API_PORT', apiPort], ['SVC_HEALTH_PORT', healthPort], ['SVC_API_METRICS_PORT', metricsPort]] as const) {
    if (!(await portFree(port))) {
      throw new DevError('PORT_IN_USE', `port ${port} is already in use; stop what holds it or set ${variable} to another port`);
    }
  }

  await emitAll(log);
  const cleanups: Array<() => Promise<void>> = [];
  const cleanup = async () => {
    for (const stop of cleanups.reverse()) await stop().catch((e: Error) => log(`cleanup: ${e.message}`));
    cleanups.length = 0;
  };

  const children: ChildProcess[] = [];
  const childNames: string[] = [];
  let stopping = false;
  /** Stops every child with one signal, SIGKILL after the stop budget; true when all exited 0. */
  const stopChildren = async (signal: NodeJS.Signals): Promise<boolean> => {
    const budget = Number(env.SVC_STOP_TIMEOUT_MS ?? 30_000) + 5_000;
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill(signal);
    const timer = setTimeout(() => {
      for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    }, budget);
    const codes = await Promise.all(children.map(exitOf));
    clearTimeout(timer);
    codes.forEach((code, i) => {
      if (code !== 0) log(`${childNames[i]} exited with code ${code}`);
    });
    return codes.every((code) => code === 0);
  };

  try {
    const db = await resolveDatabase(env, log);
    cleanups.push(() => db.stop());
    const redis = await ensureRedis(env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    cleanups.push(() => redis.stop());
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
      // A laptop's API answers on loopback only unless asked otherwise.
      SVC_API_HOST: env.SVC_API_HOST ?? '127.0.0.1',
      SVC_HEALTH_PORT: String(healthPort),
    };

    const migrator = startChild('migrator', ['migrator', 'deploy'], childEnv);
    const migrated = await exitOf(migrator);
    if (migrated !== 0) throw new DevError('DEPLOY_FAILED', `migrator deploy exited with ${migrated}; see its message above`);

    const workersEnv = {
      ...childEnv,
      QUEUES: env.QUEUES ?? 'critical,default,bulk,maintenance',
      SVC_RELAY: 'true',
      SVC_LOCAL_SCHEDULER: env.SVC_LOCAL_SCHEDULER ?? 'true',
    };
    children.push(startChild('workers', ['workers'], workersEnv));
    childNames.push('workers');
    children.push(startChild('api', ['api'], childEnv));
    childNames.push('api');
    log(`API on http://127.0.0.1:${apiPort} (docs at /docs), workers health on http://127.0.0.1:${healthPort}/healthz; Ctrl-C stops everything`);

    const code = await new Promise<number>((resolve) => {
      const onSignal = (signal: NodeJS.Signals) => {
        if (stopping) return;
        stopping = true;
        log(`${signal}: draining and stopping`);
        void stopChildren('SIGTERM').then((clean) => resolve(clean ? 0 : 1));
      };
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      for (const child of children) {
        void exitOf(child).then((c) => {
          if (stopping) return;
          stopping = true;
          log(`a child process exited (code ${c}); stopping the rest`);
          void stopChildren('SIGTERM').then(() => resolve(1));
        });
      }
    });
    return code;
  } finally {
    if (!stopping) await stopChildren('SIGTERM');
    await cleanup();
    log('stopped');
  }
}
