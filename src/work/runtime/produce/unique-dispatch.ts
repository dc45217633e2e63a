// Unique dispatch: a dispatch carrying a unique key returns the run its key already has (one of the
// same unit and tenant, in the chosen states or younger than `uniqueFor`) instead of writing a new one.
//
// The database decides, never a read-then-write race: the dispatch first takes a transaction-level
// advisory lock per key (the two-key form: hash of scope, tenant and unit, and a bucket of the key's hash;
// several keys in one order, so two bulk dispatches cannot deadlock each other), then looks the key up in a separate statement. Under READ
// COMMITTED each statement sees what committed before it started, so a concurrent dispatcher of the
// key waits on the lock until the first commits (or rolls back) and then finds the first's run. The
// key is recorded in the detail of the new run's `queued` trail event, found through the partial
// indexes of sql/work/0023_unique-dispatch.sql; the run tables and the trail's values stay the spec's.
import type { TxSql } from '../../../db/client.ts';
import type { Envelope } from './envelope.ts';
import { ACTIVE_RUN_STATUSES, type RunStatus } from '../store/run-store.ts';
import { OUTBOX_TABLE, RUN_TABLE, TRAIL_TABLE, type RunScope } from '../store/scope-tables.ts';
import type { UniqueDispatchOptions } from '../../define/unit.ts';

type UniqueKey<P> = NonNullable<UniqueDispatchOptions<P>['uniqueKey']>;

const RUN_STATUSES: readonly RunStatus[] = ['queued', 'running', 'retrying', 'succeeded', 'failed', 'skipped'];

/** Longest unique key, in characters (it is stored in the 2048-byte detail of the `queued` event). */
export const MAX_UNIQUE_KEY_LENGTH = 255;

/** Longest debounce, in seconds (a day): a run is never postponed further by one dispatch. */
export const MAX_DEBOUNCE_SECONDS = 86_400;

export interface UniqueRule {
  states: readonly RunStatus[];
  forSeconds: number;
  /** Debounce: only a run still waiting to be sent holds the key, and each dispatch of it moves the run. */
  debounce?: { seconds: number; payload: 'first' | 'last' };
}

/** The rule of the options, or a sentence saying what is wrong with them. */
export function uniqueRule(
  options: Pick<UniqueDispatchOptions, 'uniqueFor' | 'uniqueStates' | 'debounceSeconds' | 'debouncePayload'> & { delaySeconds?: number },
): UniqueRule | string {
  if (options.debounceSeconds !== undefined) {
    const seconds = options.debounceSeconds;
    if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds <= 0 || seconds > MAX_DEBOUNCE_SECONDS) {
      return `debounceSeconds must be a number of seconds above 0 and at most ${MAX_DEBOUNCE_SECONDS}`;
    }
    if (options.uniqueFor !== undefined || options.uniqueStates !== undefined) {
      return `debounceSeconds decides which run holds the key (one still waiting to be sent): it does not combine with uniqueFor or uniqueStates`;
    }
    if (options.delaySeconds !== undefined && options.delaySeconds !== 0) {
      return `debounceSeconds sets the run's delay: it does not combine with delaySeconds`;
    }
    const payload = options.debouncePayload ?? 'first';
    if (payload !== 'first' && payload !== 'last') return `debouncePayload must be 'first' or 'last'`;
    return { states: ['queued'], forSeconds: 0, debounce: { seconds, payload } };
  }
  if (options.debouncePayload !== undefined) return `debouncePayload needs debounceSeconds`;
  const forSeconds = options.uniqueFor ?? 0;
  if (typeof forSeconds !== 'number' || !Number.isFinite(forSeconds) || forSeconds < 0) {
    return `uniqueFor must be a finite number of seconds, at least 0`;
  }
  const states = options.uniqueStates ?? ACTIVE_RUN_STATUSES;
  if (!Array.isArray(states) || states.some((s) => !RUN_STATUSES.includes(s))) {
    return `uniqueStates must list run states among ${RUN_STATUSES.join(', ')}`;
  }
  return { states: [...new Set(states)], forSeconds };
}

/** The key of each payload (undefined: none), or a sentence naming the first bad one. */
export function uniqueKeys<P>(key: UniqueKey<P>, payloads: readonly P[]): Array<string | undefined> | string {
  const keys: Array<string | undefined> = [];
  for (let i = 0; i < payloads.length; i++) {
    const k = typeof key === 'function' ? key(payloads[i]!, i) : key;
    if (k === null || k === undefined) {
      keys.push(undefined);
      continue;
    }
    if (typeof k !== 'string' || k.length < 1 || k.length > MAX_UNIQUE_KEY_LENGTH || k.includes('\u0000')) {
      return `the unique key${payloads.length > 1 ? ` of #${i}` : ''} must be a string of 1 to ${MAX_UNIQUE_KEY_LENGTH} characters, without NUL`;
    }
    keys.push(k);
  }
  return keys;
}

