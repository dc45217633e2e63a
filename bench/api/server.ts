// Child process of the API benchmark: serves buildApp (fake session resolver, no logger) and a bare
// Fastify route returning constant JSON, each on its own loopback port, so the load generator in the
// parent never shares this event loop. Prints one line `READY route=<port> bare=<port>`, stops on SIGTERM.
import Fastify from 'fastify';
import { createSql } from '../../src/db/client.ts';
import { createRedis } from '../../src/kv/client.ts';
import { buildApp } from '../../src/http/app.ts';
import type { Session, SessionResolver } from '../../src/auth/session-resolver.ts';

const env = process.env;
const sql = createSql(env.BENCH_DATABASE_URL!, { max: 4, applicationName: 'bench-api' });
const redis = createRedis(env.BENCH_REDIS_URL!, { name: 'bench-api', autoPipelining: true });
const session: Session = { tenantId: env.BENCH_TENANT_ID!, userId: '1', membershipId: '1', permissions: new Set(['access.task_runs.read']) };
const resolver: SessionResolver = { resolve: async (token) => (token === env.BENCH_TOKEN ? session : null) };

const app = await buildApp({
  sql,
  redis,
  resolver,
  catalog: { version: 1, tasks: [], subscriptions: [] },
  latestMigration: 'bench',
  config: { corsOrigins: [], corsCredentials: false },
  logger: false,
});
const bare = Fastify({ logger: false });
const constant = { success: true, data: { status: 'ok', value: 42 }, meta: {} };
bare.get('/bare', async () => constant);

await app.listen({ port: 0, host: '127.0.0.1' });
await bare.listen({ port: 0, host: '127.0.0.1' });
const port = (server: { server: import('node:http').Server }) => {
  const address = server.server.address();
  return typeof address === 'object' && address ? address.port : 0;
};
console.log(`READY route=${port(app)} bare=${port(bare)}`);

// A failed close still ends the process, with a non-zero status and the error on stderr, instead of
// an unhandled rejection.
process.once('SIGTERM', () => {
  const close = async () => {
    await app.close();
    await bare.close();
    await sql.end({ timeout: 2 });
    redis.disconnect();
  };
  close().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
});
