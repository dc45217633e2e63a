// A private `redis-server` (Debian's package) on loopback, for tests and `npm start` when nothing
// answers at REDIS_URL. It keeps nothing on disk: Redis is never authoritative here.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import net from 'node:net';

export interface RedisServer {
  url: string;
  port: number;
  /** Process id of redis-server (tests freeze it with SIGSTOP to play a hung Redis). */
  pid: number;
  /** Stops the server (SIGTERM, then SIGKILL after 3 s). */
  stop(): Promise<void>;
}

export class RedisServerMissingError extends Error {
  readonly code = 'REDIS_SERVER_MISSING';
  constructor() {
    super('redis-server is not installed: install it (apt-get install redis-server) or set REDIS_URL to a running Redis');
  }
}

export function redisServerInstalled(): boolean {
  return spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).status === 0;
}

/** Resolves when something accepts TCP connections on host:port, or rejects after `timeoutMs`. */
export async function waitForPort(port: number, host = '127.0.0.1', timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ port, host }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on ${host}:${port} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export async function startRedisServer(options: { port?: number; databases?: number } = {}): Promise<RedisServer> {
  if (!redisServerInstalled()) throw new RedisServerMissingError();
  const port = options.port ?? (await freePort());
  const child: ChildProcess = spawn(
    'redis-server',
    [
      '--port', String(port),
      '--bind', '127.0.0.1',
      '--save', '',
      '--appendonly', 'no',
      '--databases', String(options.databases ?? 16),
      '--loglevel', 'warning',
    ],
    // Its own process group, so a terminal's Ctrl-C does not stop Redis under workers still draining;
    // whoever started it stops it.
    { stdio: ['ignore', 'ignore', 'inherit'], detached: true },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await waitForPort(port);
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    pid: child.pid!,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(timer);
    },
  };
}
