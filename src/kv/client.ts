// ioredis client factory. Redis is never authoritative: callers treat every Redis error as
// "not available" and fall back to the database, so commands fail fast instead of queueing forever.
import { Redis } from 'ioredis';

export type { Redis };

/** Default bound of every Redis command (SVC_REDIS_COMMAND_TIMEOUT_MS): past it the caller takes its database path. */
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 500;

export interface RedisClientOptions {
  name?: string;
  autoPipelining?: boolean;
  /** A command with no reply after this long rejects (a hung Redis, e.g. a frozen process or a network black hole). Default 500 ms. */
  commandTimeoutMs?: number;
}

export function createRedis(url: string, options: RedisClientOptions = {}): Redis {
  return new Redis(url, {
    connectionName: options.name,
    // Batches the commands issued in one event-loop tick into one write: the API's concurrent cache reads
    // then cost one syscall per tick instead of one each. Off by default: never for a connection that
    // issues blocking commands (BLPOP), which would hold back the commands batched behind them.
    enableAutoPipelining: options.autoPipelining ?? false,
    // Fail a command quickly when Redis is down; the caller falls back to the database.
    maxRetriesPerRequest: 1,
    // A Redis that accepts the connection but never answers (SIGSTOP, a black hole) must not hold a
    // caller: every command is bounded. A blocking command (BLPOP) needs a connection without this
    // bound; the relay opens one and bounds its wait itself.
    commandTimeout: options.commandTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
    enableOfflineQueue: false,
    connectTimeout: 2000,
    retryStrategy: (times) => Math.min(times * 200, 2000),
    lazyConnect: false,
  });
}
