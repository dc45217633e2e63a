import path from 'node:path';
import { startEmbeddedPostgres } from '../../../src/db/embedded-postgres.ts';
import { freePort, startRedisServer } from '../../../src/kv/redis-server.ts';
import { startLocalSqsServer } from '../../../src/queue/local-sqs-server.ts';
import { createSql } from '../../../src/db/client.ts';
import { TEST_DB_PASSWORD, type Backend } from './types.ts';

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
      // The role gets a password and every URL carries it (the embedded cluster trusts loopback, so it is
      // not needed to connect; it is there so tests can prove no process ever logs it).
      const admin = createSql(pg.url, { max: 1 });
      try {
        await admin.unsafe(`ALTER ROLE postgres PASSWORD '${TEST_DB_PASSWORD}'`);
      } finally {
        await admin.end();
      }
      const pgAdminUrl = pg.url.replace('postgres://postgres@', `postgres://postgres:${TEST_DB_PASSWORD}@`);
      if (!new URL(pgAdminUrl).password) throw new Error(`unexpected embedded PostgreSQL URL shape: ${pg.url}`);
      const redis = await startRedisServer({ databases: 1024 });
      stops.push(() => redis.stop());
      const sqs = await startLocalSqsServer();
      stops.push(() => sqs.stop());
      return { pgAdminUrl, pgPort: pg.port, redisUrl: redis.url, sqsEndpoint: sqs.endpoint, stop };
    } catch (error) {
      await stop();
      throw error;
    }
  },
};
