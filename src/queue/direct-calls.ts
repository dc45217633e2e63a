// The four calls on the delivery path (SendMessageBatch, ReceiveMessage, DeleteMessageBatch,
// ChangeMessageVisibility) sent as one signed HTTP request each, without the SDK's middleware stack.
//
// Why: on the 2-core machines this project is measured on, the stack (serde schemas, endpoint rules,
// retry bookkeeping, user agent, checksum middleware) costs about 0.45 ms of CPU per call, three times
// the HTTP request itself, and a run at a low rate pays it three times (send, receive, delete)
// (bench/results/hot-path-levers-2026-11-24.md, "Eleventh session").
//
// The request is still the SDK's: the client's own SigV4 signer (its credential chain, region and
// clock offset), the AWS JSON 1.0 protocol the SDK speaks to SQS, the configured endpoint or else the
// queue URL's origin (the SDK's useQueueUrlAsEndpoint), the SDK's MD5 checks of message bodies, its
// retry rule (transient and throttling errors, full-jitter backoff, maxAttempts) and its exception
// classes. Every other command goes through the SDK unchanged.
import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import * as sqsModule from '@aws-sdk/client-sqs';
import { SQSClient, SQSServiceException, type SQSClientConfig } from '@aws-sdk/client-sqs';
import { CodedError } from '../errors/coded-error.ts';

/** The commands sent directly, by class name (a second copy of the SDK under sqs-consumer has its own classes). */
const DIRECT_COMMANDS = new Set(['SendMessageBatchCommand', 'ReceiveMessageCommand', 'DeleteMessageBatchCommand', 'ChangeMessageVisibilityCommand']);

/** The SDK's transient errors (@smithy/service-error-classification): retried with the SDK's backoff. */
const TRANSIENT_STATUS = new Set([500, 502, 503, 504]);
const TRANSIENT_CODES = new Set(['TimeoutError', 'RequestTimeout', 'RequestTimeoutException', 'ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND']);
const THROTTLING_CODES = new Set([
  'BandwidthLimitExceeded', 'EC2ThrottledException', 'LimitExceededException', 'PriorRequestNotComplete', 'ProvisionedThroughputExceededException',
  'RequestLimitExceeded', 'RequestThrottled', 'RequestThrottledException', 'SlowDown', 'ThrottledException', 'Throttling', 'ThrottlingException',
  'TooManyRequestsException', 'TransactionInProgressException',
]);
const CLOCK_SKEW_CODES = new Set(['AuthFailure', 'InvalidSignatureException', 'RequestExpired', 'RequestInTheFuture', 'RequestTimeTooSkewed', 'SignatureDoesNotMatch']);
/** The SDK's backoff: full jitter over 100 ms (500 ms when throttled) doubling per attempt, at most 20 s. */
const RETRY_BASE_MS = 100;
const THROTTLING_RETRY_BASE_MS = 500;
const MAX_RETRY_DELAY_MS = 20_000;
/** A clock further off than this from the server's is corrected, as the SDK does. */
const CLOCK_SKEW_MS = 300_000;

export interface DirectCallsOptions {
  /** How long one request may take past its long poll (WaitTimeSeconds), ms. */
  requestTimeoutMs: number;
}

