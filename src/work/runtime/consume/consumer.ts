// Receives the messages of one queue with sqs-consumer and hands each delivery to the runner.
//
// sqs-consumer does the polling: long poll (SVC_SQS_WAIT_SECONDS), batch receive, the queue's
// visibility timeout, ApproximateReceiveCount. Left alone it would process a received batch and poll
// again only once the whole batch is done, so one slow message would idle every other slot of the
// queue. We use its hooks instead, and the SQS client directly where it cannot express what we need:
// - `handleMessageBatch` starts each message in the background and returns at once, so the library
//   polls again while work runs; `preReceiveMessageCallback` waits until the queue has a free slot,
//   and each ReceiveMessage asks for as many messages as there are free slots when it goes out (the
//   library builds its input before that wait, so the client we hand it sets the count at send
//   time). The messages this process is working on for a queue therefore never exceed what it holds
//   (`slots`: one per slot of its units, GROUP_COMMIT_MAX_RUNS per slot of a `groupCommit` unit, whose
//   slot runs a whole group: worker-runtime.ts messagesForQueue); settled messages waiting for their
//   delete hold none.
// - several receives at once: sqs-consumer polls one receive at a time, and waits a timer
//   turn (at least 1 ms) after each before the next, so one poller tops out at a few hundred receives a
//   second however many slots wait. A queue with many slots runs `receivers` pollers (one per two full
//   batches of slots, at most MAX_RECEIVERS) over the same slots: a receive reserves the slots it asks
//   for when it goes out (`asking`), and its messages hold them from its answer on, so the receives
//   under way never ask together for more than is free. Only the first poller long-polls; the others
//   receive while the queue has a backlog (the last receive came back full) and without waiting, so
//   an idle or lightly loaded queue costs one long poll as before (a server that answers every waiting
//   poll at each new message, as fauxqs does, would otherwise answer the extra ones empty).
// - receive linger: with fewer than half the slots free (and at most 10), the next receive
//   waits up to `receiveLingerMs` for more to free. Under load a receive then carries several
//   messages instead of one as each run ends: fewer ReceiveMessage calls, and the registrations of
//   one batch share one statement (start-coalescer.ts). An idle or lightly loaded queue (half its
//   slots free) receives at once, so pick-up latency does not pay the linger.
// - the library never acknowledges (the handler returns undefined): the runner deletes, delays
//   (ChangeMessageVisibility for backoff or a held key) or dead-letters each message itself, because
//   the order of those steps against the database matters;
// - our own heartbeat instead of the library's `heartbeatInterval`, so a final visibility change
//   (backoff, release) never races an extension still in flight (see heartbeat.ts).
// - every wait of a delivery outside its handler has a deadline (SVC_STAGE_TIMEOUT_MS, stage-watch.ts,
//   src/db/stage-deadline.ts): a delivery that misses one goes back to the queue (the backoff of a
//   database failure), logged at warn with the stage, and its heartbeat extends it no more, so a wait
//   the driver never settles (a database restart) cannot hold a slot and a run for ever.
// - deletes go out as DeleteMessageBatch: an ack waits at most `ackLingerMs` (SVC_ACK_LINGER_MS) for
//   others to share its call (10 per call), so settled messages cost ~0.1 SQS call each instead of
//   one. The delivery gives its slot back as its ack begins (it has settled: nothing of it runs any
//   more), so the linger never holds a slot; the delivery still counts as in flight (a drain waits for
//   it) until its own entry is deleted, and its ack rejects when that entry failed. A crash inside the
//   linger only brings the message back after its visibility timeout, where the ledger replays it.
// - a success gives its slot back once its effect has committed, before its result is copied to Redis;
//   a group commit gives its members' slots back earlier, once their handlers have returned
//   (`handlerReturned`, docs/group-commit.md); they stay in flight until deleted, as above.
// - a failed receive (the queue server down, refusing or throttling) makes the queue's next receives
//   wait a backoff growing with the failures in a row (receiveRetryMs): sqs-consumer polls again at
//   once after any error but a few it calls connection errors, and once the SDK's retry budget is
//   spent a refused connection fails in well under a millisecond, so a worker whose queue server was
//   gone spun at hundreds of receives a second.
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type Message,
  type ReceiveMessageCommandOutput,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { Consumer } from 'sqs-consumer';
