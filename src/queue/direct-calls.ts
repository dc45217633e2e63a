// The four calls on the delivery path (SendMessageBatch, ReceiveMessage, DeleteMessageBatch,
// ChangeMessageVisibility) sent as one signed HTTP request each, without the SDK's middleware stack.
//
// Why: on the 2-core machines this project is measured on, the stack (serde schemas, endpoint rules,
// retry bookkeeping, user agent, checksum middleware) costs about 0.45 ms of CPU per call, three times
// the HTTP request itself, and a run at a low rate pays it three times (send, receive, delete)
// (bench/results/hot-path-levers-2026-11-24.md).
//
// The request is the one the SDK sends, minus its own stamps (user agent, invocation id): the client's
// SigV4 signer (its credential chain, region and clock offset), the AWS JSON 1.0 protocol in SQS's
// query-compatible mode, to the configured endpoint or else the queue URL's origin (the SDK's
// useQueueUrlAsEndpoint). A 2xx answer is checked as the SDK checks it (the MD5 of every body).
// Anything else is left to the SDK:
// - an answer that is not 2xx (an error, throttling, a server fault): the command goes through the SDK,
//   so its exception classes, query-compatible error codes, retry budget and retry-after hints apply
//   exactly as to any other command. A request the server refused changed nothing, so asking again is
//   safe, and the SDK would have asked again anyway for a fault or throttling;
// - no answer (a connection refused or reset, nothing within the timeout): retried under the client's
//   own retry strategy (its delays, attempts and budget), as the SDK retries such errors.
// Every other command goes through the SDK unchanged.
import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { SQSClient, type SQSClientConfig } from '@aws-sdk/client-sqs';
import { CodedError } from '../errors/coded-error.ts';

