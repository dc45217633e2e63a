// Tests of "Redis goes down mid-way" need a Redis of their own to stop: a private redis-server and a
// client connected to it (errors swallowed, as the code under test must cope without Redis).
import type { Redis } from 'ioredis';
import { createRedis } from '../../src/kv/client.ts';
import { startRedisServer } from '../../src/kv/redis-server.ts';

export interface StoppableRedis {
  /** Connected (ready) when returned. */
  redis: Redis;
  url: string;
  /** Stops the server; the client stays, failing. */
  stopServer(): Promise<void>;
  /** Freezes the server (SIGSTOP): connections stay open and nothing answers, like a network black hole. */
  freeze(): void;
  /** Resumes a frozen server (SIGCONT). */
  thaw(): void;
  /** Disconnects the client and stops the server (again); for finally blocks. */
  close(): Promise<void>;
}

export async function stoppableRedis(name: string, options: { commandTimeoutMs?: number } = {}): Promise<StoppableRedis> {
  const server = await startRedisServer();
  const redis = createRedis(server.url, { name, commandTimeoutMs: options.commandTimeoutMs });
  redis.on('error', () => {});
  const thaw = () => process.kill(server.pid, 'SIGCONT');
  const close = async () => {
    redis.disconnect();
    // A frozen server would ignore the SIGTERM of stop().
    try {
      thaw();
    } catch {
      // already gone
    }
    await server.stop();
  };
  try {
    if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
  } catch (error) {
    await close();
    throw error;
  }
  return { redis, stopServer: () => server.stop(), freeze: () => process.kill(server.pid, 'SIGSTOP'), thaw, close, url: server.url };
}