import type { Logger } from 'pino';
import { CodedError } from '../../../errors/coded-error.ts';
import { recordDelivery } from '../../../observe/delivery-metrics.ts';
import { traceDelivery } from '../../../observe/work-tracing.ts';
import { backoffSeconds, boundMs } from '../complete/backoff.ts';
import { startHeartbeat } from './heartbeat.ts';
import { createVisibilityBatcher } from '../../../queue/visibility-batch.ts';
import { runDelivery, type DeadLetterContext, type DeliveryPort, type RunnerDeps } from './runner.ts';
import type { SlotLimit } from './slot-limit.ts';
import { DEFAULT_ACK_LINGER_MS, DEFAULT_RECEIVE_LINGER_MS, DEFAULT_STAGE_TIMEOUT_MS } from '../../../config/limits.ts';
import { boundStage, isStageTimeout, withStageBounds } from '../../../db/stage-deadline.ts';
import { StageWatch } from './stage-watch.ts';
import { RECEIVES_BEFORE_ATTRIBUTE, receivesBefore, sendBackKeepingReceives, sendBackOverTenantLimit, type TenantSlots } from './tenant-slots.ts';
import { RATE_LIMIT_UNCOUNTED_DELAY_SECONDS, waitsInProcess, type RateLimits } from './rate-limit.ts';
import { rateLimitDelaySeconds, type DatabaseRateWindow } from '../execute/rate-window.ts';
import { SERIAL_WAITS_HERE_MAX, type SerialTurns } from '../execute/serial-turn.ts';

/** sqs-consumer (and SQS) receive at most 10 messages per call. */
const MAX_BATCH = 10;

export interface QueueConsumerOptions {
  sqs: SQSClient;
  queue: string;
  queueUrl: string;
  dlqUrl: string;
  /** Visibility timeout of this queue, seconds (also what each heartbeat extends to). */
  visibilitySeconds: number;
  /** Heartbeat interval, ms (SVC_HEARTBEAT_INTERVAL_MS); must be below the visibility timeout. */
  heartbeatIntervalMs: number;
  /** Long-polling wait, seconds (SVC_SQS_WAIT_SECONDS). */
  waitSeconds: number;
  /** The most messages held at once (worker-runtime.ts messagesForQueue); the free ones are what a receive asks for. */
  slots: number;
  /** Process-wide limit of each unit's messages held (its slots; GROUP_COMMIT_MAX_RUNS per slot for a `groupCommit` unit), by unit name. */
  unitSlots: ReadonlyMap<string, SlotLimit>;
  /** Per-tenant share of a unit's slots (units with tenantConcurrency); default none. */
  tenantSlots?: TenantSlots;
  /** The shared windows of the units with a rateLimit (rate-limit.ts); default none. */
  rateLimits?: RateLimits;
  /** Turn notices of serial keys (execute/serial-turn.ts): a run near the front of its key's line waits here. Default none: it waits in the queue. */
  serialTurns?: SerialTurns;
  runner: RunnerDeps;
  logger: Logger;
  /** Aborted at the end of the drain window: deliveries not finished go back to the queue. */
  releaseSignal: AbortSignal;
  /** How long an ack waits for others to share its DeleteMessageBatch call, ms (SVC_ACK_LINGER_MS). Default 20. */
  ackLingerMs?: number;
  /** How long a receive waits for half the slots to be free, ms (SVC_RECEIVE_LINGER_MS); 0: at the first free slot. Default 10. */
  receiveLingerMs?: number;
  /** Receives under way at once (pollers); default receiversFor(slots). */
  receivers?: number;
  /** The stage deadlines of the runtime's deliveries (SVC_STAGE_TIMEOUT_MS); default a watch of its own with DEFAULT_STAGE_TIMEOUT_MS (15000). */
  stages?: StageWatch;
  /** Whether the process is healthy enough for its deliveries' messages to be kept invisible; default always. */
  healthy?: () => boolean;
}

