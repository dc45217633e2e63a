// The delivery path's four SQS calls sent directly (src/queue/direct-calls.ts), against the shared local
// SQS-protocol server, seen through a recording HTTP proxy: the SDK's request minus its own stamps, signed
// so that a SigV4 check written here from the protocol's definition accepts it; the SDK's outputs and MD5
// checks; any answer that is not 2xx handed to the SDK (its exceptions and retries); retries of calls that
// got no answer; and a bound on every wait.
import { createHash, createHmac } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  QueueDoesNotExist,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createSqsClient, LOCAL_SQS_CREDENTIALS } from '../../src/queue/client.ts';
import { freshQueuePrefix } from '../support/services.ts';
import { silentServer } from '../support/silent-server.ts';
import { waitFor } from '../support/wait-for.ts';

interface Seen {
  target: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  method: string;
  path: string;
}

/** Answers a request itself (status and body), or lets it through to the queue server (undefined). */
type Intercept = (seen: Seen) => { status: number; body: string } | undefined;

let upstream: URL;
let prefix: string;
let proxy: http.Server;
let proxyUrl: string;
let seen: Seen[] = [];
let intercept: Intercept = () => undefined;
/** Rewrites the queue server's answer before the client sees it. */
let rewrite: (target: string, body: string) => string = (_t, body) => body;
let sdk: SQSClient;
const clients: SQSClient[] = [];

beforeAll(async () => {
  const q = freshQueuePrefix();
  upstream = new URL(q.endpoint);
  proxy = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const s: Seen = {
        target: String(req.headers['x-amz-target'] ?? ''),
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        method: req.method ?? '',
        path: req.url ?? '',
      };
      seen.push(s);
      const own = intercept(s);
      if (own) {
        res.writeHead(own.status, { 'content-type': 'application/x-amz-json-1.0' }).end(own.body);
        return;
      }
      const { host: _host, ...headers } = req.headers;
      const forward = http.request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers }, (answer) => {
        const parts: Buffer[] = [];
        answer.on('data', (c: Buffer) => parts.push(c));
        answer.on('end', () => {
          const body = rewrite(s.target, Buffer.concat(parts).toString('utf8'));
          const { 'content-length': _length, ...rest } = answer.headers;
          res.writeHead(answer.statusCode ?? 502, rest).end(body);
        });
      });
      forward.end(s.body);
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  prefix = `${proxyUrl}${q.queueUrlPrefix.slice(q.endpoint.length)}`;
  sdk = new SQSClient({ region: 'us-east-1', endpoint: proxyUrl, credentials: { ...LOCAL_SQS_CREDENTIALS }, maxAttempts: 1 });
});
afterEach(() => {
  seen = [];
  intercept = () => undefined;
  rewrite = (_t, body) => body;
});
afterAll(async () => {
  for (const c of clients) c.destroy();
  sdk?.destroy();
  proxy?.closeAllConnections();
  await new Promise<void>((resolve) => proxy?.close(() => resolve()));
});

function direct(options: { maxAttempts?: number; requestTimeoutMs?: number; endpoint?: string } = {}): SQSClient {
  const c = createSqsClient(
    { region: 'us-east-1', endpoint: options.endpoint ?? proxyUrl, localCredentials: true, requestTimeoutMs: options.requestTimeoutMs },
    { maxAttempts: options.maxAttempts ?? 1 },
  );
  clients.push(c);
  return c;
}

async function queue(name: string): Promise<string> {
  await sdk.send(new CreateQueueCommand({ QueueName: `${prefix.split('/').pop()}${name}` }));
  return `${prefix}${name}`;
}

const sha256 = (data: string) => createHash('sha256').update(data, 'utf8').digest('hex');
const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data, 'utf8').digest();

/**
 * SigV4 as the protocol defines it (canonical request, string to sign, derived key), independent of the
 * SDK's signer: true when the request's Authorization header is the one its signed headers and body give.
 */
