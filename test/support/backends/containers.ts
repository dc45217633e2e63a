// Thin testcontainers provider: the same images as compose.yaml. Only loaded with
// SVC_TEST_BACKEND=containers, so machines without a Docker engine never import testcontainers.
import { TEST_DB_PASSWORD, type Backend } from './types.ts';

export interface ContainerDefinition {
  image: string;
  port: number;
  env: Record<string, string>;
  command?: string[];
  /** Log line that says the service is ready. */
  readyLog: RegExp;
}

export const CONTAINER_DEFINITIONS = {
  postgres: {
    image: 'postgres:18',
    port: 5432,
    env: { POSTGRES_USER: 'postgres', POSTGRES_PASSWORD: TEST_DB_PASSWORD, POSTGRES_DB: 'postgres' },
    command: ['postgres', '-c', 'fsync=off', '-c', 'max_connections=300'],
    readyLog: /database system is ready to accept connections/,
  },
  redis: {
    image: 'redis:8',
    port: 6379,
    env: {},
    command: ['redis-server', '--save', '', '--appendonly', 'no', '--databases', '1024'],
    readyLog: /Ready to accept connections/,
  },
  sqs: {
    image: 'kibertoad/fauxqs:2.4.1',
    port: 4566,
    env: {},
    readyLog: /listening|Server listening/i,
  },
} satisfies Record<string, ContainerDefinition>;

export const containersBackend: Backend = {
  name: 'containers',
  async start() {
    const { GenericContainer, Wait } = await import('testcontainers');
    const started: Array<{ stop(): Promise<unknown> }> = [];
    const stop = async () => {
      for (const c of started.reverse()) await c.stop().catch(() => {});
    };
    try {
      const run = async (def: ContainerDefinition) => {
        let container = new GenericContainer(def.image)
          .withEnvironment(def.env)
          .withExposedPorts(def.port)
          .withWaitStrategy(Wait.forLogMessage(def.readyLog, def.image.startsWith('postgres') ? 2 : 1));
        if (def.command) container = container.withCommand(def.command);
        const c = await container.start();
        started.push(c);
        return { host: c.getHost(), port: c.getMappedPort(def.port) };
      };
      const pg = await run(CONTAINER_DEFINITIONS.postgres);
      const redis = await run(CONTAINER_DEFINITIONS.redis);
      const sqs = await run(CONTAINER_DEFINITIONS.sqs);
      return {
        pgAdminUrl: `postgres://postgres:${TEST_DB_PASSWORD}@${pg.host}:${pg.port}/postgres`,
        pgPort: pg.port,
        redisUrl: `redis://${redis.host}:${redis.port}`,
        sqsEndpoint: `http://${sqs.host}:${sqs.port}`,
        stop,
      };
    } catch (error) {
      await stop();
      throw error;
    }
  },
};
