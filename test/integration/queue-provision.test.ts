// Provisioning the four queues and their dead-letter queues through the SQS API, against the shared
// local SQS-protocol server with a queue-name prefix of this file's own.
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSqsClient } from '../../src/queue/client.ts';
import { dlqUrl, QUEUE_NAMES, queueUrl } from '../../src/queue/names.ts';
import { provisionQueues, type ProvisionedQueue } from '../../src/queue/provision.ts';
import { runNodeProcess } from '../support/node-process.ts';
import { freshQueuePrefix } from '../support/services.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
/** 14 days, the SQS maximum: a dead-letter message outlives the 7-day outbox purge, after which it is the payload's only copy. */
const FOURTEEN_DAYS = 1_209_600;
const SEVEN_DAYS = 604_800;

async function retention(url: string): Promise<number> {
  const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['MessageRetentionPeriod'] }));
  return Number(Attributes!.MessageRetentionPeriod);
}

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

describe('message retention and svc queues provision', () => {
  it('dead-letter queues keep messages 14 days (the SQS maximum), the queues at least the 7-day outbox purge window', async () => {
    for (const p of provisioned) {
      expect(await retention(p.dlqUrl), p.name).toBe(FOURTEEN_DAYS);
      expect(await retention(p.url), p.name).toBeGreaterThanOrEqual(SEVEN_DAYS);
    }
  });

  it('brings queues made with an older shape (4-day retention, another visibility) to the current one', async () => {
    const other = freshQueuePrefix().queueUrlPrefix;
    const namePrefix = other.slice(other.lastIndexOf('/') + 1);
    await sqs.send(new CreateQueueCommand({ QueueName: `${namePrefix}critical-dlq`, Attributes: { MessageRetentionPeriod: '345600' } }));
    await sqs.send(new CreateQueueCommand({ QueueName: `${namePrefix}critical`, Attributes: { MessageRetentionPeriod: '345600', VisibilityTimeout: '30' } }));
    const [critical] = await provisionQueues(sqs, other, {}, ['critical']);
    expect(await retention(critical!.dlqUrl)).toBe(FOURTEEN_DAYS);
    expect(await retention(critical!.url)).toBeGreaterThanOrEqual(SEVEN_DAYS);
    const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: critical!.url, AttributeNames: ['VisibilityTimeout', 'RedrivePolicy'] }));
    expect(Attributes!.VisibilityTimeout).toBe('60');
    expect(JSON.parse(Attributes!.RedrivePolicy!).deadLetterTargetArn).toBe(critical!.dlqArn);
  });

  it('svc queues provision creates every queue and its dead-letter queue from the SVC_SQS_* variables, twice without harm', async () => {
    const q = freshQueuePrefix();
    const env = {
      PATH: process.env.PATH,
      SVC_SQS_ENDPOINT: q.endpoint,
      SVC_SQS_QUEUE_URL_PREFIX: q.queueUrlPrefix,
      SVC_SQS_LOCAL_CREDENTIALS: 'true',
      SVC_VISIBILITY_BULK_S: '600',
    };
    for (let round = 0; round < 2; round++) {
      const r = await runNodeProcess([path.join(ROOT, 'src/main/cli.ts'), 'queues', 'provision'], { env, timeoutMs: 60_000 });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      for (const name of QUEUE_NAMES) expect(r.stdout).toContain(queueUrl(q.queueUrlPrefix, name));
    }
    for (const name of QUEUE_NAMES) {
      const { Attributes } = await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: queueUrl(q.queueUrlPrefix, name), AttributeNames: ['VisibilityTimeout', 'RedrivePolicy', 'MessageRetentionPeriod'] }),
      );
      expect(Attributes!.VisibilityTimeout).toBe(name === 'bulk' ? '600' : String({ critical: 60, default: 120, bulk: 900, maintenance: 300 }[name]));
      expect(Number(JSON.parse(Attributes!.RedrivePolicy!).maxReceiveCount)).toBe(7);
      expect(await retention(dlqUrl(q.queueUrlPrefix, name))).toBe(FOURTEEN_DAYS);
    }
  });

  it('svc queues provision refuses a missing queue location with one CONFIG_INVALID line, touching nothing', async () => {
    const r = await runNodeProcess([path.join(ROOT, 'src/main/cli.ts'), 'queues', 'provision'], { env: { PATH: process.env.PATH }, timeoutMs: 60_000 });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^svc: CONFIG_INVALID: invalid configuration for svc queues:\n {2}SVC_SQS_QUEUE_URL_PREFIX: is required/);
  });
});
