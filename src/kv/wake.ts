// The relay's wake-up signal: after a transaction that wrote outbox rows commits, push onto
// svc:outbox:wake; the relay blocks on that list and starts a pass within milliseconds. The signal is
// only a hint: a lost one costs at most one sweep interval, so nothing here ever throws. A signal
// also says how old the rows it announces may be: 'recent' when the transaction that wrote them began
// less than RECENT_WRITE_MS before the signal, so the relay's next pass need not read from the start
// of the outbox (src/work/runtime/produce/relay.ts); any other signal (an older write, a caller that did not say, an
// older release's '1') sends the relay through every due row.
import { once } from 'node:events';
import type { Redis } from 'ioredis';
import { redisFallback } from '../observe/redis-fallback.ts';
import { OUTBOX_WAKE_KEY, RELAY_CAPPED_KEY } from './keys.ts';

/** Signals kept in the list: the relay needs one to wake, more are noise. */
export const WAKE_LIST_MAX = 16;

/** A signal is 'recent' when the transaction that wrote its rows began less than this long before it, ms. */
export const RECENT_WRITE_MS = 500;

/** The payload of a 'recent' signal; any other payload announces rows of any age. */
const RECENT_SIGNAL = 'recent';
const ANY_SIGNAL = '1';

/** What woke a wait: only 'recent' signals, or at least one that may announce an older row (or signals the list's cap dropped). */
export type WakeSignal = 'recent' | 'any';

/** Bound of a wake signal when the client has no commandTimeout of its own, ms. */
const DEFAULT_SIGNAL_TIMEOUT_MS = 500;

/**
 * LPUSH the wake signal (trimmed to WAKE_LIST_MAX). `since`: performance.now() taken before the
 * transaction that wrote the rows began (or before their inserts went out); without it the signal
 * announces rows of any age. Resolves false when Redis is unavailable, and
 * never keeps the caller longer than `timeoutMs` (default: the client's commandTimeout, else 500 ms),
 * even when Redis hangs. A client still connecting (a fresh one, or one reconnecting) is waited for
 * within that bound: without an offline queue its command would otherwise be refused at once and
 * the wake lost.
 */
export async function signalOutbox(redis: Redis | undefined, options: { timeoutMs?: number; since?: number } = {}): Promise<boolean> {
  if (!redis) return false;
  const payload = options.since !== undefined && performance.now() - options.since < RECENT_WRITE_MS ? RECENT_SIGNAL : ANY_SIGNAL;
  const timeoutMs = options.timeoutMs ?? redis.options.commandTimeout ?? DEFAULT_SIGNAL_TIMEOUT_MS;
  let timer: NodeJS.Timeout | undefined;
  const waiting = new AbortController();
  const bound = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  const signal = async (): Promise<boolean> => {
    if (redis.status !== 'ready') {
      if (redis.status === 'end' || redis.status === 'close') return false;
      const ready = await Promise.race([once(redis, 'ready', { signal: waiting.signal }).then(() => true), bound]);
      if (!ready) return false;
    }
    await redis.multi().lpush(OUTBOX_WAKE_KEY, payload).ltrim(OUTBOX_WAKE_KEY, 0, WAKE_LIST_MAX - 1).exec();
    return true;
  };
  try {
    const sent = await Promise.race([signal().catch(() => false), bound]);
    if (!sent) redisFallback('outbox_wake_signal');
    return sent;
  } finally {
    clearTimeout(timer);
    waiting.abort();
  }
}

// Room for a capped relay. With fairness on, a relay whose cap holds a tenant's rows back marks itself
// capped (markRelayCapped) and waits at most SVC_RELAY_CAPPED_POLL_MS; the first run to finish after
// that takes the mark (a DEL, in the same write as the settlement's other Redis commands on an
// auto-pipelined connection) and pushes a wake signal, so the relay sends the next rows as soon as room
// opens, not one poll later: a lone tenant's burst at the cap drained at about one cap per poll. One
// finish per mark signals, so finishes never flood the relay with passes; every other finish pays a DEL
// of a missing key (a Lua script doing both cost Redis about 30 µs a run). Both are hints: a lost one
// costs a poll.

