// Watches the receives of the consumed queues for a queue that does not exist. sqs-consumer treats
// that answer as a connection error and simply polls again 10 s later, so a worker consuming a queue
// nobody provisioned (a typo in the URL prefix, a queue deleted) looked healthy while it received
// nothing. The readiness probe reads `missing` (src/work/worker-runtime.ts): not ready until a receive
// of that queue succeeds again.
import type { SQSClient } from '@aws-sdk/client-sqs';

/** Error names and codes of "no such queue": the SDK's exception, and the query-protocol code. */
const MISSING_QUEUE = /^(QueueDoesNotExist|AWS\.SimpleQueueService\.NonExistentQueue)$/;

/** True when `error` says the queue does not exist. */
export function isMissingQueueError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const e = error as { name?: unknown; Code?: unknown; code?: unknown; __type?: unknown };
  return [e.name, e.Code, e.code, e.__type].some((v) => typeof v === 'string' && MISSING_QUEUE.test(v.replace(/^.*#/, '')));
}

export interface ReceiveWatch {
  /** The client to give the queue's consumer: the same client, its ReceiveMessage calls watched. */
  client: SQSClient;
  /** True from a receive answered "no such queue" until a receive succeeds. */
  readonly missing: boolean;
}

/** Wraps `sqs` so that the receives sent through it say whether their queue exists. */
export function watchReceives(sqs: SQSClient): ReceiveWatch {
  let missing = false;
  const client = Object.create(sqs) as SQSClient;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  (client as { send: (...args: any[]) => Promise<unknown> }).send = async (command: any, ...rest: any[]) => {
    const name: unknown = command?.constructor?.name;
    const answer = (sqs.send as (...args: unknown[]) => Promise<unknown>).call(sqs, command, ...rest);
    if (name !== 'ReceiveMessageCommand') return answer;
    try {
      const out = await answer;
      missing = false;
      return out;
    } catch (error) {
      if (isMissingQueueError(error)) missing = true;
      throw error;
    }
  };
  return {
    client,
    get missing() {
      return missing;
    },
  };
}
