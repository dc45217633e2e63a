// Creates the four work queues and their dead-letter queues through the SQS API. Used by the local
// server start and by tests; in production the infrastructure provisions queues with the same shape.
import { CreateQueueCommand, GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
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

export interface ProvisionedQueue {
  name: QueueName;
  url: string;
  dlqUrl: string;
  dlqArn: string;
}

/**
 * Creates (idempotently: CreateQueue with the same attributes is a no-op) each queue's dead-letter
 * queue, then the queue with its visibility timeout and a redrive policy of 7 receives.
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
    await client.send(new CreateQueueCommand({ QueueName: namePrefix + name + DLQ_SUFFIX }));
    // The configured prefix is the address we use, whatever host name the server puts in its answer.
    const dlq = dlqUrl(prefix, name);
    const attrs = await client.send(new GetQueueAttributesCommand({ QueueUrl: dlq, AttributeNames: ['QueueArn'] }));
    const dlqArn = attrs.Attributes!.QueueArn!;
    await client.send(
      new CreateQueueCommand({
        QueueName: namePrefix + name,
        Attributes: {
          VisibilityTimeout: String(visibility[name] ?? DEFAULT_VISIBILITY_SECONDS[name]),
          RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: NATIVE_REDRIVE_MAX_RECEIVES }),
        },
      }),
    );
    provisioned.push({ name, url: queueUrl(prefix, name), dlqUrl: dlq, dlqArn });
  }
  return provisioned;
}
