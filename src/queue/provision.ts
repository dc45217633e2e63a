// Creates the four work queues and their dead-letter queues through the SQS API, or brings existing
// ones to this shape. Used by `svc queues provision` (cloud SQS), the local server start and the tests.
import { CreateQueueCommand, GetQueueAttributesCommand, QueueNameExists, SetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import {
  DEFAULT_VISIBILITY_SECONDS,
  DLQ_SUFFIX,
  dlqUrl,
  queueUrl,
  NATIVE_REDRIVE_MAX_RECEIVES,
  QUEUE_NAMES,
  queueNameFromUrl,
  type QueueName,
} from './names.ts';

/**
 * Retention of a dead-letter queue, seconds: 14 days, the SQS maximum. Sent outbox rows are purged after
 * 7 days; from then on the dead-letter message is the only copy of a failed run's payload, which
 * `svc dlq redrive` needs.
 */
export const DLQ_RETENTION_SECONDS = 1_209_600;

/**
 * Retention of a work queue, seconds: 7 days (the SQS default is 4), as long as the outbox keeps a sent
 * row, so a message waiting for stopped workers is not dropped while its run could still be re-sent.
 * Shorter than the dead-letter queue's: SQS keeps a message's first enqueue time when it moves it there.
 */
export const QUEUE_RETENTION_SECONDS = 604_800;

export interface ProvisionedQueue {
  name: QueueName;
  url: string;
  dlqUrl: string;
  dlqArn: string;
}

/**
 * Creates a queue with these attributes, or sets them on an existing one: SQS refuses CreateQueue of an
 * existing name with other attributes (QueueNameExists), and some servers answer it without applying
 * them, so the attributes are always set as well.
 */
async function ensureQueue(client: SQSClient, queueName: string, url: string, attributes: Record<string, string>): Promise<void> {
  try {
    await client.send(new CreateQueueCommand({ QueueName: queueName, Attributes: attributes }));
  } catch (error) {
    // Servers name it QueueNameExists, QueueAlreadyExists or AWS.SimpleQueueService.QueueNameExists.
    const name = (error as { name?: string }).name ?? '';
    if (!(error instanceof QueueNameExists) && !/(QueueNameExists|QueueAlreadyExists)$/.test(name)) throw error;
  }
  await client.send(new SetQueueAttributesCommand({ QueueUrl: url, Attributes: attributes }));
}

/**
 * Creates or updates (idempotent) each queue's dead-letter queue (14-day retention), then the queue
 * with its visibility timeout, a 7-day retention and a redrive policy of 7 receives.
 * `prefix` is the queue URL prefix; the part after its last slash is prepended to every queue name.
 */
export async function provisionQueues(
  client: SQSClient,
  prefix: string,
  visibility: Partial<Record<QueueName, number>> = {},
  queues: readonly QueueName[] = QUEUE_NAMES,
): Promise<ProvisionedQueue[]> {
  const namePrefix = prefix.endsWith('/') ? '' : queueNameFromUrl(prefix);
  const provisioned: ProvisionedQueue[] = [];
  for (const name of queues) {
    // The configured prefix is the address we use, whatever host name the server puts in its answer.
    const dlq = dlqUrl(prefix, name);
    await ensureQueue(client, namePrefix + name + DLQ_SUFFIX, dlq, { MessageRetentionPeriod: String(DLQ_RETENTION_SECONDS) });
    const attrs = await client.send(new GetQueueAttributesCommand({ QueueUrl: dlq, AttributeNames: ['QueueArn'] }));
    const dlqArn = attrs.Attributes!.QueueArn!;
    await ensureQueue(client, namePrefix + name, queueUrl(prefix, name), {
      VisibilityTimeout: String(visibility[name] ?? DEFAULT_VISIBILITY_SECONDS[name]),
      MessageRetentionPeriod: String(QUEUE_RETENTION_SECONDS),
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: NATIVE_REDRIVE_MAX_RECEIVES }),
    });
    provisioned.push({ name, url: queueUrl(prefix, name), dlqUrl: dlq, dlqArn });
  }
  return provisioned;
}
