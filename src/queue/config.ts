// The SVC_SQS_* variables, as a zod shape each executable's env schema spreads in.
import { z } from 'zod';
import { booleanFlag } from '../config/parse.ts';
import type { SqsSettings } from './client.ts';

export const sqsEnvShape = {
  SVC_SQS_REGION: z.string({ error: 'must name the SQS region, e.g. us-east-1' }).min(1).default('us-east-1'),
  SVC_SQS_QUEUE_URL_PREFIX: z
    .string({ error: 'must be the queue URL prefix, e.g. https://sqs.us-east-1.amazonaws.com/123456789012/' })
    .url({ error: 'must be a URL such as https://sqs.us-east-1.amazonaws.com/123456789012/' }),
  SVC_SQS_ENDPOINT: z.string().url({ error: 'must be a URL such as http://127.0.0.1:9324' }).optional(),
  SVC_SQS_LOCAL_CREDENTIALS: booleanFlag.default(false),
};

export type SqsEnv = {
  SVC_SQS_REGION: string;
  SVC_SQS_QUEUE_URL_PREFIX: string;
  SVC_SQS_ENDPOINT?: string | undefined;
  SVC_SQS_LOCAL_CREDENTIALS: boolean;
};

export function sqsSettingsFromEnv(env: SqsEnv): SqsSettings {
  return {
    region: env.SVC_SQS_REGION,
    queueUrlPrefix: env.SVC_SQS_QUEUE_URL_PREFIX,
    endpoint: env.SVC_SQS_ENDPOINT,
    localCredentials: env.SVC_SQS_LOCAL_CREDENTIALS,
  };
}