/**
 * The keys of one unit and tenant share this many locks (a key's lock is its bucket): each advisory lock
 * held takes a slot of the server's shared lock table (max_locks_per_transaction x max_connections), so
 * a bulk dispatch of 100,000 keys holds at most this many, not 100,000. Two keys in one bucket only wait
 * for each other's transaction, never return each other's run (the lookup is by key).
 */
export const UNIQUE_LOCK_BUCKETS = 1024;

/** A run a key already has. */
export interface KeyedRun {
  runId: string;
  queue: string;
  /** Its outbox row's envelope; null once purged. */
  envelope: Envelope | null;
  correlationId: string;
  causationId: string;
}

/**
 * Locks the keys (in one order), then finds the run each key already has under the rule: the latest
 * matching one. Returns the runs by key and the transaction's isolation level (only READ COMMITTED lets
 * the lookup see a run committed while this transaction waited on the lock).
 */
export async function claimUniqueKeys(
  tx: TxSql,
  scope: RunScope,
  tenantId: string | null,
  name: string,
  keys: readonly string[],
  rule: UniqueRule,
): Promise<{ isolation: string; runs: Map<string, KeyedRun> }> {
  const distinct = [...new Set(keys)];
  const space = JSON.stringify(['svc.unique-dispatch', scope, tenantId, name]);
  // Two statements sent back to back: the lookup starts (and takes its snapshot) only once every lock is held.
  const locked = tx`SELECT current_setting('transaction_isolation') AS isolation, count(pg_advisory_xact_lock(hashtext(${space}), b))::int AS n
    FROM (SELECT DISTINCT abs(hashtext(k) % ${UNIQUE_LOCK_BUCKETS}::int) AS b FROM unnest(${distinct}::text[]) AS k ORDER BY 1) AS s`;
  const found = tx<Array<{ unique_key: string; run_id: string; queue: string; envelope: Envelope | null; correlation_id: string; causation_id: string }>>`
    SELECT DISTINCT ON (k.key) k.key AS unique_key, r.run_id::text, r.queue, o.envelope, r.correlation_id::text, r.causation_id::text
      FROM unnest(${distinct}::text[]) AS k(key)
      JOIN ${tx(TRAIL_TABLE[scope])} e
        ON e.event = 'queued' AND e.detail ? 'unique_key' AND (e.detail ->> 'unique_key') = k.key
           ${tenantId === null ? tx`` : tx`AND e.tenant_id = ${tenantId}::bigint`}
      JOIN ${tx(RUN_TABLE[scope])} r ON r.run_id = e.run_id
      LEFT JOIN ${tx(OUTBOX_TABLE[scope])} o ON o.run_id = r.run_id
     WHERE r.name = ${name}
       AND ${rule.debounce
         // Debounce: only a run still waiting to be sent holds its key.
         ? tx`r.status = 'queued' AND o.sent_at IS NULL`
         : tx`(r.status = ANY (${rule.states as RunStatus[]}::text[])
            OR r.queued_at > clock_timestamp() - make_interval(secs => ${rule.forSeconds}::float8))`}
     ORDER BY k.key, r.queued_at DESC, r.run_id`;
  const [[lock], rows] = await Promise.all([locked, found]);
  return {
    isolation: (lock as { isolation: string }).isolation,
    runs: new Map(rows.map((r) => [r.unique_key, {
      runId: r.run_id,
      queue: r.queue,
      envelope: r.envelope,
      correlationId: r.correlation_id,
      causationId: r.causation_id,
    }])),
  };
}

/**
 * Debounce: moves each found run's outbox row to `seconds` from now (with `payloads`, also replaces the
 * payload its envelope carries), if the row still waits to be sent. Returns the runs moved: a row the
 * relay sent meanwhile (it held the row locked; this statement waited for its commit, then found it sent)
 * is not, and its key gets a new run.
 */
export async function debounceRuns(
  tx: TxSql,
  scope: RunScope,
  runIds: readonly string[],
  seconds: number,
  payloads?: readonly unknown[],
): Promise<Set<string>> {
  if (runIds.length === 0) return new Set();
  const texts = payloads?.map((p) => JSON.stringify(p ?? null)) ?? null;
  const rows = await tx<Array<{ run_id: string }>>`
    UPDATE ${tx(OUTBOX_TABLE[scope])} o
       SET available_at = clock_timestamp() + make_interval(secs => ${seconds}::float8)
           ${texts ? tx`, envelope = jsonb_set(o.envelope, '{payload}', u.p::jsonb)` : tx``}
      FROM unnest(${runIds as string[]}::uuid[], ${texts ?? runIds.map(() => '')}::text[]) AS u(r, p)
     WHERE o.run_id = u.r AND o.sent_at IS NULL
    RETURNING o.run_id::text`;
  return new Set(rows.map((r) => r.run_id));
}