/**
 * The relay's mark that its cap holds rows back, for `ttlMs` at most (a relay that stops leaves none for
 * long). Resolves once Redis has it (bounded by the client's command timeout); never throws.
 */
export async function markRelayCapped(redis: Redis | undefined, ttlMs: number): Promise<void> {
  if (!redis || redis.status !== 'ready') return;
  await redis.set(RELAY_CAPPED_KEY, '1', 'PX', Math.max(1, Math.round(ttlMs))).catch(() => redisFallback('outbox_wake_signal'));
}

/** After runs finish: wakes a relay that marked itself capped (one signal per mark). Never throws. */
export async function signalRoom(redis: Redis | undefined): Promise<void> {
  if (!redis || redis.status !== 'ready') return;
  let taken: number;
  try {
    taken = await redis.del(RELAY_CAPPED_KEY);
  } catch {
    redisFallback('outbox_wake_signal');
    return;
  }
  if (taken === 1) await signalOutbox(redis);
}

/**
 * Awaits the committed unit of work, then signals the relay. Use it around the transaction, never
 * inside it: a signal sent before commit would wake the relay before the rows are visible.
 *
 *   const run = await afterCommit(redis, inUnitOfWork(sql, actor, (tx) => dispatcher.dispatchTask(tx, ...)));
 */
export async function afterCommit<T>(redis: Redis | undefined, committed: Promise<T>): Promise<T> {
  // The unit of work was called before this (an argument), but its inserts wait for its BEGIN's answer.
  const since = performance.now();
  const result = await committed;
  await signalOutbox(redis, { since });
  return result;
}

/**
 * Blocks on the wake list for at most `timeoutSeconds` (fractions allowed). Needs a connection of its
 * own, since the blocking pop holds it. Resolves with what the signals said ('recent' only when every
 * popped signal is, and the list's cap cannot have dropped one), null on timeout; rejects when Redis
 * is unavailable. BLMPOP (Redis 7) pops every signal of the list at once (the list never holds more
 * than WAKE_LIST_MAX): one pass serves them all, and clearing them costs no second round trip before
 * the pass (BLPOP then DEL did, on the path of every steady run). A signal pushed after the pop stays
 * for the next wait, so the rows it announces are never left to the sweep. A server that refuses
 * BLMPOP (older than 7.0, or an ACL without it) gets BLPOP then DEL, as before.
 */
export async function waitForWake(blocking: Redis, timeoutSeconds: number): Promise<WakeSignal | null> {
  if (!refusesBlmpop.has(blocking)) {
    try {
      const popped = await blocking.blmpop(timeoutSeconds, 1, OUTBOX_WAKE_KEY, 'LEFT', 'COUNT', WAKE_LIST_MAX);
      if (popped === null) return null;
      const signals = popped[1];
      return signals.length < WAKE_LIST_MAX && signals.every((s) => s === RECENT_SIGNAL) ? 'recent' : 'any';
    } catch (error) {
      if (!refusedCommand(error)) throw error;
      // A Redis before 7.0, or one whose ACL refuses BLMPOP: this connection waits with BLPOP from now on.
      refusesBlmpop.add(blocking);
    }
  }
  const popped = await blocking.blpop(OUTBOX_WAKE_KEY, timeoutSeconds);
  if (popped === null) return null;
  // The DEL drops the other signals unread.
  await blocking.del(OUTBOX_WAKE_KEY);
  return 'any';
}

/** Connections whose server refused BLMPOP (unknown command, or not allowed by its ACL). */
const refusesBlmpop = new WeakSet<Redis>();

function refusedCommand(error: unknown): boolean {
  const message = error instanceof Error ? error.message : '';
  return /^ERR unknown command/i.test(message) || /^NOPERM/i.test(message);
}
