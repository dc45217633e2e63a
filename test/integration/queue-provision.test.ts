// Provisioning the four queues and their dead-letter queues through the SQS API, against the shared
// local SQS-protocol server with a queue-name prefix of this file's own.
import {
  ChangeMessageVisibilityCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSqsClient } from '../../src/queue/client.ts';
import { dlqUrl, QUEUE_NAMES, queueUrl } from '../../src/queue/names.ts';
import { provisionQueues, type ProvisionedQueue } from '../../src/queue/provision.ts';
import { freshQueuePrefix } from '../support/services.ts';

let sqs: SQSClient;
let prefix: string;
let provisioned: ProvisionedQueue[];

beforeAll(async () => {
  const q = freshQueuePrefix();
  prefix = q.queueUrlPrefix;
  sqs = createSqsClient({ region: 'us-east-1', endpoint: q.endpoint, localCredentials: true }, { maxAttempts: 1 });
  provisioned = await provisionQueues(sqs, prefix);
});
afterAll(() => sqs?.destroy());

describe('provisionQueues', () => {
  it('R-CFG-03 creates the four queues and their DLQs at prefix + name', () => {
    expect(provisioned.map((p) => p.name)).toEqual([...QUEUE_NAMES]);
    for (const p of provisioned) {
      expect(p.url).toBe(queueUrl(prefix, p.name));
      expect(p.dlqUrl).toBe(dlqUrl(prefix, p.name));
    }
  });

  it('R-LIM-01 R-LIM-02 sets the visibility timeouts and a redrive policy of 7 receives', async () => {
    const expected = { critical: '60', default: '120', bulk: '900', maintenance: '300' };
    for (const p of provisioned) {
      const { Attributes } = await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: p.url, AttributeNames: ['VisibilityTimeout', 'RedrivePolicy'] }),
      );
      expect(Attributes!.VisibilityTimeout).toBe(expected[p.name]);
      const redrive = JSON.parse(Attributes!.RedrivePolicy!);
      expect(Number(redrive.maxReceiveCount)).toBe(7);
      expect(redrive.deadLetterTargetArn).toBe(p.dlqArn);
    }
  });

  it('is idempotent and takes configured visibility timeouts', async () => {
    const again = await provisionQueues(sqs, prefix);
    expect(again.map((p) => p.url)).toEqual(provisioned.map((p) => p.url));
    const other = freshQueuePrefix().queueUrlPrefix;
    const [critical] = await provisionQueues(sqs, other, { critical: 5 }, ['critical']);
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: critical!.url, AttributeNames: ['VisibilityTimeout'] }),
    );
    expect(Attributes!.VisibilityTimeout).toBe('5');
  });

  it('R-LIM-02 R-WRK-07 the queue itself moves a message to its DLQ after 7 receives', async () => {
    const q = provisioned.find((p) => p.name === 'default')!;
    await sqs.send(new SendMessageCommand({ QueueUrl: q.url, MessageBody: '{"probe":true}' }));
    let receives = 0;
    for (let i = 0; i < 12; i++) {
      const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: q.url, WaitTimeSeconds: 1, MaxNumberOfMessages: 1 }));
      if (!Messages?.length) break;
      receives++;
      // Return it at once, as a crashed worker's message reappears after visibility expires.
      await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: q.url, ReceiptHandle: Messages[0]!.ReceiptHandle!, VisibilityTimeout: 0 }));
    }
    expect(receives).toBe(7);
    const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: q.dlqUrl, WaitTimeSeconds: 1 }));
    expect(Messages?.[0]?.Body).toBe('{"probe":true}');
  });
});