/** The most pollers of one queue. */
export const MAX_RECEIVERS = 4;

/** The pause before the receive after a failed one, ms; it doubles with each failure in a row. */
export const RECEIVE_RETRY_MIN_MS = 250;
/** The longest pause between two failed receives, ms: a queue server back is used again within it. */
export const RECEIVE_RETRY_MAX_MS = 5_000;

/** The pause before the next receive after `failures` failed in a row: the doubled bound, its upper half drawn at random (workers that failed together spread). */
export function receiveRetryMs(failures: number): number {
  const bound = boundMs(failures, { baseMs: RECEIVE_RETRY_MIN_MS, capMs: RECEIVE_RETRY_MAX_MS });
  return bound / 2 + (Math.random() * bound) / 2;
}

/** Pollers of a queue with `slots`: one per two full batches of slots, 1 to MAX_RECEIVERS. */
export function receiversFor(slots: number): number {
  return Math.max(1, Math.min(MAX_RECEIVERS, Math.floor(slots / (2 * MAX_BATCH))));
}

export interface QueueConsumer {
  readonly queue: string;
  start(): void;
  /** Stops fetching; messages of a poll still in flight are released at once. */
  stopFetching(): void;
  /** Messages received and not yet settled. */
  readonly inFlight: number;
  /** True while a receive is under way. */
  readonly polling: boolean;
}

/**
 * The message body parsed as JSON, once per message: the unit's slot, the tenant's share, the trace and
 * the envelope's checks all read this one value. undefined when the body is not JSON (the checks then
 * dead-letter it as malformed).
 */
function parseBody(body: string | undefined): { name?: unknown; run_id?: unknown; traceparent?: unknown } | undefined {
  try {
    const json: unknown = JSON.parse(body ?? '');
    return typeof json === 'object' && json !== null ? json : undefined;
  } catch {
    return undefined;
  }
}

/** Thrown into sqs-consumer's receive when the consumer stops fetching (a stop, not a fault). */
class StoppedFetching extends CodedError<'STOPPED_FETCHING'> {
  constructor() {
    super('STOPPED_FETCHING', 'fetching stopped');
    this.name = 'StoppedFetching';
  }
}

/** A DeleteMessageBatch entry failed; `code` is the queue's own error code for that entry. */
export class DeleteFailed extends CodedError {
  constructor(code: string, message: string) {
    super(code, `the message could not be deleted (${code}): ${message}`);
    this.name = 'DeleteFailed';
  }
}

interface PendingAck {
  receiptHandle: string;
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * Collects acks into DeleteMessageBatch calls: a call goes out when 10 acks wait or `lingerMs` after
 * the first one. Every ack settles with its own entry's result.
 */
export function createAckBatcher(sqs: SQSClient, queueUrl: string, lingerMs: number): (receiptHandle: string) => Promise<void> {
  let pending: PendingAck[] = [];
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    const batch = pending.slice(0, MAX_BATCH);
    pending = pending.slice(MAX_BATCH);
    if (pending.length > 0) timer = setTimeout(flush, lingerMs);
    if (batch.length === 0) return;
    sqs
      .send(new DeleteMessageBatchCommand({ QueueUrl: queueUrl, Entries: batch.map((a, i) => ({ Id: String(i), ReceiptHandle: a.receiptHandle })) }))
      .then(
        (out) => {
          const failed = new Map((out.Failed ?? []).map((f) => [f.Id, f]));
          const ok = new Set((out.Successful ?? []).map((e) => e.Id));
          batch.forEach((a, i) => {
            const f = failed.get(String(i));
            if (ok.has(String(i))) a.resolve();
            else a.reject(new DeleteFailed(f?.Code ?? 'NotAcknowledged', f?.Message ?? 'missing from the batch response'));
          });
        },
        (error: unknown) => {
          for (const a of batch) a.reject(error);
        },
      );
  };
  return (receiptHandle) =>
    new Promise<void>((resolve, reject) => {
      pending.push({ receiptHandle, resolve, reject });
      if (pending.length >= MAX_BATCH) flush();
      else timer ??= setTimeout(flush, lingerMs);
    });
}

