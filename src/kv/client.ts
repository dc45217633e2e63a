// ioredis client factory. Redis is never authoritative: callers treat every Redis error as
// "not available" and fall back to the database, so commands fail fast instead of queueing forever.
import { Redis } from 'ioredis';

export type { Redis };

export function createRedis(url: string, options: { name?: string; autoPipelining?: boolean } = {}): Redis {
  return new Redis(url, {
    connectionName: options.name,
    // Batches the commands issued in one event-loop tick into one write: the API's concurrent cache reads
    // then cost one syscall per tick instead of one each. Off by default: never for a connection that
    // issues blocking commands (BLPOP), which would hold back the commands batched behind them.
    enableAutoPipelining: options.autoPipelining ?? false,
    // Fail a command quickly when Redis is down; the caller falls back to the database.
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    connectTimeout: 2000,
    retryStrategy: (times) => Math.min(times * 200, 2000),
    lazyConnect: false,
  });
}
