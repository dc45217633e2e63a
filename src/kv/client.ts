// ioredis client factory. Redis is never authoritative: callers treat every Redis error as
// "not available" and fall back to the database, so commands fail fast instead of queueing forever.
import { Redis } from 'ioredis';

export type { Redis };

export function createRedis(url: string, options: { name?: string } = {}): Redis {
  return new Redis(url, {
    connectionName: options.name,
    // Fail a command quickly when Redis is down; the caller falls back to the database.
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    connectTimeout: 2000,
    retryStrategy: (times) => Math.min(times * 200, 2000),
    lazyConnect: false,
  });
}