export function createQueueConsumer(o: QueueConsumerOptions): QueueConsumer {
  let fetching = false;
  let inFlight = 0;
  // Slots held: a delivery gives its slot back once it has settled, before its delete (batched, see
  // ackLingerMs) has gone out; `inFlight` still counts it until the delete is done (the drain waits).
  let holding = 0;
  // Aborted by stopFetching: a message still waiting for its unit's slot then goes back to the queue
  // at once (it never started), instead of staying invisible until the drain window ends.
  const stopped = new AbortController();
  const slotWaitSignal = AbortSignal.any([o.releaseSignal, stopped.signal]);
  // Slots the receives under way asked for (each poller's `asked`); their answers turn into `holding`.
  let asking = 0;
  const freeSlots = () => o.slots - holding - asking;
  // What a receive waits for, up to the linger: half the slots (at most one full batch) free.
  const lingerTarget = Math.min(MAX_BATCH, Math.ceil(o.slots / 2));
  const receiveLingerMs = o.receiveLingerMs ?? DEFAULT_RECEIVE_LINGER_MS;
  const log = o.logger.child({ queue: o.queue });
  const stages = o.stages ?? new StageWatch(DEFAULT_STAGE_TIMEOUT_MS);
  const healthy = o.healthy ?? (() => true);
  // Wakes every poll waiting for free slots whenever a delivery settles, a receive answers or fetching stops.
  const waiting = new Set<() => void>();
  const notify = () => {
    if (waiting.size === 0) return; // every settle notifies: no copy when nobody waits
    const woken = [...waiting];
    waiting.clear();
    for (const wake of woken) wake();
  };
  /** Resolves at the next notify, or after `ms` when given. */
  const nextFree = (ms?: number) =>
    new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        waiting.delete(wake);
        resolve();
      };
      const timer = ms === undefined ? undefined : setTimeout(wake, ms);
      waiting.add(wake);
    });
  const deleteMessage = createAckBatcher(o.sqs, o.queueUrl, o.ackLingerMs ?? DEFAULT_ACK_LINGER_MS);
  // A unit's window asked for by several messages in one turn (a group's members) goes out in one call per 10.
  const keepVisible = createVisibilityBatcher(o.sqs, o.queueUrl);
  // Messages waiting in this process for their rate-limit window to have room, by window (rate-limit.ts).
  const rateWaits = new Map<string, number>();
  // Messages waiting in this process for their serial key's turn, by unit (execute/serial-turn.ts).
  const turnWaits = new Map<string, number>();
  const changeVisibility = (message: Message, seconds: number) =>
    o.sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: o.queueUrl, ReceiptHandle: message.ReceiptHandle!, VisibilityTimeout: seconds }));

  async function handle(message: Message, giveBack: () => void): Promise<void> {
    // The 12 h a message's visibility may reach count from its receipt: a retry's delay is clamped to what is left.
    const receivedAtMs = performance.now();
    if (!fetching) {
      // Received by a poll that was already under way when the drain began: give it back untouched.
      await changeVisibility(message, 0).catch(() => {});
      return;
    }
    // What each heartbeat extends the visibility by: the queue's, or a unit's window (port.keepFor).
    let keepSeconds = o.visibilitySeconds;
    const bounds = stages.forDelivery();
    const heartbeat = startHeartbeat({
      intervalMs: o.heartbeatIntervalMs,
      extend: async () => {
        await changeVisibility(message, keepSeconds);
      },
      onError: (error) => log.warn({ err: error }, 'heartbeat could not extend visibility'),
      // Past a stage deadline the delivery is being released: its message must come back, not be kept.
      shouldExtend: () => !bounds.stuck && healthy(),
    });
    // A keepFor change still in flight is waited for too, so it never lands after a final change.
    let keeping: Promise<void> = Promise.resolve();
    let heartbeatStopped = false;
    const stopHeartbeat = async () => {
      heartbeatStopped = true;
      await heartbeat.stop();
      await keeping;
    };
    // Receives spent before the message went back over a tenant limit still count (tenant-slots.ts).
    const receiveCount = (Number(message.Attributes?.ApproximateReceiveCount ?? '1') || 1) + receivesBefore(message);
    let giveBackSlot = giveBack;
    const port: DeliveryPort = {
      async ack() {
        await stopHeartbeat();
        // Settled: the slot is free for the next receive while the delete waits for its batch.
        giveBackSlot();
        await deleteMessage(message.ReceiptHandle!);
      },
      handlerReturned() {
        giveBackSlot();
      },
      keepFor(seconds: number) {
        // At least three heartbeats' worth, so one late beat never lets a live delivery's message reappear.
        const next = Math.min(o.visibilitySeconds, Math.max(Math.ceil(seconds), Math.ceil((3 * o.heartbeatIntervalMs) / 1000)));
        if (heartbeatStopped || next === keepSeconds) return;
        keepSeconds = next;
        keeping = keepVisible(message.ReceiptHandle!, next).then(
          () => {},
          (error: unknown) => log.warn({ err: error }, 'could not shorten the visibility of a held message'),
        );
      },
      async retryAfter(seconds: number) {
        await stopHeartbeat();
        await changeVisibility(message, seconds);
      },
      async giveBack() {
        await stopHeartbeat();
        await sendBackKeepingReceives(o.sqs, o.queueUrl, message, receiveCount, 0);
      },
      async waitTurn(seconds: number, turn?: { id: string; ahead: number }) {
        // Near the front of its key's line: kept here, delivered again once its turn may have come
        // (below), as long as this message has not waited so too often and its unit's waiters here are
        // fewer than half its slots: a waiting message still takes a place of the receives, which must
        // go on to fetch the runs ahead of it.
        const waitingHere = turnWaits.get(unit ?? '') ?? 0;
        if (turn && o.serialTurns && turnWaitsOfMessage < SERIAL_WAITS_HERE_MAX && waitingHere < Math.max(1, Math.floor((slot?.limit ?? 1) / 2))) {
          waitForTurn = turn;
          return;
        }
        await stopHeartbeat();
        await sendBackKeepingReceives(o.sqs, o.queueUrl, message, receiveCount, seconds);
      },
      async deadLetter(context: DeadLetterContext) {
        await stopHeartbeat();
        await o.sqs.send(
          new SendMessageCommand({
            QueueUrl: o.dlqUrl,
            MessageBody: message.Body ?? '',
            MessageAttributes: deadLetterAttributes(context, o.queue),
          }),
        );
      },
    };
    // The tenant's share of the unit (tenantConcurrency) is taken first and never waited for: over it,
    // the message goes back with a short delay and holds no slot meanwhile.
    const json = parseBody(message.Body);
    const unit = typeof json?.name === 'string' ? json.name : undefined;
    const tenantSlot = o.tenantSlots?.tryAcquire(json) ?? null;
    if (tenantSlot === false) {
      await stopHeartbeat();
      await sendBackOverTenantLimit(o.sqs, o.queueUrl, message, receiveCount).catch((error: unknown) =>
        log.warn({ err: error, messageId: message.MessageId }, 'could not send a message over its tenant limit back; it reappears after the visibility timeout'),
      );
      return;
    }
    const slot = o.unitSlots.get(unit ?? '');
    // A run waiting here for its serial key's turn (port.waitTurn): what it waits for, and how often it did.
    let waitForTurn: { id: string; ahead: number } | undefined;
    let turnWaitsOfMessage = 0;
    for (;;) {
      // The unit's rate limit is taken with the slot held, just before the delivery runs (rate-limit.ts).
      // Over it, the message waits without its unit's slot (its tenant's share it keeps): here when the
      // window has room within the queue's one-second step (waitsInProcess bounds how many wait so), else
      // back in the queue until it has, keeping its receives. Not counted within the stage deadline:
      // back in the queue for a short while. Redis unusable, the database decides at registration.
      let rateWindow: DatabaseRateWindow | undefined;
      for (let waits = 0; ; waits++) {
        if (slot && !(await slot.acquire(slotWaitSignal))) {
          if (tenantSlot) o.tenantSlots!.release(tenantSlot);
          // Fetching stopped (or the drain window ended) while this message waited for its unit's slot:
          // it never started, so it is visible again at once for another worker.
          await port.retryAfter(0).catch(() => {});
          return;
        }
        if (!o.rateLimits || o.rateLimits.empty) break;
        let delaySeconds: number;
        try {
          const verdict = await boundStage('rate_limit', o.rateLimits.admit(json), undefined, bounds);
          if (!verdict || verdict.admitted) {
            if (verdict?.via === 'database') rateWindow = verdict.database; // its registration takes the place
            break;
          }
          slot?.release();
          const waitingHere = rateWaits.get(verdict.window) ?? 0;
          if (waitsInProcess(verdict, waits, waitingHere, slot?.limit ?? 1)) {
            const waited = await whileCounted(rateWaits, verdict.window, () => pause(verdict.waitMs + Math.random() * 20, slotWaitSignal));
            if (waited) continue;
          }
          delaySeconds = rateLimitDelaySeconds(verdict.waitMs);
        } catch (error) {
          slot?.release();
          log.warn({ err: error, unit, messageId: message.MessageId }, 'the rate limit could not be counted: the message goes back for a while');
          delaySeconds = RATE_LIMIT_UNCOUNTED_DELAY_SECONDS;
        }
        if (tenantSlot) o.tenantSlots!.release(tenantSlot);
        await stopHeartbeat();
        await sendBackKeepingReceives(o.sqs, o.queueUrl, message, receiveCount, delaySeconds).catch((error: unknown) =>
          log.warn({ err: error, messageId: message.MessageId }, 'could not send a message over its rate limit back; it reappears after the visibility timeout'),
        );
        return;
      }
      let held = true;
      giveBackSlot = () => {
        if (!held) return;
        held = false;
        slot?.release();
        if (tenantSlot) o.tenantSlots!.release(tenantSlot);
        giveBack();
      };
      try {
        const result = await withStageBounds(bounds, () =>
          traceDelivery(o.queue, unit, json?.traceparent, () =>
            runDelivery(o.runner, { messageId: message.MessageId ?? '', body: message.Body ?? '', json, receiveCount, receivedAtMs, rateWindow }, port),
          ),
        );
        recordDelivery(o.queue, unit, o.runner.units, result); // svc_deliveries_total (src/observe)
      } catch (error) {
        if (isStageTimeout(error) || bounds.stuck) {
          // A wait outlived its deadline (counted by the watch): the message comes back as after a database
          // failure; whatever the abandoned wait still held was released or its session ended.
          log.warn(
            { stage: bounds.missedStage ?? (error as { stage?: string }).stage, messageId: message.MessageId, runId: typeof json?.run_id === 'string' ? json.run_id : undefined, code: (error as { code?: unknown }).code },
            'a delivery stage did not finish within its deadline: the message goes back to the queue',
          );
          await port.retryAfter(backoffSeconds(receiveCount, o.runner.backoff)).catch(() => {});
          return;
        }
        // The database (or SQS) failed under the runner: the message comes back after a backoff.
        log.error({ err: error, messageId: message.MessageId }, 'delivery could not be processed; it will be retried');
        await port.retryAfter(backoffSeconds(receiveCount, o.runner.backoff)).catch(() => {});
      } finally {
        if (!waitForTurn) {
          giveBackSlot();
          await stopHeartbeat();
        }
      }
      if (!waitForTurn) return;
      // Its turn has not come, and it is near the front of its key's line: it waits here without its
      // unit's slot (its tenant's share it keeps, and its message, whose heartbeat goes on), then is
      // delivered again. The stop's release signal ends the wait: the message goes back at once.
      const turn = waitForTurn;
      waitForTurn = undefined;
      turnWaitsOfMessage += 1;
      slot?.release();
      held = false;
      const waited = await whileCounted(turnWaits, unit ?? '', () => o.serialTurns!.wait(turn.id, turn.ahead, slotWaitSignal));
      if (waited === 'aborted') {
        if (tenantSlot) o.tenantSlots!.release(tenantSlot);
        giveBack();
        await port.giveBack().catch(() => {});
        return;
      }
    }
  }

  // The last receive came back full: the queue has a backlog, and the extra pollers receive too.
  let backlog = false;
  // Receives of this queue failed in a row: while above 0, every poller waits receiveRetryMs before its next.
  let receiveFailures = 0;
  /**
   * One poller: an sqs-consumer of the queue whose receives ask for the slots it reserved. The client it
   * is given sets MaxNumberOfMessages when the receive goes out (sqs-consumer builds its input before
   * preReceiveMessageCallback), and matches by name too: a second copy of @aws-sdk/client-sqs under
   * sqs-consumer would fail `instanceof`, and the receive would then ask for a full batch whatever the
   * free slots.
   */
  const createPoller = (_: unknown, index: number) => {
    let asked = 0;
    const receivingClient = {
      async send(command: Parameters<SQSClient['send']>[0], options?: Parameters<SQSClient['send']>[1]) {
        if (!(command instanceof ReceiveMessageCommand || command.constructor.name === ReceiveMessageCommand.name)) return o.sqs.send(command, options);
        (command.input as { MaxNumberOfMessages?: number }).MaxNumberOfMessages = Math.max(1, asked);
        try {
          const out = (await o.sqs.send(command, options)) as ReceiveMessageCommandOutput;
          receiveFailures = 0;
          // The messages hold their slots from the answer on (handleMessageBatch starts them).
          const received = out.Messages?.length ?? 0;
          inFlight += received;
          holding += received;
          backlog = received === asked;
          return out;
        } catch (error) {
          // No answer: not a backlog, and the next receives back off (preReceiveMessageCallback).
          receiveFailures += 1;
          backlog = false;
          throw error;
        } finally {
          asking -= asked;
          asked = 0;
          notify();
        }
      },
    } as unknown as SQSClient;
    const consumer = Consumer.create({
      queueUrl: o.queueUrl,
      sqs: receivingClient,
      batchSize: Math.min(MAX_BATCH, o.slots),
      // The first poller long-polls; the others receive only during a backlog, and without waiting.
      waitTimeSeconds: index === 0 ? o.waitSeconds : 0,
      visibilityTimeout: o.visibilitySeconds,
      messageSystemAttributeNames: ['ApproximateReceiveCount'],
      messageAttributeNames: [RECEIVES_BEFORE_ATTRIBUTE],
      // The runner deletes messages itself (see the header comment).
      shouldDeleteMessages: false,
      async preReceiveMessageCallback() {
        // After a failed receive, a backoff before the next (sqs-consumer would poll again at once); a stop ends it.
        if (fetching && receiveFailures > 0) await pause(receiveRetryMs(receiveFailures), stopped.signal);
        while (fetching && index > 0 && !backlog) await nextFree();
        // Receive only what free slots can take.
        while (fetching && freeSlots() < 1) {
          log.debug({ inFlight, slots: o.slots }, 'waiting for a free slot before the next receive');
          await nextFree();
        }
        // Then up to the linger for half the slots, so a busy queue receives in batches.
        const lingerEnd = performance.now() + receiveLingerMs;
        while (fetching && freeSlots() < lingerTarget && performance.now() < lingerEnd) await nextFree(Math.max(0, lingerEnd - performance.now()));
        if (!fetching) throw new StoppedFetching();
        // Reserved now, in the same turn as the check: another poller sees these slots taken.
        asked = Math.max(1, Math.min(MAX_BATCH, freeSlots()));
        asking += asked;
      },
      async handleMessageBatch(messages: Message[]) {
        for (const message of messages) {
          let held = true;
          const giveBack = () => {
            if (!held) return;
            held = false;
            holding--;
            notify();
          };
          void handle(message, giveBack)
            .catch((error: unknown) => log.error({ err: error }, 'delivery failed'))
            .finally(() => {
              giveBack();
              inFlight--;
              notify();
            });
        }
        return undefined;
      },
    });
    consumer.on('error', (error) => {
      // The receive aborted by stopFetching rejects: expected, not a queue fault.
      if (!fetching && (error.name === 'AbortError' || (error as { cause?: { name?: string } }).cause?.name === 'AbortError')) return;
      if ((error as { cause?: unknown }).cause instanceof StoppedFetching || /fetching stopped/.test(error.message)) return;
      log.error({ err: error }, 'queue error');
    });
    return consumer;
  };
  const pollers = Array.from({ length: Math.max(1, o.receivers ?? receiversFor(o.slots)) }, createPoller);

  return {
    queue: o.queue,
    start() {
      fetching = true;
      for (const consumer of pollers) consumer.start();
    },
    stopFetching() {
      fetching = false;
      stopped.abort();
      // Aborts the long polls under way, so an idle worker stops at once instead of after up to
      // SVC_SQS_WAIT_SECONDS. A message a poll had already received reaches handle() and is given
      // back at once; one the queue handed to an aborted request stays invisible until its
      // visibility timeout and is then received again: never lost.
      for (const consumer of pollers) consumer.stop({ abort: true });
      notify();
    },
    get inFlight() {
      return inFlight;
    },
    get polling() {
      return pollers.some((consumer) => consumer.status.isPolling);
    },
  };
}

/** Waits with `key` counted in `counts` meanwhile (the messages waiting in this process, by window or unit). */
async function whileCounted<T>(counts: Map<string, number>, key: string, wait: () => Promise<T>): Promise<T> {
  counts.set(key, (counts.get(key) ?? 0) + 1);
  try {
    return await wait();
  } finally {
    const left = (counts.get(key) ?? 1) - 1;
    if (left > 0) counts.set(key, left);
    else counts.delete(key);
  }
}

/** Resolves true after `ms`, or false as soon as `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (value: boolean) => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      resolve(value);
    };
    const onAbort = () => done(false);
    const timer = setTimeout(() => done(true), ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function deadLetterAttributes(context: DeadLetterContext, queue: string) {
  const text = (value: string) => ({ DataType: 'String', StringValue: value.length > 0 ? value.slice(0, 1024) : '-' });
  return {
    error_code: text(context.errorCode),
    error_type: text(context.errorType),
    error_message: text(context.errorMessage),
    run_id: text(context.runId ?? '-'),
    unit: text(context.unit ?? '-'),
    source_queue: text(queue),
    receive_count: { DataType: 'Number', StringValue: String(context.receiveCount) },
    worker_instance: text(context.workerInstance),
  };
}
