// SQS client built from configuration only: region, optional endpoint, and either fixed local
// credentials or the default AWS credential chain. Nothing here knows whether it talks to a cloud
// queue or the in-memory local server.
import { SQSClient, type SQSClientConfig } from '@aws-sdk/client-sqs';
import { DEFAULT_SQS_REQUEST_TIMEOUT_MS } from '../config/limits.ts';
import { DirectCallsSqsClient } from './direct-calls.ts';

/** Fixed credentials for a local SQS-protocol server (`SVC_SQS_LOCAL_CREDENTIALS=true`); not secrets. */
export const LOCAL_SQS_CREDENTIALS = Object.freeze({ accessKeyId: 'local', secretAccessKey: 'local' });

export interface SqsSettings {
  /** `SVC_SQS_REGION`, e.g. `us-east-1`. */
  region: string;
  /** `SVC_SQS_ENDPOINT`; unset means the region's public endpoint. */
  endpoint?: string | undefined;
  /** `SVC_SQS_QUEUE_URL_PREFIX`; a queue URL is this prefix plus the queue name. */
  queueUrlPrefix: string;
  /** `SVC_SQS_LOCAL_CREDENTIALS`: true uses LOCAL_SQS_CREDENTIALS, false the default credential chain. */
  localCredentials: boolean;
  /** `SVC_SQS_REQUEST_TIMEOUT_MS`: how long a call on the delivery path waits for its answer past its long poll; default 10000. */
  requestTimeoutMs?: number | undefined;
  /** `SVC_SQS_DIRECT_CALLS`: false sends every call through the SDK (src/queue/direct-calls.ts is the fast path); default true. */
  directCalls?: boolean | undefined;
}

export interface SqsClientOptions {
  /** SDK attempts per call, default 3; tests and the relay may prefer failing fast and retrying themselves. */
  maxAttempts?: number;
  /**
   * Default: the settings' `directCalls`, else true: the delivery path's four calls skip the SDK's
   * middleware stack. false gives the plain SDK client with the same settings (`npm run bench -- work`
   * times the raw hop through both).
   */
  directCalls?: boolean;
}

export function createSqsClient(settings: Omit<SqsSettings, 'queueUrlPrefix'>, options: SqsClientOptions = {}): SQSClient {
  const requestTimeoutMs = settings.requestTimeoutMs ?? DEFAULT_SQS_REQUEST_TIMEOUT_MS;
  const config = {
    region: settings.region,
    ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
    // A copy: the SDK annotates the credentials object it is given.
    ...(settings.localCredentials ? { credentials: { ...LOCAL_SQS_CREDENTIALS } } : {}),
    maxAttempts: options.maxAttempts ?? 3,
    // Every other command is bounded too (the SDK sets no limit of its own); a long poll the SDK sends
    // gets its wait on top (direct-calls.ts).
    requestHandler: { requestTimeout: requestTimeoutMs, throwOnRequestTimeout: true },
  };
  if ((options.directCalls ?? settings.directCalls) === false) return new SdkSqsClient(config, requestTimeoutMs);
  // The delivery path's four calls skip the SDK's middleware stack (src/queue/direct-calls.ts).
  return new DirectCallsSqsClient(config, { requestTimeoutMs });
}

/** A ReceiveMessage without WaitTimeSeconds long-polls for the queue's own setting: at most 20 s. */
const MAX_QUEUE_WAIT_SECONDS = 20;

/**
 * The plain SDK client (SVC_SQS_DIRECT_CALLS=false). Its request timeout bounds the whole exchange, so
 * an idle long poll (20 s by default) would fail every time against the default 10 s: a receive gets
 * its wait on top, as on the direct path, unless the caller set a request timeout of its own.
 */
export class SdkSqsClient extends SQSClient {
  readonly #requestTimeoutMs: number;

  constructor(config: SQSClientConfig, requestTimeoutMs: number) {
    super(config);
    this.#requestTimeoutMs = requestTimeoutMs;
  }

  // One implementation for the SDK's overloads: the callback forms and every other command unchanged.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override send(command: any, optionsOrCb?: any, cb?: any): any {
    const options = optionsOrCb as { requestTimeout?: number } | undefined;
    if (command?.constructor?.name !== 'ReceiveMessageCommand' || typeof optionsOrCb === 'function' || typeof cb === 'function' || options?.requestTimeout !== undefined) {
      return super.send(command, optionsOrCb, cb);
    }
    const wait = (command.input as { WaitTimeSeconds?: number } | undefined)?.WaitTimeSeconds ?? MAX_QUEUE_WAIT_SECONDS;
    return super.send(command, { ...options, requestTimeout: wait * 1000 + this.#requestTimeoutMs });
  }
}