function sigV4Valid(s: Seen, secret: string, region: string, service: string): boolean {
  const auth = String(s.headers.authorization ?? '');
  const m = /^AWS4-HMAC-SHA256 Credential=[^/]+\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) return false;
  const [, day, r, svc, signedHeaders, signature] = m as unknown as [string, string, string, string, string, string];
  if (r !== region || svc !== service) return false;
  const names = signedHeaders.split(';');
  if (!names.includes('host') || !names.includes('x-amz-date')) return false;
  const canonicalHeaders = names.map((n) => `${n}:${String(s.headers[n] ?? '').trim().replace(/\s+/g, ' ')}\n`).join('');
  const [path, query = ''] = s.path.split('?');
  const canonical = [s.method, path, query, canonicalHeaders, signedHeaders, sha256(s.body)].join('\n');
  const amzDate = String(s.headers['x-amz-date']);
  const scope = `${day}/${region}/${service}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonical)].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, day), region), service), 'aws4_request');
  return createHmac('sha256', key).update(toSign, 'utf8').digest('hex') === signature;
}

describe('the delivery path calls SQS directly', () => {
  it('sends the four calls as signed AWS JSON requests of their own, and every other command through the SDK', async () => {
    const url = await queue('signed');
    seen = [];
    const c = direct();
    await c.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: 'a', MessageBody: 'one' }] }));
    const { Messages } = await c.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1, WaitTimeSeconds: 1 }));
    await c.send(new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: Messages![0]!.ReceiptHandle!, VisibilityTimeout: 0 }));
    const again = await c.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1, WaitTimeSeconds: 1 }));
    await c.send(new DeleteMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: '0', ReceiptHandle: again.Messages![0]!.ReceiptHandle! }] }));
    await c.send(new CreateQueueCommand({ QueueName: `${prefix.split('/').pop()}other` }));

    expect(seen.map((s) => s.target)).toEqual([
      'AmazonSQS.SendMessageBatch',
      'AmazonSQS.ReceiveMessage',
      'AmazonSQS.ChangeMessageVisibility',
      'AmazonSQS.ReceiveMessage',
      'AmazonSQS.DeleteMessageBatch',
      'AmazonSQS.CreateQueue',
    ]);
    const first = seen[0]!;
    for (const s of seen) {
      expect(s.method).toBe('POST');
      expect(s.path).toBe('/');
      expect(s.headers['content-type']).toBe('application/x-amz-json-1.0');
      expect(sigV4Valid(s, LOCAL_SQS_CREDENTIALS.secretAccessKey, 'us-east-1', 'sqs')).toBe(true);
    }
    // The check above can fail: a tampered body no longer matches its signature.
    expect(sigV4Valid({ ...first, body: first.body.replace('one', 'two') }, LOCAL_SQS_CREDENTIALS.secretAccessKey, 'us-east-1', 'sqs')).toBe(false);
    // The SDK's stack stamps every request it sends with an invocation id; the direct calls have none.
    expect(seen.map((s) => s.headers['amz-sdk-invocation-id'] !== undefined)).toEqual([false, false, false, false, false, true]);
    // Every header the SDK sends for the same call is there, but for its own stamps.
    seen = [];
    await sdk.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: 'a', MessageBody: 'one' }] }));
    const stamps = new Set(['user-agent', 'x-amz-user-agent', 'amz-sdk-invocation-id', 'amz-sdk-request', 'connection']);
    const sdkHeaders = Object.keys(seen[0]!.headers).filter((h) => !stamps.has(h)).sort();
    const directHeaders = Object.keys(first.headers).filter((h) => !stamps.has(h)).sort();
    expect(directHeaders).toEqual(sdkHeaders);
    expect(first.headers['x-amzn-query-mode']).toBe('true');
  });

  it('with directCalls false, sends the same calls through the SDK (the bench\'s plain-SDK hop)', async () => {
    const url = await queue('plain');
    seen = [];
    const c = createSqsClient({ region: 'us-east-1', endpoint: proxyUrl, localCredentials: true }, { maxAttempts: 1, directCalls: false });
    clients.push(c);
    await c.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: 'a', MessageBody: 'plain' }] }));
    const { Messages } = await c.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1, WaitTimeSeconds: 1 }));
    await c.send(new DeleteMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: '0', ReceiptHandle: Messages![0]!.ReceiptHandle! }] }));
    expect(seen.map((s) => s.target)).toEqual(['AmazonSQS.SendMessageBatch', 'AmazonSQS.ReceiveMessage', 'AmazonSQS.DeleteMessageBatch']);
    // The SDK's stack stamps every request it sends; the direct calls (the default) stamp none.
    expect(seen.map((s) => s.headers['amz-sdk-invocation-id'] !== undefined)).toEqual([true, true, true]);
  });

  it("without a configured endpoint, goes to the queue URL's origin, as the SDK does", async () => {
    const url = await queue('origin');
    seen = [];
    const c = createSqsClient({ region: 'eu-west-1', localCredentials: true }, { maxAttempts: 1 });
    clients.push(c);
    const out = await c.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: 'a', MessageBody: 'via origin' }] }));
    expect(out.Successful).toHaveLength(1);
    expect(seen.map((s) => [s.target, s.headers.host])).toEqual([['AmazonSQS.SendMessageBatch', new URL(proxyUrl).host]]);
    expect(sigV4Valid(seen[0]!, LOCAL_SQS_CREDENTIALS.secretAccessKey, 'eu-west-1', 'sqs')).toBe(true);
  });

  it('gives the outputs the SDK gives: ids, MD5s, attributes (binary ones as bytes), receive counts', async () => {
    const url = await queue('outputs');
    const c = direct();
    const attributes = {
      s: { DataType: 'String', StringValue: 'text' },
      b: { DataType: 'Binary', BinaryValue: new Uint8Array([1, 2, 250]) },
      n: { DataType: 'Binary', BinaryValue: Buffer.from([7, 8]) },
    };
    const sent = await c.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: 'x', MessageBody: 'héllo', MessageAttributes: attributes }] }));
    expect(sent.Successful).toEqual([expect.objectContaining({ Id: 'x', MessageId: expect.any(String), MD5OfMessageBody: createHash('md5').update('héllo').digest('hex') })]);
    expect(sent.Failed ?? []).toEqual([]);
    expect(sent.$metadata.httpStatusCode).toBe(200);
    // On the wire, binary values are base64 strings, a Buffer's too (its toJSON would make it an object).
    const wire = JSON.parse(seen.find((s) => s.target === 'AmazonSQS.SendMessageBatch')!.body) as { Entries: Array<{ MessageAttributes: Record<string, { BinaryValue?: unknown }> }> };
    expect(wire.Entries[0]!.MessageAttributes.b!.BinaryValue).toBe(Buffer.from([1, 2, 250]).toString('base64'));
    expect(wire.Entries[0]!.MessageAttributes.n!.BinaryValue).toBe(Buffer.from([7, 8]).toString('base64'));

    const viaDirect = await c.send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1, MessageAttributeNames: ['All'], MessageSystemAttributeNames: ['ApproximateReceiveCount'], VisibilityTimeout: 0 }),
    );
    const viaSdk = await sdk.send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1, MessageAttributeNames: ['All'], MessageSystemAttributeNames: ['ApproximateReceiveCount'] }),
    );
    const [d] = viaDirect.Messages!;
    const [s] = viaSdk.Messages!;
    expect(d!.Body).toBe('héllo');
    expect(d!.Attributes).toEqual({ ApproximateReceiveCount: '1' });
    expect(s!.Attributes).toEqual({ ApproximateReceiveCount: '2' });
    expect(d!.MessageAttributes!.b!.BinaryValue).toBeInstanceOf(Uint8Array);
    expect([...d!.MessageAttributes!.b!.BinaryValue!]).toEqual([1, 2, 250]);
    expect([...d!.MessageAttributes!.n!.BinaryValue!]).toEqual([7, 8]);
    const { ReceiptHandle: _d, Attributes: _da, ...directRest } = d!;
    const { ReceiptHandle: _s, Attributes: _sa, ...sdkRest } = s!;
    expect(directRest).toEqual(sdkRest);

    const deleted = await c.send(new DeleteMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: '0', ReceiptHandle: s!.ReceiptHandle! }] }));
    expect(deleted.Successful).toEqual([{ Id: '0' }]);
  });

  it("hands an answer that is not 2xx to the SDK: its exception, class, name, status and fault", async () => {
    const missing = `${prefix}never-created`;
    const input = { QueueUrl: missing, Entries: [{ Id: 'a', MessageBody: 'x' }] };
    const viaDirect = await direct().send(new SendMessageBatchCommand(input)).catch((e: unknown) => e);
    // The direct request, refused, then the SDK's own.
    expect(seen.map((s) => [s.target, s.headers['amz-sdk-invocation-id'] !== undefined])).toEqual([
      ['AmazonSQS.SendMessageBatch', false],
      ['AmazonSQS.SendMessageBatch', true],
    ]);
    const viaSdk = await sdk.send(new SendMessageBatchCommand(input)).catch((e: unknown) => e);
    expect(viaDirect).toBeInstanceOf(QueueDoesNotExist);
    const pick = (e: unknown) => {
      const x = e as QueueDoesNotExist;
      return { name: x.name, message: x.message, fault: x.$fault, status: x.$metadata.httpStatusCode };
    };
    expect(pick(viaDirect)).toEqual(pick(viaSdk));
    expect(pick(viaDirect)).toEqual({ name: 'QueueDoesNotExist', message: expect.any(String), fault: 'client', status: 400 });
  });

  it('fails a receive whose body does not match its MD5, as the SDK does', async () => {
    const url = await queue('md5');
    const c = direct();
    await c.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: 'a', MessageBody: 'intact' }] }));
    rewrite = (target, body) => (target === 'AmazonSQS.ReceiveMessage' ? body.replace('intact', 'broken') : body);
    await expect(c.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1 }))).rejects.toThrow(/Invalid MD5 checksum/);
  });

  it("leaves a server fault to the SDK's retries, and retries a call that got no answer under the client's retry strategy", async () => {
    const url = await queue('retry');
    seen = [];
    let refusals = 1;
    intercept = (s) => (s.target === 'AmazonSQS.SendMessageBatch' && refusals-- > 0 ? { status: 503, body: '{"__type":"com.amazonaws.sqs#ServiceUnavailable","message":"busy"}' } : undefined);
    const out = await direct({ maxAttempts: 3 }).send(new SendMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: 'a', MessageBody: 'x' }] }));
    expect(out.Successful).toHaveLength(1);
    // The direct request met the fault; the SDK sent the command again, and it went through.
    expect(seen.map((s) => s.headers['amz-sdk-invocation-id'] !== undefined)).toEqual([false, true]);

    seen = [];
    refusals = 5;
    const failed = await direct({ maxAttempts: 2 }).send(new SendMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: 'a', MessageBody: 'x' }] })).catch((e: unknown) => e);
    expect(failed).toMatchObject({ $fault: 'server', $metadata: { httpStatusCode: 503 } });
    // One direct request, then the SDK's maxAttempts.
    expect(seen.map((s) => s.headers['amz-sdk-invocation-id'] !== undefined)).toEqual([false, true, true]);

    // No answer at all (nothing listens): the client's retry strategy allows maxAttempts in all.
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadEndpoint = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const refused = await direct({ endpoint: deadEndpoint, maxAttempts: 3 })
      .send(new SendMessageBatchCommand({ QueueUrl: `${deadEndpoint}/000000000000/q`, Entries: [{ Id: 'a', MessageBody: 'x' }] }))
      .catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'ECONNREFUSED' });
  });

  it('bounds every wait: a queue that never answers fails the call after its long poll plus the request timeout', async () => {
    const { endpoint, sockets, close } = await silentServer();
    try {
      const c = direct({ endpoint, requestTimeoutMs: 200, maxAttempts: 1 });
      const url = `${endpoint}/000000000000/q`;
      await expect(c.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: 'a', MessageBody: 'x' }] }))).rejects.toMatchObject({ name: 'TimeoutError' });
      // A long poll may take its wait: the bound starts after it.
      const t0 = performance.now();
      await expect(c.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 1 }))).rejects.toMatchObject({ name: 'TimeoutError' });
      expect(performance.now() - t0).toBeGreaterThanOrEqual(1_000);
      // Timeouts are transient: retried up to maxAttempts, each on a connection of its own.
      const before = sockets.size;
      await expect(direct({ endpoint, requestTimeoutMs: 300, maxAttempts: 2 }).send(new DeleteMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: '0', ReceiptHandle: 'r' }] }))).rejects.toMatchObject({
        name: 'TimeoutError',
      });
      await waitFor(() => sockets.size - before >= 2, 5_000);
      expect(sockets.size - before).toBe(2);
    } finally {
      await close();
    }
  });

  it("bounds the SDK's own calls too, and gives a long poll it takes over its wait on top of the bound", async () => {
    const { endpoint, close } = await silentServer();
    try {
      // A command the SDK sends itself (the dead-letter copy, a message sent back over a tenant limit).
      const quiet = direct({ endpoint, requestTimeoutMs: 300, maxAttempts: 1 });
      await expect(quiet.send(new SendMessageCommand({ QueueUrl: `${endpoint}/000000000000/q`, MessageBody: 'x' }))).rejects.toMatchObject({ name: 'TimeoutError' });
    } finally {
      await close();
    }
    // A receive refused once is the SDK's: its long poll of 1 s on an empty queue is not cut at 300 ms.
    const url = await queue('handover-poll');
    let refusals = 1;
    intercept = (s) => (s.target === 'AmazonSQS.ReceiveMessage' && refusals-- > 0 ? { status: 503, body: '{"__type":"com.amazonaws.sqs#ServiceUnavailable","message":"busy"}' } : undefined);
    const t0 = performance.now();
    const out = await direct({ requestTimeoutMs: 300, maxAttempts: 1 }).send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 1 }));
    expect(out.Messages ?? []).toEqual([]);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(1_000);
    expect(seen.filter((s) => s.target === 'AmazonSQS.ReceiveMessage').map((s) => s.headers['amz-sdk-invocation-id'] !== undefined)).toEqual([false, true]);
  });

  it('ends a long poll at once when its abort signal fires (sqs-consumer stopping)', async () => {
    const url = await queue('abort');
    const controller = new AbortController();
    const t0 = performance.now();
    const polling = direct().send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 20 }), { abortSignal: controller.signal });
    setTimeout(() => controller.abort(), 100);
    await expect(polling).rejects.toMatchObject({ name: 'AbortError' });
    expect(performance.now() - t0).toBeLessThan(10_000);
  });
});
