// Per-tenant concurrency of one unit in this worker process (`tenantConcurrency` in the unit
// definition), held like the unit's slots (slot-limit.ts), but never waited for: a message of a tenant
// already at its limit goes back to the queue with a short delay, holding no slot meanwhile, so the
// process's slots stay free for other tenants' messages. For a `groupCommit` unit this share counts the
// tenant's messages held (GROUP_COMMIT_MAX_RUNS, 40, per slot of its share, as the unit's own), and its
// groups take at most `tenantConcurrency` of the unit's slots (src/work/runtime/execute/group-commit.ts).
//
// Going back must not spend the message's receives (the 5th receive takes the permanent path, and a
// message that never ran has not failed): the message is sent again as a copy, delayed, carrying the
// receives it already had in an attribute, and the original is deleted. Should the send fail, the
// original is only made visible again after the delay (that one receive is then spent). Should the
// delete fail after the send, the copy is a duplicate delivery, which the idempotency gate absorbs.
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  SendMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { messagesPerSlot, type WorkUnit } from '../../define/unit.ts';

/** How long a message over its tenant's limit waits before it is received again, seconds. */
export const TENANT_LIMIT_DELAY_SECONDS = 1;
/** Message attribute: receives the message had before it went back over a tenant limit. */
export const RECEIVES_BEFORE_ATTRIBUTE = 'svc_receives_before';

export class TenantSlots {
  readonly #limits: ReadonlyMap<string, number>;
  readonly #held = new Map<string, number>();

  /** `limits`: tenantConcurrency by unit name (units without one are not limited per tenant). */
  constructor(limits: ReadonlyMap<string, number>) {
    this.#limits = limits;
  }

  /**
   * The tenant shares of the consumer's messages: `tenantConcurrency` slots' worth (messagesPerSlot);
   * a `groupCommit` unit's tenant groups take at most `tenantConcurrency` slots (group-commit.ts).
   */
  static forUnits(units: Iterable<WorkUnit>): TenantSlots {
    const limits = new Map<string, number>();
    for (const unit of units) if (unit.tenantConcurrency !== null) limits.set(unit.name, unit.tenantConcurrency * messagesPerSlot(unit));
    return new TenantSlots(limits);
  }

  /**
   * Takes one of the tenant's slots for this message's unit: the key to release, null when the message
   * is not limited (no limit on its unit, a platform run, an unreadable body), false when the tenant is
   * at its limit. `json`: the message body parsed as JSON (undefined when it is not JSON).
   */
  tryAcquire(json: unknown): string | null | false {
    if (this.#limits.size === 0) return null;
    const { name, tenant_id: tenantId } = (typeof json === 'object' && json !== null ? json : {}) as { name?: unknown; tenant_id?: unknown };
    if (typeof name !== 'string' || typeof tenantId !== 'string') return null;
    const limit = this.#limits.get(name);
    if (limit === undefined) return null;
    const key = `${name}\u0000${tenantId}`;
    const held = this.#held.get(key) ?? 0;
    if (held >= limit) return false;
    this.#held.set(key, held + 1);
    return key;
  }

  release(key: string): void {
    const held = (this.#held.get(key) ?? 1) - 1;
    if (held <= 0) this.#held.delete(key);
    else this.#held.set(key, held);
  }
}

/** The receives a message had before it last went back over a tenant limit (0 when it never did). */
export function receivesBefore(message: Message): number {
  const n = Number(message.MessageAttributes?.[RECEIVES_BEFORE_ATTRIBUTE]?.StringValue ?? 0);
  return Number.isInteger(n) && n > 0 ? n : 0;
}

/**
 * Sends the message back delayed (see the header), keeping its receives but this one. `receiveCount` is
 * the delivery's effective receive count (this receive included).
 */
export async function sendBackOverTenantLimit(sqs: SQSClient, queueUrl: string, message: Message, receiveCount: number): Promise<void> {
  await sendBackKeepingReceives(sqs, queueUrl, message, receiveCount, TENANT_LIMIT_DELAY_SECONDS);
}

/**
 * Sends the message back as a copy visible after `delaySeconds`, carrying the receives it had before
 * this one, and deletes the original; should the send fail, the original is made visible after the
 * delay instead (that receive is then spent).
 */
export async function sendBackKeepingReceives(sqs: SQSClient, queueUrl: string, message: Message, receiveCount: number, delaySeconds: number): Promise<void> {
  try {
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: message.Body ?? '',
        DelaySeconds: delaySeconds,
        MessageAttributes: { [RECEIVES_BEFORE_ATTRIBUTE]: { DataType: 'Number', StringValue: String(Math.max(0, receiveCount - 1)) } },
      }),
    );
  } catch {
    await sqs.send(
      new ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: message.ReceiptHandle!, VisibilityTimeout: delaySeconds }),
    );
    return;
  }
  await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.ReceiptHandle! }));
}
