// Configuration of `svc queues provision`: where the queues are and how they are reached (the workers'
// SVC_SQS_* variables) and their visibility timeouts (the workers' SVC_VISIBILITY_*_S), with the same
// rules and defaults as the workers, read from the workers' own schema.
import { z } from 'zod';
import { EVEN_WITH_OTHER_PROBLEMS, parsedOk, parseEnv, type Env } from './parse.ts';
import { visibilityByQueue, workersSchema } from './workers.ts';

const w = workersSchema.in.shape;

export const queuesSchema = z
  .object({
    SVC_SQS_REGION: w.SVC_SQS_REGION,
    SVC_SQS_QUEUE_URL_PREFIX: w.SVC_SQS_QUEUE_URL_PREFIX,
    SVC_SQS_ENDPOINT: w.SVC_SQS_ENDPOINT,
    SVC_SQS_LOCAL_CREDENTIALS: w.SVC_SQS_LOCAL_CREDENTIALS,
    SVC_VISIBILITY_CRITICAL_S: w.SVC_VISIBILITY_CRITICAL_S,
    SVC_VISIBILITY_DEFAULT_S: w.SVC_VISIBILITY_DEFAULT_S,
    SVC_VISIBILITY_BULK_S: w.SVC_VISIBILITY_BULK_S,
    SVC_VISIBILITY_MAINTENANCE_S: w.SVC_VISIBILITY_MAINTENANCE_S,
  })
  .superRefine((c, ctx) => {
    if (parsedOk(ctx, 'SVC_SQS_QUEUE_URL_PREFIX', 'SVC_SQS_ENDPOINT') && !c.SVC_SQS_QUEUE_URL_PREFIX && !c.SVC_SQS_ENDPOINT) {
      ctx.addIssue({ code: 'custom', path: ['SVC_SQS_QUEUE_URL_PREFIX'], message: 'is required (the queue name is appended to it) unless SVC_SQS_ENDPOINT is set' });
    }
  }, EVEN_WITH_OTHER_PROBLEMS)
  .transform((c) => ({
    ...c,
    SVC_SQS_QUEUE_URL_PREFIX: c.SVC_SQS_QUEUE_URL_PREFIX ?? `${c.SVC_SQS_ENDPOINT!.replace(/\/+$/, '')}/000000000000/`,
    visibilitySeconds: visibilityByQueue(c),
  }));

export type QueuesConfig = z.infer<typeof queuesSchema>;

/** Parses the environment of `svc queues`; throws ConfigError naming every bad variable. */
export function queuesConfig(env: Env): QueuesConfig {
  return parseEnv('svc queues', queuesSchema, env);
}