type Input = Record<string, unknown> & { QueueUrl?: string; WaitTimeSeconds?: number; Entries?: Array<{ Id?: string; MessageBody?: string }> };
type Metadata = { httpStatusCode?: number; requestId?: string; extendedRequestId?: string; attempts: number; totalRetryDelay: number };
interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export class DirectCallsSqsClient extends SQSClient {
  readonly #agents = { 'http:': new http.Agent({ keepAlive: true }), 'https:': new https.Agent({ keepAlive: true }) };
  readonly #endpoint: URL | undefined;
  readonly #requestTimeoutMs: number;
  /** The client's signer, made once: config.signer() builds a new one (and its key cache) per call. */
  #signer: ReturnType<SQSClient['config']['signer']> | undefined;

  constructor(config: SQSClientConfig & { endpoint?: string }, options: DirectCallsOptions) {
    super(config);
    this.#endpoint = config.endpoint ? new URL(config.endpoint) : undefined;
    this.#requestTimeoutMs = options.requestTimeoutMs;
  }

  // One implementation for the SDK's overloads: the callback forms and every other command go to the SDK.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override send(command: any, optionsOrCb?: any, cb?: any): any {
    const name: unknown = command?.constructor?.name;
    if (typeof name !== 'string' || !DIRECT_COMMANDS.has(name) || typeof optionsOrCb === 'function' || typeof cb === 'function') {
      return super.send(command, optionsOrCb, cb);
    }
    return this.#call(name.slice(0, -'Command'.length), command.input as Input, (optionsOrCb as { abortSignal?: AbortSignal } | undefined)?.abortSignal);
  }

  override destroy(): void {
    this.#agents['http:'].destroy();
    this.#agents['https:'].destroy();
    super.destroy();
  }

  async #call(operation: string, input: Input, signal: AbortSignal | undefined): Promise<unknown> {
    const maxAttempts = await this.config.maxAttempts();
    let totalRetryDelay = 0;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#once(operation, input, signal, { attempts: attempt, totalRetryDelay });
      } catch (error) {
        const retry = retryDelayMs(error, attempt);
        if (attempt >= maxAttempts || retry === undefined || signal?.aborted) throw error;
        totalRetryDelay += retry;
        await pause(retry, signal);
      }
    }
  }

  async #once(operation: string, input: Input, signal: AbortSignal | undefined, meta: Pick<Metadata, 'attempts' | 'totalRetryDelay'>): Promise<unknown> {
    const target = this.#endpoint ?? new URL(new URL(String(input.QueueUrl)).origin);
    const body = JSON.stringify(input, binaryAsBase64);
    const signer = await (this.#signer ??= this.config.signer().catch((error: unknown) => {
      this.#signer = undefined; // a signer that could not be made is asked for again next call
      throw error;
    }));
    const signed = await signer.sign(
      {
        method: 'POST',
        protocol: target.protocol,
        hostname: target.hostname,
        ...(target.port ? { port: Number(target.port) } : {}),
        path: target.pathname,
        query: {},
        headers: { host: target.host, 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': `AmazonSQS.${operation}` },
        body,
      },
      { signingDate: new Date(Date.now() + this.config.systemClockOffset) },
    );
    const timeoutMs = (input.WaitTimeSeconds ?? 0) * 1000 + this.#requestTimeoutMs;
    const answer = await this.#post(target, signed.headers, body, timeoutMs, signal);
    const metadata: Metadata = {
      httpStatusCode: answer.status,
      requestId: header(answer.headers, 'x-amzn-requestid') ?? header(answer.headers, 'x-amz-request-id'),
      extendedRequestId: header(answer.headers, 'x-amz-id-2'),
      ...meta,
    };
    const parsed = parseJson(answer.body);
    if (answer.status >= 300) throw this.#failure(answer, parsed, metadata);
    const output: Record<string, unknown> = { ...parsed, $metadata: metadata };
    if (operation === 'ReceiveMessage') checkReceived(output);
    if (operation === 'SendMessageBatch') checkSent(input, output);
    return output;
  }

  /** The SDK's exception for the answer: the modeled class of its code when there is one. */
  #failure(answer: Answer, parsed: Record<string, unknown>, $metadata: Metadata): Error {
    const queryError = header(answer.headers, 'x-amzn-query-error')?.split(';')[0];
    const type = typeof parsed.__type === 'string' ? parsed.__type : (queryError ?? `Http${answer.status}`);
    const name = type.split('#').pop()!.split(':')[0]!;
    const message = typeof parsed.message === 'string' ? parsed.message : typeof parsed.Message === 'string' ? parsed.Message : name;
    const modeled = (sqsModule as Record<string, unknown>)[name];
    const $fault = answer.status >= 500 ? 'server' : 'client';
    const error =
      typeof modeled === 'function' && modeled.prototype instanceof SQSServiceException
        ? new (modeled as new (o: object) => SQSServiceException)({ $metadata, message })
        : new SQSServiceException({ name, $fault, $metadata, message });
    Object.assign(error, { Code: queryError ?? name });
    const date = header(answer.headers, 'date');
    if (CLOCK_SKEW_CODES.has(name) && date) {
      const offset = Date.parse(date) - Date.now();
      if (Number.isFinite(offset) && Math.abs(offset - this.config.systemClockOffset) > CLOCK_SKEW_MS) {
        this.config.systemClockOffset = offset;
        Object.assign(error, { $retryable: {} });
      }
    }
    if (THROTTLING_CODES.has(name) || answer.status === 429) Object.assign(error, { $retryable: { throttling: true } });
    return error;
  }

  #post(target: URL, headers: Record<string, string>, body: string, timeoutMs: number, signal: AbortSignal | undefined): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      if (signal?.aborted) return reject(abortError());
      const request = (target.protocol === 'https:' ? https : http).request(
        {
          protocol: target.protocol,
          hostname: target.hostname,
          port: target.port || undefined,
          path: target.pathname,
          method: 'POST',
          agent: this.#agents[target.protocol === 'https:' ? 'https:' : 'http:'],
          headers: { ...headers, 'content-length': Buffer.byteLength(body) },
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () => {
            finish();
            resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString('utf8') });
          });
          response.on('error', fail);
        },
      );
      const timer = setTimeout(() => request.destroy(timeoutError(timeoutMs)), timeoutMs);
      const onAbort = () => request.destroy(abortError());
      signal?.addEventListener('abort', onAbort, { once: true });
      function finish() {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      }
      function fail(error: Error) {
        finish();
        reject(error);
      }
      request.on('error', fail);
      request.end(body);
    });
  }
}

