// The connections of the operator commands (`svc runs`, `svc dlq`): the database, Redis for the
// relay's wake signal and the run-status cache (a hint: the commands work without it), and for
// `svc dlq` the SQS queues, located and authenticated by the same SVC_SQS_* variables as the workers.
import path from 'node:path';
import { z } from 'zod';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { booleanFlag, databaseUrl, parseEnv, redisUrl } from '../config/parse.ts';
import { createSql, type Sql } from '../db/client.ts';
import { resolveDatabase } from '../db/connect.ts';
import { createRedis, type Redis } from '../kv/client.ts';
import { createSqsClient } from '../queue/client.ts';
import { withDevStackFallback } from '../config/dev-stack.ts';
import { loadUnits } from '../work/catalog.ts';
import { unitKeySource, type KeySource } from '../work/operate/redrive-run.ts';

const PROJECT_ROOT = path.resolve(import.meta.dirname, '..', '..');

const operateEnv = z.object({
  DATABASE_URL: databaseUrl,
  SVC_DATA_DIR: z.string().default('.data'),
  SVC_EMBEDDED_PG_PORT: z.string().default('54329'),
  REDIS_URL: redisUrl,
  SVC_SQS_REGION: z.string().default('us-east-1'),
  SVC_SQS_ENDPOINT: z.url({ error: 'must be an http(s) URL' }).optional(),
  SVC_SQS_QUEUE_URL_PREFIX: z.url({ error: 'must be an http(s) URL ending with /' }).optional(),
  SVC_SQS_LOCAL_CREDENTIALS: booleanFlag.default(false),
  SVC_SQS_DIRECT_CALLS: booleanFlag.default(true),
});

export interface OperateConnections {
  sql: Sql;
  /** Undefined when Redis did not answer within a second (nothing depends on it). */
  redis: Redis | undefined;
  /** Present when asked for. */
  sqs: { client: SQSClient; queueUrlPrefix: string } | undefined;
  close(): Promise<void>;
}

export async function openOperateConnections(command: string, options: { sqs: boolean }): Promise<OperateConnections> {
  // Under npm start, the running stack's queues when no SVC_SQS_* is set (src/config/dev-stack.ts).
  const source = options.sqs ? withDevStackFallback(process.env, (line) => console.error(`svc: note: ${line}`)) : process.env;
  const env = parseEnv(command, operateEnv, source);
  let sqs: OperateConnections['sqs'];
  if (options.sqs) {
    const prefix = env.SVC_SQS_QUEUE_URL_PREFIX ?? (env.SVC_SQS_ENDPOINT ? `${env.SVC_SQS_ENDPOINT.replace(/\/+$/, '')}/000000000000/` : undefined);
    if (!prefix) {
      parseEnv(command, operateEnv.refine(() => false, { path: ['SVC_SQS_QUEUE_URL_PREFIX'], error: 'is required (the queue name is appended to it) unless SVC_SQS_ENDPOINT is set (or npm start runs on SVC_DATA_DIR)' }), source);
    }
    sqs = {
      client: createSqsClient({ region: env.SVC_SQS_REGION, endpoint: env.SVC_SQS_ENDPOINT, localCredentials: env.SVC_SQS_LOCAL_CREDENTIALS, directCalls: env.SVC_SQS_DIRECT_CALLS }),
      queueUrlPrefix: prefix!,
    };
  }
  const database = await resolveDatabase({ DATABASE_URL: env.DATABASE_URL, SVC_DATA_DIR: env.SVC_DATA_DIR, SVC_EMBEDDED_PG_PORT: env.SVC_EMBEDDED_PG_PORT });
  const sql = createSql(database.url, { max: 2, applicationName: command.replace(/\s+/g, '-') });
  const client = createRedis(env.REDIS_URL, { name: command.replace(/\s+/g, '-') });
  client.on('error', () => {});
  const ready = await Promise.race([
    new Promise<boolean>((resolve) => client.once('ready', () => resolve(true))),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 1000).unref()),
  ]);
  const redis = ready ? client : undefined;
  if (!ready) client.disconnect();
  return {
    sql,
    redis,
    sqs,
    async close() {
      await sql.end({ timeout: 5 });
      client.disconnect();
      sqs?.client.destroy();
      await database.stop();
    },
  };
}

/**
 * The business idempotency keys of this build's units (SVC_UNITS_ROOT / SVC_UNITS_DIR, as `svc schedule`),
 * so a redrive reopens such a unit's ledger row and `runs show` finds it. Without them (units that fail
 * discovery) units keyed by run id still work: a warning says what is missing.
 */
/** timeoutSeconds of the build's units by name (`runs list --stuck`); empty, with a warning, when they cannot be loaded (every unit then takes the default timeout). */
export async function loadUnitTimeouts(): Promise<Map<string, number>> {
  try {
    const units = await loadUnits(process.env.SVC_UNITS_ROOT ?? PROJECT_ROOT, { dir: process.env.SVC_UNITS_DIR ?? 'units' });
    return new Map([...units.values()].map((u) => [u.name, u.timeoutSeconds]));
  } catch (error) {
    console.error(`svc: warning: the units could not be loaded (${(error as Error).message.split('\n')[0]}); every unit is judged with the default timeout`);
    return new Map();
  }
}

export async function loadKeySource(): Promise<KeySource | undefined> {
  try {
    const units = await loadUnits(process.env.SVC_UNITS_ROOT ?? PROJECT_ROOT, { dir: process.env.SVC_UNITS_DIR ?? 'units' });
    return unitKeySource(units);
  } catch (error) {
    console.error(`svc: warning: the units could not be loaded (${(error as Error).message.split('\n')[0]}); business idempotency keys are not reopened on redrive`);
    return undefined;
  }
}
