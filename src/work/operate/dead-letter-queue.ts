// `svc dlq list` and `svc dlq redrive`: reads a dead-letter queue through the SQS API (so it works on
// cloud SQS with the same SVC_SQS_* variables) and redrives each message's run (redrive-run.ts).
//
// Reading a queue hides what is read for a while (SQS has no peek): messages are received with a
// visibility timeout long enough for the whole pass, and every message not deleted is made visible
// again at once at the end, so a list or a dry run leaves the queue as it found it (receive counts
// grow, which a dead-letter queue does not act on). A message is deleted only after the commit of its
// run's redrive (or when its run was already redriven, so a crash between commit and delete heals on
// the next pass). A message whose run does not exist, is not final, or did not fail is reported and
// left in place. Messages moved by the runner carry their error context as message attributes;
// messages moved by SQS's own redrive (7 receives) carry none, so their error code comes from the run.
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { Sql } from '../../db/client.ts';
import { parseEnvelope, type Envelope } from '../runtime/produce/envelope.ts';
import { findRun } from './find-run.ts';
import { checkOperatorLabel, OperateError } from './operate-error.ts';
import { redriveRunNow, BULK_REDRIVE_UNCONFIRMED_MAX, type KeySource, type RedriveResult } from './redrive-run.ts';

/** Seconds the messages of one pass stay hidden (released at the end of the pass). */
export const DLQ_PASS_VISIBILITY_SECONDS = 300;

/**
 * Most messages one redrive pass reads while looking for `max` matching runs (10,000): a `--max` counts
 * runs redriven, so messages that do not match are read past, but never without end.
 */
export const DLQ_REDRIVE_READ_BOUND = 10_000;

export interface DeadLetter {
  messageId: string;
  /** Null when the body is not a run envelope. */
  runId: string | null;
  unit: string | null;
  /** From the message's error context, else the run's; null when neither says. */
  errorCode: string | null;
  /** Receives of the original message when it was dead-lettered (its context), else the DLQ's own count. */
  receiveCount: number | null;
  /** Seconds since the message entered the dead-letter queue. */
  ageSeconds: number | null;
  sourceQueue: string | null;
  /** Status of the run in the database: null when it does not exist (or the body has no run id). */
  runStatus: string | null;
}

interface Received {
  message: Message;
  envelope: Envelope | null;
  letter: DeadLetter;
}

export interface DlqTarget {
  sqs: SQSClient;
  /** URL of the dead-letter queue (`<prefix><queue>-dlq`). */
  dlqUrl: string;
}

function attribute(m: Message, name: string): string | null {
  const v = m.MessageAttributes?.[name]?.StringValue;
  return v && v !== '-' ? v : null;
}

async function runFacts(sql: Sql, runId: string | null): Promise<{ status: string; errorCode: string | null } | null> {
  if (!runId) return null;
  const found = await findRun(sql, runId).catch((error: unknown) => {
    if ((error as { code?: string }).code === 'RUN_ID_INVALID') return null;
    throw error;
  });
  if (!found) return null;
  const fromOutcome = (found.run.outcome.error as { code?: unknown } | undefined)?.code;
  if (typeof fromOutcome === 'string') return { status: found.run.status, errorCode: fromOutcome };
  const [ev] = await sql<{ error_code: string }[]>`
    SELECT error_code FROM ${sql(found.scope === 'tenant' ? 'task_run_events' : 'platform_task_run_events')}
     WHERE run_id = ${found.run.runId} AND event = 'failed' ORDER BY id DESC LIMIT 1`;
  return { status: found.run.status, errorCode: ev?.error_code || null };
}

/** Number of messages SQS reports in the queue (approximate, as SQS says). */
export async function countDeadLetters(t: DlqTarget): Promise<number> {
  const out = await t.sqs.send(new GetQueueAttributesCommand({ QueueUrl: t.dlqUrl, AttributeNames: ['ApproximateNumberOfMessages'] }));
  return Number(out.Attributes?.ApproximateNumberOfMessages ?? '0') || 0;
}

/**
 * One receive of up to `want` (at most 10) messages not seen before in this pass, hidden for
 * DLQ_PASS_VISIBILITY_SECONDS. `exhausted` when the queue had nothing more to give.
 */