function header(headers: http.IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function parseJson(text: string): Record<string, unknown> {
  if (text.length === 0) return {};
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** Binary message attributes travel as base64 in AWS JSON, as the SDK sends them. */
function binaryAsBase64(_key: string, value: unknown): unknown {
  return value instanceof Uint8Array ? Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64') : value;
}

const md5 = (text: string) => createHash('md5').update(text, 'utf8').digest('hex');

/** As the SDK: bodies whose MD5 does not match fail the call; binary attributes become bytes. */
function checkReceived(output: Record<string, unknown>): void {
  if (!Array.isArray(output.Messages)) return;
  const bad: string[] = [];
  for (const m of output.Messages as Array<{ Body?: string; MD5OfBody?: string; MessageId?: string; MessageAttributes?: Record<string, { BinaryValue?: unknown }> }>) {
    if (typeof m.Body === 'string' && typeof m.MD5OfBody === 'string' && md5(m.Body) !== m.MD5OfBody) bad.push(m.MessageId ?? '');
    for (const attribute of Object.values(m.MessageAttributes ?? {})) {
      if (typeof attribute.BinaryValue === 'string') attribute.BinaryValue = new Uint8Array(Buffer.from(attribute.BinaryValue, 'base64'));
    }
  }
  if (bad.length > 0) throw new Error(`Invalid MD5 checksum on messages: ${bad.join(', ')}`);
}

function checkSent(input: Input, output: Record<string, unknown>): void {
  if (!Array.isArray(output.Successful)) return;
  const bodies = new Map((input.Entries ?? []).map((e) => [e.Id, e.MessageBody]));
  const bad: string[] = [];
  for (const s of output.Successful as Array<{ Id?: string; MD5OfMessageBody?: string; MessageId?: string }>) {
    const body = bodies.get(s.Id);
    if (typeof body === 'string' && typeof s.MD5OfMessageBody === 'string' && md5(body) !== s.MD5OfMessageBody) bad.push(s.MessageId ?? '');
  }
  if (bad.length > 0) throw new Error(`Invalid MD5 checksum on messages: ${bad.join(', ')}`);
}

/** The SDK's retry rule: transient and throttling errors, full-jitter backoff; undefined when not retried. */
function retryDelayMs(error: unknown, attempt: number): number | undefined {
  const e = error as { name?: string; code?: string; $metadata?: { httpStatusCode?: number }; $retryable?: { throttling?: boolean } };
  const throttling = e.$retryable?.throttling === true;
  const transient =
    e.$retryable !== undefined ||
    TRANSIENT_STATUS.has(e.$metadata?.httpStatusCode ?? 0) ||
    TRANSIENT_CODES.has(e.name ?? '') ||
    TRANSIENT_CODES.has(e.code ?? '');
  if (!transient) return undefined;
  return Math.floor(Math.random() * Math.min(MAX_RETRY_DELAY_MS, (throttling ? THROTTLING_RETRY_BASE_MS : RETRY_BASE_MS) * 2 ** (attempt - 1)));
}

/** Named as the SDK's request handler names it, so callers that match on `name` see the same error. */
function timeoutError(ms: number): Error {
  const error = new CodedError('TimeoutError', `no answer from the queue within ${ms} ms`);
  error.name = 'TimeoutError';
  return error;
}

function abortError(): Error {
  const error = new Error('Request aborted');
  error.name = 'AbortError';
  return error;
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(abortError());
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError());
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
