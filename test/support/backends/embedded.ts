import path from 'node:path';
import { startEmbeddedPostgres } from '../../../src/db/embedded-postgres.ts';
import { freePort, startRedisServer } from '../../../src/kv/redis-server.ts';
import { startLocalSqsServer } from '../../../src/queue/local-sqs-server.ts';
import type { Backend } from './types.ts';

export const embeddedBackend: Backend = {
  name: 'embedded',
  async start(baseDir) {
    const stops: Array<() => Promise<void>> = [];
    const stop = async () => {
      for (const s of stops.reverse()) await s().catch(() => {});
    };
    try {
      const pg = await startEmbeddedPostgres({ dataDir: path.join(baseDir, 'pg'), port: await freePort(), fast: true });
      stops.push(() => pg.stop());
      const redis = await startRedisServer({ databases: 1024 });
      stops.push(() => redis.stop());
      const sqs = await startLocalSqsServer();
      stops.push(() => sqs.stop());
      return { pgAdminUrl: pg.url, pgPort: pg.port, redisUrl: redis.url, sqsEndpoint: sqs.endpoint, stop };
    } catch (error) {
      await stop();
      throw error;
    }
  },
};