/** The commands sent directly, by class name (a second copy of the SDK under sqs-consumer has its own classes). */
const DIRECT_COMMANDS = new Set(['SendMessageBatchCommand', 'ReceiveMessageCommand', 'DeleteMessageBatchCommand', 'ChangeMessageVisibilityCommand']);
/** Failures without an answer that the SDK retries (@smithy's transient and network error codes). */
const NO_ANSWER_RETRIED = new Set(['TimeoutError', 'ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
/** A server clock further off than this sets the offset signatures use, as the SDK does from every answer. */
const CLOCK_SKEW_MS = 300_000;
/** A ReceiveMessage without WaitTimeSeconds long-polls for the queue's own setting: at most 20 s. */
const MAX_QUEUE_WAIT_SECONDS = 20;
/** Sockets per origin, as the SDK's request handler. */
const MAX_SOCKETS = 50;

export interface DirectCallsOptions {
  /** How long one request may take past its long poll (WaitTimeSeconds), ms. */
  requestTimeoutMs: number;
}

type Input = Record<string, unknown> & { QueueUrl?: string; WaitTimeSeconds?: number; Entries?: Array<{ Id?: string; MessageBody?: string }> };
interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}
/** The server answered with a status the SDK must handle: the command goes through it. */
const NOT_2XX = Symbol('not 2xx');
/** A retry strategy with retry tokens (the SDK's default); a legacy one leaves the whole call to the SDK. */
type TokenRetryStrategy = Extract<Awaited<ReturnType<SQSClient['config']['retryStrategy']>>, { acquireInitialRetryToken: unknown }>;
type RetryErrorInfo = Parameters<TokenRetryStrategy['refreshRetryTokenForRetry']>[1];

export class DirectCallsSqsClient extends SQSClient {
  readonly #agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS }),
    'https:': new https.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS }),
  };
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
    const signal = (optionsOrCb as { abortSignal?: AbortSignal } | undefined)?.abortSignal;
    const operation = name.slice(0, -'Command'.length);
    const input = command.input as Input;
    return this.#call(operation, input, signal).then((output) =>
      // The SDK's request bound (createSqsClient) does not know about the long poll: it is added here.
      output === NOT_2XX ? super.send(command, { ...optionsOrCb, requestTimeout: this.#boundMs(operation, input) }) : output,
    );
  }

  override destroy(): void {
    this.#agents['http:'].destroy();
    this.#agents['https:'].destroy();
    super.destroy();
  }

  /** The output, or NOT_2XX when the server answered with a status the SDK must handle (or the client's retry strategy is a legacy one). */
  async #call(operation: string, input: Input, signal: AbortSignal | undefined): Promise<unknown> {
    // The client's one strategy, which the SDK's own calls use too: one retry budget for both.
    const strategy = await this.config.retryStrategy();
    if (!('acquireInitialRetryToken' in strategy)) return NOT_2XX;
    const retries: TokenRetryStrategy = strategy;
    let token = await retries.acquireInitialRetryToken('sqs');
    let totalRetryDelay = 0;
    for (;;) {
      try {
        const output = await this.#once(operation, input, signal, token.getRetryCount() + 1, totalRetryDelay);
        if (output !== NOT_2XX) retries.recordSuccess(token);
        return output;
      } catch (error) {
        if (signal?.aborted || !unanswered(error)) throw error;
        // The strategy refuses once maxAttempts is reached or its budget is spent: the error stands.
        token = await retries.refreshRetryTokenForRetry(token, { errorType: 'TRANSIENT', error: error as RetryErrorInfo['error'] }).catch(() => {
          throw error;
        });
        totalRetryDelay += token.getRetryDelay();
        await sleep(token.getRetryDelay(), undefined, { signal }); // rejects with an AbortError on abort
      }
    }
  }

  async #once(operation: string, input: Input, signal: AbortSignal | undefined, attempts: number, totalRetryDelay: number): Promise<unknown> {
    const target = this.#endpoint ?? new URL('/', String(input.QueueUrl));
    const path = target.pathname.endsWith('/') ? target.pathname : `${target.pathname}/`;
    const body = JSON.stringify(input, serializable);
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
        path,
        query: {},
        headers: {
          host: target.host,
          'content-type': 'application/x-amz-json-1.0',
          'x-amz-target': `AmazonSQS.${operation}`,
          'x-amzn-query-mode': 'true',
        },
        body,
      },
      { signingDate: new Date(Date.now() + this.config.systemClockOffset) },
    );
    const answer = await this.#post(target, path, signed.headers, body, this.#boundMs(operation, input), signal);
    this.#correctClock(answer);
    if (answer.status < 200 || answer.status >= 300) return NOT_2XX;
    let parsed: unknown;
    try {
      parsed = answer.body.length === 0 ? {} : JSON.parse(answer.body);
    } catch (error) {
      throw new CodedError('SQS_ANSWER_UNREADABLE', `the queue's answer to ${operation} is not JSON (HTTP ${answer.status})`, { cause: error });
    }
    const output: Record<string, unknown> = {
      ...(parsed as Record<string, unknown>),
      $metadata: {
        httpStatusCode: answer.status,
        requestId: header(answer.headers, 'x-amzn-requestid') ?? header(answer.headers, 'x-amz-request-id'),
        extendedRequestId: header(answer.headers, 'x-amz-id-2'),
        attempts,
        totalRetryDelay,
      },
    };
    if (operation === 'ReceiveMessage') checkReceived(output);
    if (operation === 'SendMessageBatch') checkSent(input, output);
    return output;
  }

  /** How long one request of `operation` may wait for its answer: its long poll, then the request timeout. */
  #boundMs(operation: string, input: Input): number {
    const waitSeconds = input.WaitTimeSeconds ?? (operation === 'ReceiveMessage' ? MAX_QUEUE_WAIT_SECONDS : 0);
    return waitSeconds * 1000 + this.#requestTimeoutMs;
  }

  /** As the SDK does from every answer: a server clock more than 5 minutes off sets the offset signatures use. */
  #correctClock(answer: Answer): void {
    const date = header(answer.headers, 'date');
    if (!date) return;
    const offset = Date.parse(date) - Date.now();
    if (Number.isFinite(offset) && Math.abs(offset - this.config.systemClockOffset) > CLOCK_SKEW_MS) this.config.systemClockOffset = offset;
  }

  #post(target: URL, path: string, headers: Record<string, string>, body: string, timeoutMs: number, signal: AbortSignal | undefined): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      if (signal?.aborted) return reject(abortError());
      const request = (target.protocol === 'https:' ? https : http).request(
        {
          protocol: target.protocol,
          // An IPv6 literal without its brackets, as the SDK's request handler passes it.
          hostname: target.hostname.replace(/^\[(.*)\]$/, '$1'),
          port: target.port || undefined,
          path,
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

/** A failure before any answer arrived, of a kind the SDK retries. */
function unanswered(error: unknown): boolean {
  const e = error as { name?: unknown; code?: unknown };
  return (typeof e.name === 'string' && NO_ANSWER_RETRIED.has(e.name)) || (typeof e.code === 'string' && NO_ANSWER_RETRIED.has(e.code));
}

function header(headers: http.IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * JSON.stringify replacer: binary values (Uint8Array and Buffer; `this[key]` is the value before its
 * toJSON) travel as base64, and null members are left out, as the SDK's serializer does.
 */
function serializable(this: Record<string, unknown>, key: string, value: unknown): unknown {
  const raw = this[key];
  if (raw instanceof Uint8Array) return Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('base64');
  return value === null ? undefined : value;
}

const md5 = (text: string) => createHash('md5').update(text, 'utf8').digest('hex');

/** As the SDK: a body whose MD5 is missing or does not match fails the call; binary attributes become bytes. */
function checkReceived(output: Record<string, unknown>): void {
  if (!Array.isArray(output.Messages)) return;
  const bad: string[] = [];
  for (const m of output.Messages as Array<{ Body?: string; MD5OfBody?: string; MessageId?: string; MessageAttributes?: Record<string, { BinaryValue?: unknown }> }>) {
    if (typeof m.Body === 'string' && m.Body.length > 0 && md5(m.Body) !== m.MD5OfBody) bad.push(m.MessageId ?? '');
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
    if (typeof body === 'string' && md5(body) !== s.MD5OfMessageBody) bad.push(s.MessageId ?? '');
  }
  if (bad.length > 0) throw new Error(`Invalid MD5 checksum on messages: ${bad.join(', ')}`);
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