async function receiveBatch(sql: Sql, t: DlqTarget, seen: Set<string>, want: number): Promise<{ batch: Received[]; exhausted: boolean }> {
  const out = await t.sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: t.dlqUrl,
      MaxNumberOfMessages: Math.max(1, Math.min(10, want)),
      WaitTimeSeconds: 1,
      VisibilityTimeout: DLQ_PASS_VISIBILITY_SECONDS,
      MessageAttributeNames: ['All'],
      MessageSystemAttributeNames: ['ApproximateReceiveCount', 'SentTimestamp'],
    }),
  );
  const messages = out.Messages ?? [];
  const batch: Received[] = [];
  for (const m of messages) {
    if (!m.MessageId || seen.has(m.MessageId)) continue;
    seen.add(m.MessageId);
    let envelope: Envelope | null;
    try {
      envelope = parseEnvelope(m.Body ?? '');
    } catch {
      envelope = null;
    }
    const runId = envelope?.run_id ?? attribute(m, 'run_id');
    const facts = await runFacts(sql, runId);
    const sent = Number(m.Attributes?.SentTimestamp ?? '');
    const contextCount = attribute(m, 'receive_count');
    batch.push({
      message: m,
      envelope,
      letter: {
        messageId: m.MessageId,
        runId,
        unit: envelope?.name ?? attribute(m, 'unit'),
        errorCode: attribute(m, 'error_code') ?? facts?.errorCode ?? null,
        receiveCount: contextCount ? Number(contextCount) : Number(m.Attributes?.ApproximateReceiveCount ?? '') || null,
        ageSeconds: Number.isFinite(sent) && sent > 0 ? Math.max(0, Math.round((Date.now() - sent) / 1000)) : null,
        sourceQueue: attribute(m, 'source_queue'),
        runStatus: facts?.status ?? null,
      },
    });
  }
  return { batch, exhausted: messages.length === 0 };
}

/** Receives up to `max` distinct messages, hidden for DLQ_PASS_VISIBILITY_SECONDS. */
async function receiveAll(sql: Sql, t: DlqTarget, max: number): Promise<Received[]> {
  const seen = new Set<string>();
  const received: Received[] = [];
  while (received.length < max) {
    const { batch, exhausted } = await receiveBatch(sql, t, seen, max - received.length);
    received.push(...batch);
    if (exhausted) break;
  }
  return received;
}

async function release(t: DlqTarget, received: readonly Received[]): Promise<void> {
  for (const r of received) {
    await t.sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: t.dlqUrl, ReceiptHandle: r.message.ReceiptHandle!, VisibilityTimeout: 0 })).catch(() => {});
  }
}

/** What is in the dead-letter queue (up to `max` messages, default 1,000); the queue is left as it was. */
export async function listDeadLetters(sql: Sql, t: DlqTarget, options: { max?: number } = {}): Promise<DeadLetter[]> {
  const received = await receiveAll(sql, t, options.max ?? BULK_REDRIVE_UNCONFIRMED_MAX);
  await release(t, received);
  return received.map((r) => r.letter);
}

export type DlqAction =
  /** The run was redriven now, then the message deleted. */
  | 'redriven'
  /** The run had been redriven before: the message was deleted. */
  | 'already_redriven'
  /** Dry run: what would happen. */
  | 'would_redrive'
  | 'would_delete'
  /** Reported and left in place. */
  | 'left';

export interface DlqOutcome {
  letter: DeadLetter;
  action: DlqAction;
  /** The redrive run (created now or earlier). */
  newRunId?: string;
  /** Why a message was left in place. */
  reason?: string;
}

export interface DlqRedriveInput {
  by: string;
  /** Only messages of this unit. */
  unit?: string;
  /** Only messages with this error code. */
  errorCode?: string;
  /**
   * At most this many runs are redriven (on a dry run: would be); messages are read until that many
   * matched or the queue is exhausted (at most DLQ_REDRIVE_READ_BOUND read). Without it a queue of
   * more than 1,000 messages is refused.
   */
  max?: number;
  /** Read and report; write nothing, delete nothing. */
  dryRun?: boolean;
  instance?: string;
  /** Business key sources of the units (see RedriveInput.keySource). */
  keySource?: KeySource;
}

export interface DlqRedriveReport {
  dryRun: boolean;
  outcomes: DlqOutcome[];
  /** Messages read that did not match --unit / --error-code (left in place, not listed). */
  unmatched: number;
}

