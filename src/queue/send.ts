// One SendMessageBatch call, reporting per entry which ids went out. A call that fails as a whole
// (queue missing, endpoint down, credentials refused) reports every entry as failed with the reason.
import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';

export interface OutgoingMessage {
  /** Batch entry id: [A-Za-z0-9_-]{1,80}, unique within the call. */
  id: string;
  body: string;
  /** MessageGroupId (1..128 characters): the group SQS fair queues share capacity by. Omitted when absent. */
  groupId?: string;
}

export interface BatchSendResult {
  sent: Array<{ id: string; messageId: string }>;
  /**
   * `senderFault`: the queue answered and refused this entry itself (SendMessageBatch's per-entry
   * SenderFault: its body or attributes), as opposed to a failure of the whole call or of the server.
   */
  failed: Array<{ id: string; code: string; message: string; senderFault?: true }>;
  /** The call got no answer at all (a timeout, a refused or reset connection), not an error answer. */
  unanswered?: true;
}

export async function sendMessageBatch(client: SQSClient, queueUrl: string, messages: readonly OutgoingMessage[]): Promise<BatchSendResult> {
  if (messages.length === 0) return { sent: [], failed: [] };
  try {
    const out = await client.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: messages.map((m) => ({ Id: m.id, MessageBody: m.body, ...(m.groupId ? { MessageGroupId: m.groupId } : {}) })),
      }),
    );
    const sent = (out.Successful ?? []).map((s) => ({ id: s.Id!, messageId: s.MessageId ?? '' }));
    const failed: BatchSendResult['failed'] = (out.Failed ?? []).map((f) => ({
      id: f.Id!,
      code: f.Code ?? 'SendFailed',
      message: f.Message ?? '',
      ...(f.SenderFault === true ? { senderFault: true as const } : {}),
    }));
    // An entry the response does not mention did not go out.
    const seen = new Set([...sent.map((s) => s.id), ...failed.map((f) => f.id)]);
    for (const m of messages) if (!seen.has(m.id)) failed.push({ id: m.id, code: 'NotAcknowledged', message: 'missing from the batch response' });
    return { sent, failed };
  } catch (error) {
    const e = error as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
    const failed = messages.map((m) => ({ id: m.id, code: e.name ?? 'SendFailed', message: e.message ?? String(error) }));
    return e.$metadata?.httpStatusCode === undefined ? { sent: [], failed, unanswered: true } : { sent: [], failed };
  }
}
