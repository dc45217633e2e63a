// Visibility changes that several messages ask for in the same turn of the event loop (the members of
// a group commit kept for their unit's window, src/work/runtime/execute/group-commit.ts) go out together, as
// ChangeMessageVisibilityBatch calls of up to 10 entries, instead of one call each.
import { ChangeMessageVisibilityBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { CodedError } from '../errors/coded-error.ts';

/** The most entries of one ChangeMessageVisibilityBatch call (SQS's limit). */
const MAX_ENTRIES = 10;

/** A ChangeMessageVisibilityBatch entry failed; `code` is the queue's own error code for that entry. */
export class VisibilityChangeFailed extends CodedError {
  constructor(code: string, message: string) {
    super(code, `the visibility of the message could not be changed (${code}): ${message}`);
    this.name = 'VisibilityChangeFailed';
  }
}

interface Pending {
  receiptHandle: string;
  seconds: number;
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * Returns a function that changes one message's visibility to `seconds`; the changes asked for in one
 * turn leave together once it ends. Each settles with its own entry's result.
 */
export function createVisibilityBatcher(sqs: SQSClient, queueUrl: string): (receiptHandle: string, seconds: number) => Promise<void> {
  let pending: Pending[] = [];
  const flush = () => {
    const all = pending;
    pending = [];
    for (let i = 0; i < all.length; i += MAX_ENTRIES) {
      const batch = all.slice(i, i + MAX_ENTRIES);
      sqs
        .send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: queueUrl,
            Entries: batch.map((p, n) => ({ Id: String(n), ReceiptHandle: p.receiptHandle, VisibilityTimeout: p.seconds })),
          }),
        )
        .then(
          (out) => {
            const failed = new Map((out.Failed ?? []).map((f) => [f.Id, f]));
            batch.forEach((p, n) => {
              const f = failed.get(String(n));
              if (f) p.reject(new VisibilityChangeFailed(f.Code ?? 'NotChanged', f.Message ?? 'refused by the queue'));
              else p.resolve();
            });
          },
          (error: unknown) => {
            for (const p of batch) p.reject(error);
          },
        );
    }
  };
  return (receiptHandle, seconds) =>
    new Promise<void>((resolve, reject) => {
      if (pending.length === 0) setImmediate(flush);
      pending.push({ receiptHandle, seconds, resolve, reject });
    });
}