function leaveReason(letter: DeadLetter): string | null {
  if (!letter.runId) return 'the message is not a run envelope';
  if (!letter.runStatus) return `run ${letter.runId} does not exist`;
  if (letter.runStatus !== 'failed') {
    return ['queued', 'running', 'retrying'].includes(letter.runStatus)
      ? `run ${letter.runId} is ${letter.runStatus}, not final: it may still run`
      : `run ${letter.runId} is ${letter.runStatus}: only failed runs are redriven`;
  }
  return null;
}

/**
 * Redrives the run of each matching message (redriveRunNow, payload from the outbox or the message)
 * and deletes the message after that commit, until `max` runs are redriven. Refuses (BULK_LIMIT_EXCEEDED, nothing read) a queue of
 * more than 1,000 messages without `max`.
 */
export async function redriveDeadLetters(sql: Sql, t: DlqTarget, input: DlqRedriveInput): Promise<DlqRedriveReport> {
  const by = checkOperatorLabel(input.by);
  if (input.max !== undefined && (!Number.isInteger(input.max) || input.max < 1)) {
    throw new OperateError('RUN_FILTER_INVALID', '--max must be a whole number of at least 1');
  }
  if (input.max === undefined) {
    const count = await countDeadLetters(t);
    if (count > BULK_REDRIVE_UNCONFIRMED_MAX) {
      throw new OperateError(
        'BULK_LIMIT_EXCEEDED',
        `the dead-letter queue holds about ${count} messages, more than ${BULK_REDRIVE_UNCONFIRMED_MAX}: pass --max <n> to redrive at most n of them`,
      );
    }
  }
  const limit = input.max ?? Number.POSITIVE_INFINITY;
  const readBound = input.max === undefined ? BULK_REDRIVE_UNCONFIRMED_MAX : DLQ_REDRIVE_READ_BOUND;
  const seen = new Set<string>();
  const received: Received[] = [];
  const deleted = new Set<Received>();
  const outcomes: DlqOutcome[] = [];
  let unmatched = 0;
  let redriven = 0;
  // Two messages of one run (the runner's copy and SQS's own move): the first redrives, the second finds it redriven.
  try {
    reading: while (redriven < limit && received.length < readBound) {
      const { batch, exhausted } = await receiveBatch(sql, t, seen, readBound - received.length);
      received.push(...batch);
      for (const r of batch) {
        // The rest of the batch is released untouched in the finally.
        if (redriven >= limit) break reading;
        const { letter } = r;
        if ((input.unit && letter.unit !== input.unit) || (input.errorCode && letter.errorCode !== input.errorCode)) {
          unmatched++;
          continue;
        }
        const reason = leaveReason(letter);
        if (reason) {
          outcomes.push({ letter, action: 'left', reason });
          continue;
        }
        if (input.dryRun) {
          const earlier = await sql<{ run_id: string }[]>`
            SELECT run_id::text FROM task_runs WHERE causation_id = ${letter.runId} AND trigger = 'redrive'
            UNION ALL SELECT run_id::text FROM platform_task_runs WHERE causation_id = ${letter.runId} AND trigger = 'redrive'`;
          const planned = outcomes.some((o) => o.action === 'would_redrive' && o.letter.runId === letter.runId);
          const wouldRedrive = !earlier[0] && !planned;
          outcomes.push(
            wouldRedrive
              ? { letter, action: 'would_redrive' }
              : { letter, action: 'would_delete', ...(earlier[0] ? { newRunId: earlier[0].run_id } : {}), reason: 'its run is already redriven' },
          );
          if (wouldRedrive) redriven++;
          continue;
        }
        let result: RedriveResult;
        try {
          result = await redriveRunNow(sql, { runId: letter.runId!, by, ...(r.envelope ? { envelope: r.envelope } : {}), ...(input.instance ? { instance: input.instance } : {}), ...(input.keySource ? { keySource: input.keySource } : {}) });
        } catch (error) {
          if (!(error instanceof OperateError)) throw error;
          outcomes.push({ letter, action: 'left', reason: `${error.code}: ${error.message}` });
          continue;
        }
        // Only after the redrive committed: a crash before this delete leaves the message, whose next pass finds the run redriven.
        await t.sqs.send(new DeleteMessageCommand({ QueueUrl: t.dlqUrl, ReceiptHandle: r.message.ReceiptHandle! }));
        deleted.add(r);
        outcomes.push({ letter, action: result.result, newRunId: result.newRunId });
        if (result.result === 'redriven') redriven++;
      }
      if (exhausted) break;
    }
  } finally {
    await release(t, received.filter((r) => !deleted.has(r)));
  }
  return { dryRun: Boolean(input.dryRun), outcomes, unmatched };
}
