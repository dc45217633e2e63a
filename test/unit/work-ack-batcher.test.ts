// The consumer's ack batcher: acks share DeleteMessageBatch calls, and each ack settles with its own
// entry's result. The SQS client is a stub here (pure logic); the real deletes are exercised by the
// worker integration tests.
import type { SQSClient } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { createAckBatcher, DeleteFailed } from '../../src/work/runtime/consume/consumer.ts';

interface Call {
  handles: string[];
}

function stubSqs(answer: (handles: string[]) => Promise<{ Successful?: Array<{ Id: string }>; Failed?: Array<{ Id: string; Code: string; Message: string }> }>) {
  const calls: Call[] = [];
  const client = {
    async send(command: { input: { Entries: Array<{ Id: string; ReceiptHandle: string }> } }) {
      const handles = command.input.Entries.map((e) => e.ReceiptHandle);
      calls.push({ handles });
      return answer(handles);
    },
  } as unknown as SQSClient;
  return { client, calls };
}

const allOk = async (handles: string[]) => ({ Successful: handles.map((_, i) => ({ Id: String(i) })) });

describe('ack batcher', () => {
  it('acks issued together share DeleteMessageBatch calls of at most 10 entries', async () => {
    const { client, calls } = stubSqs(allOk);
    const ack = createAckBatcher(client, 'http://q', 5);
    const handles = Array.from({ length: 23 }, (_, i) => `h${i}`);
    await Promise.all(handles.map((h) => ack(h)));
    expect(calls.map((c) => c.handles.length)).toEqual([10, 10, 3]);
    expect(calls.flatMap((c) => c.handles)).toEqual(handles);
  });

  it('a lone ack goes out after the linger, not before', async () => {
    const { client, calls } = stubSqs(allOk);
    const ack = createAckBatcher(client, 'http://q', 30);
    const t0 = performance.now();
    await ack('only');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(25);
    expect(calls).toEqual([{ handles: ['only'] }]);
  });

  it('a failed entry rejects only its own ack; a failed call rejects every ack of that call', async () => {
    const partial = stubSqs(async () => ({ Successful: [{ Id: '0' }, { Id: '2' }], Failed: [{ Id: '1', Code: 'ReceiptHandleIsInvalid', Message: 'bad handle' }] }));
    const ack = createAckBatcher(partial.client, 'http://q', 1);
    const results = await Promise.allSettled(['a', 'b', 'c'].map((h) => ack(h)));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const reason = (results[1] as PromiseRejectedResult).reason as DeleteFailed;
    expect(reason).toBeInstanceOf(DeleteFailed);
    expect(reason.code).toBe('ReceiptHandleIsInvalid');

    // An entry the response does not mention is not acknowledged either.
    const silent = stubSqs(async () => ({ Successful: [{ Id: '0' }] }));
    const ack2 = createAckBatcher(silent.client, 'http://q', 1);
    const results2 = await Promise.allSettled(['x', 'y'].map((h) => ack2(h)));
    expect(results2.map((r) => r.status)).toEqual(['fulfilled', 'rejected']);

    const down = stubSqs(async () => {
      throw new Error('endpoint down');
    });
    const ack3 = createAckBatcher(down.client, 'http://q', 1);
    const results3 = await Promise.allSettled(['p', 'q'].map((h) => ack3(h)));
    expect(results3.every((r) => r.status === 'rejected' && /endpoint down/.test(String(r.reason)))).toBe(true);
  });
});
