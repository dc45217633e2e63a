// SVC_SQS_DIRECT_CALLS turns the direct fast path off: the workers' client is then the plain SDK one,
// against the shared local SQS-protocol server, in both modes a send, receive and delete round trip;
// and an SDK-only long poll longer than SVC_SQS_REQUEST_TIMEOUT_MS on an idle queue answers empty
// instead of failing with a request timeout.
import { CreateQueueCommand, DeleteMessageBatchCommand, ReceiveMessageCommand, SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, describe, expect, it } from 'vitest';
import { workersConfig } from '../../src/config/workers.ts';
import { createSqsClient } from '../../src/queue/client.ts';
import { sqsSettings } from '../../src/queue/config.ts';
import { DirectCallsSqsClient } from '../../src/queue/direct-calls.ts';
import { freshQueuePrefix } from '../support/services.ts';

const clients: SQSClient[] = [];
afterAll(() => clients.forEach((c) => c.destroy()));

function clientFor(env: Record<string, string>): SQSClient {
  const q = freshQueuePrefix();
  const config = workersConfig({ QUEUES: 'default', DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db', REDIS_URL: 'redis://127.0.0.1:6379', SVC_SQS_ENDPOINT: q.endpoint, SVC_SQS_LOCAL_CREDENTIALS: 'true', ...env });
  const client = createSqsClient(sqsSettings(config), { maxAttempts: 1 });
  clients.push(client);
  return client;
}

async function roundTrip(client: SQSClient, name: string): Promise<void> {
  const { QueueUrl } = await client.send(new CreateQueueCommand({ QueueName: name }));
  await client.send(new SendMessageBatchCommand({ QueueUrl, Entries: [{ Id: 'a', MessageBody: 'hello' }] }));
  const out = await client.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 1, MaxNumberOfMessages: 10 }));
  expect(out.Messages?.map((m) => m.Body)).toEqual(['hello']);
  const deleted = await client.send(new DeleteMessageBatchCommand({ QueueUrl, Entries: [{ Id: 'a', ReceiptHandle: out.Messages![0]!.ReceiptHandle! }] }));
  expect(deleted.Successful?.map((s) => s.Id)).toEqual(['a']);
  expect((await client.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 0 }))).Messages ?? []).toEqual([]);
}

describe('SVC_SQS_DIRECT_CALLS', () => {
  it('defaults to the direct fast path; the round trip works', async () => {
    const client = clientFor({});
    expect(client).toBeInstanceOf(DirectCallsSqsClient);
    await roundTrip(client, `direct${process.pid}`);
  });

  it('false gives an SDK-only client; the round trip works', async () => {
    const client = clientFor({ SVC_SQS_DIRECT_CALLS: 'false' });
    expect(client).not.toBeInstanceOf(DirectCallsSqsClient);
    await roundTrip(client, `sdkonly${process.pid}`);
  });

  it('an SDK-only idle long poll longer than SVC_SQS_REQUEST_TIMEOUT_MS answers empty, not a timeout', async () => {
    const viaConfig = clientFor({ SVC_SQS_DIRECT_CALLS: 'false', SVC_SQS_REQUEST_TIMEOUT_MS: '500', SVC_SQS_WAIT_SECONDS: '2' });
    const viaOption = createSqsClient({ region: 'us-east-1', endpoint: freshQueuePrefix().endpoint, localCredentials: true, requestTimeoutMs: 500 }, { directCalls: false, maxAttempts: 1 });
    clients.push(viaOption);
    for (const [i, client] of [viaConfig, viaOption].entries()) {
      const { QueueUrl } = await client.send(new CreateQueueCommand({ QueueName: `idle${i}x${process.pid}` }));
      const started = performance.now();
      const out = await client.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 2 }));
      expect(out.Messages ?? []).toEqual([]);
      // The server did hold the poll past the request timeout: the bound really was extended.
      expect(performance.now() - started).toBeGreaterThan(1_500);
    }
  });
});
