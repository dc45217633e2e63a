// The SQS client settings of a parsed configuration. The SVC_SQS_* variables themselves (rules,
// defaults, the prefix derived from the endpoint) are defined once, in src/config/workers.ts.
import type { WorkersConfig } from '../config/workers.ts';
import type { SqsSettings } from './client.ts';


/** The part of the workers' configuration that locates and authenticates the queues. */
export type SqsConfig = Pick<
  WorkersConfig,
  'SVC_SQS_REGION' | 'SVC_SQS_QUEUE_URL_PREFIX' | 'SVC_SQS_ENDPOINT' | 'SVC_SQS_LOCAL_CREDENTIALS' | 'SVC_SQS_REQUEST_TIMEOUT_MS' | 'SVC_SQS_DIRECT_CALLS'
>;

export function sqsSettings(config: SqsConfig): SqsSettings {
  return {
    region: config.SVC_SQS_REGION,
    queueUrlPrefix: config.SVC_SQS_QUEUE_URL_PREFIX,
    endpoint: config.SVC_SQS_ENDPOINT,
    localCredentials: config.SVC_SQS_LOCAL_CREDENTIALS,
    requestTimeoutMs: config.SVC_SQS_REQUEST_TIMEOUT_MS,
    directCalls: config.SVC_SQS_DIRECT_CALLS,
  };
}
