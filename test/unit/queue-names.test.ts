import { describe, expect, it } from 'vitest';
import {
  DEFAULT_VISIBILITY_SECONDS,
  dlqUrl,
  isQueueName,
  NATIVE_REDRIVE_MAX_RECEIVES,
  QUEUE_NAMES,
  queueNameFromUrl,
  queueUrl,
} from '../../src/queue/names.ts';
import { sqsSettings } from '../../src/queue/config.ts';
import { workersConfig } from '../../src/config/workers.ts';
import { createSqsClient, LOCAL_SQS_CREDENTIALS } from '../../src/queue/client.ts';

describe('queue names', () => {
  it('R-CFG-03 a queue URL is the prefix with the queue name appended', () => {
    expect(queueUrl('https://sqs.eu-west-1.amazonaws.com/123456789012/', 'critical')).toBe(
      'https://sqs.eu-west-1.amazonaws.com/123456789012/critical',
    );
    expect(queueUrl('http://127.0.0.1:4566/000000000000/q1a2b_', 'bulk')).toBe('http://127.0.0.1:4566/000000000000/q1a2b_bulk');
    expect(dlqUrl('http://127.0.0.1:4566/000000000000/', 'default')).toBe('http://127.0.0.1:4566/000000000000/default-dlq');
  });

  it('derives the queue name from the last path segment', () => {
    expect(queueNameFromUrl('http://127.0.0.1:4566/000000000000/q1a2b_bulk')).toBe('q1a2b_bulk');
    expect(queueNameFromUrl('https://sqs.us-east-1.amazonaws.com/1/critical-dlq')).toBe('critical-dlq');
    expect(() => queueNameFromUrl('http://127.0.0.1:4566/000000000000/')).toThrow(/no queue name/);
  });

  it('R-LIM-01 R-LIM-02 four queues, visibility 60/120/900/300 s, native redrive after 7 receives', () => {
    expect(QUEUE_NAMES).toEqual(['critical', 'default', 'bulk', 'maintenance']);
    expect(DEFAULT_VISIBILITY_SECONDS).toEqual({ critical: 60, default: 120, bulk: 900, maintenance: 300 });
    expect(NATIVE_REDRIVE_MAX_RECEIVES).toBe(7);
    expect(isQueueName('bulk')).toBe(true);
    expect(isQueueName('urgent')).toBe(false);
  });
});

describe('SQS configuration', () => {
  const queues = { QUEUES: 'default' };

  it('R-CFG-03 R-CFG-04 reads region, prefix, endpoint, the local-credentials flag, the request timeout and the direct-calls switch', () => {
    const config = workersConfig({
      ...queues,
      SVC_SQS_REGION: 'eu-west-1',
      SVC_SQS_QUEUE_URL_PREFIX: 'http://127.0.0.1:9324/000000000000/',
      SVC_SQS_ENDPOINT: 'http://127.0.0.1:9324',
      SVC_SQS_LOCAL_CREDENTIALS: 'true',
      SVC_SQS_REQUEST_TIMEOUT_MS: '2500',
      SVC_SQS_DIRECT_CALLS: 'false',
    });
    expect(sqsSettings(config)).toEqual({
      region: 'eu-west-1',
      queueUrlPrefix: 'http://127.0.0.1:9324/000000000000/',
      endpoint: 'http://127.0.0.1:9324',
      localCredentials: true,
      requestTimeoutMs: 2500,
      directCalls: false,
    });
    const cloud = sqsSettings(workersConfig({ ...queues, SVC_SQS_QUEUE_URL_PREFIX: 'https://sqs.us-east-1.amazonaws.com/1/' }));
    expect(cloud.localCredentials).toBe(false);
    expect(cloud.region).toBe('us-east-1');
    expect(cloud.requestTimeoutMs).toBe(10_000);
    expect(cloud.directCalls).toBe(true);
    expect(() => workersConfig({ ...queues, SVC_SQS_QUEUE_URL_PREFIX: 'https://sqs.us-east-1.amazonaws.com/1/', SVC_SQS_REQUEST_TIMEOUT_MS: '50' })).toThrow(/SVC_SQS_REQUEST_TIMEOUT_MS/);
    expect(() => workersConfig(queues)).toThrow(/SVC_SQS_QUEUE_URL_PREFIX/);
    expect(() => workersConfig({ ...queues, SVC_SQS_QUEUE_URL_PREFIX: 'not a url' })).toThrow(/SVC_SQS_QUEUE_URL_PREFIX/);
  });

  it('R-CFG-04 local credentials are fixed; otherwise the default credential chain is used', async () => {
    const local = createSqsClient({ region: 'us-east-1', endpoint: 'http://127.0.0.1:1', localCredentials: true });
    const creds = await local.config.credentials({} as never);
    expect({ accessKeyId: creds.accessKeyId, secretAccessKey: creds.secretAccessKey }).toEqual(LOCAL_SQS_CREDENTIALS);
    const cloud = createSqsClient({ region: 'us-east-1', localCredentials: false });
    // No fixed credentials were configured: the SDK resolves them through its provider chain.
    expect(cloud.config.credentials).not.toBe(local.config.credentials);
    const saved = { ...process.env };
    try {
      process.env.AWS_ACCESS_KEY_ID = 'AKIAFROMCHAIN';
      process.env.AWS_SECRET_ACCESS_KEY = 'from-chain';
      const chained = await createSqsClient({ region: 'us-east-1', localCredentials: false }).config.credentials({} as never);
      expect(chained.accessKeyId).toBe('AKIAFROMCHAIN');
    } finally {
      process.env = saved;
    }
    local.destroy();
    cloud.destroy();
  });
});
