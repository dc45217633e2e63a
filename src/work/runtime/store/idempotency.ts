// The gated idempotency runner's storage: keys and fingerprints, the Redis gate and the database ledger.
//
// - key = SHA-256(unit name, run id or the unit's business key); fingerprint = SHA-256(canonical payload).
// - Redis `SET NX PX` (PX = unit timeout + margin) is the gate against a concurrent duplicate and keeps
//   the result for fast replay. Redis is never authoritative: any Redis error means "no gate", and the
//   database decides; a completed gate is replayed only once the ledger confirms it (confirmCompletedGate).
// - The ledger row is claimed by INSERT ... ON CONFLICT DO NOTHING inside the effect transaction and
//   completed in that same transaction, so it commits with the effect or not at all. A key new to the
//   ledger (the usual delivery) is claimed by the finish itself, inserted `completed` (run-store.ts
//   finishDelivery); a key with a row is claimed before the handler (claimKeyAndStart). A
//   transaction-level advisory lock on the key lets a second claimer see "held" at once instead of
//   waiting on the unique index while the first effect transaction is open.
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { redisFallback } from '../../../observe/redis-fallback.ts';
import type { Sql, TxSql } from '../../../db/client.ts';
import { idempotencyGateKey } from '../../../kv/keys.ts';
import { LEDGER_TABLE, piece, scoped, scopeTables, sqlText, tenantOnly, tenantText, type RunScope } from './scope-tables.ts';
import { trailRows } from './trail.ts';

type Db = Sql | TxSql;

/** JSON with object keys sorted at every level, so equal payloads give equal fingerprints. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v === undefined ? null : v)).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

export function idempotencyKeyOf(unitName: string, keySource: string): Buffer {
  // A separator that cannot occur in a unit name keeps (name, source) pairs from colliding.
  return createHash('sha256').update(unitName).update('\n').update(keySource).digest();
}

export function fingerprintOf(payload: unknown): Buffer {
  return createHash('sha256').update(canonicalJson(payload)).digest();
}

/** Signed 64-bit advisory-lock key taken from the digest (as text: postgres.js sends it as bigint). */
export function advisoryKeyOf(key: Buffer): string {
  return key.readBigInt64BE(0).toString();
}

export type LedgerOutcome = Record<string, unknown>;

// ───────────────────────────── Redis gate ─────────────────────────────

export type GateState =
  | { state: 'acquired'; token: string }
  | { state: 'held'; retryAfterMs: number }
  | { state: 'completed'; outcome: LedgerOutcome; fingerprintHex: string }
  | { state: 'unavailable' };

interface GateValue {
  s: 'p' | 'c';
  t?: string;
  f?: string;
  o?: LedgerOutcome;
}

/** The gate's Redis key; `database` is databaseIdentityOf(the ledger's database). */
export function gateKeyOf(database: string, scope: RunScope, tenantId: string | null, key: Buffer): string {
  return idempotencyGateKey(database, scope, tenantId, key.toString('hex'));
}

/** Tries to take the gate for `leaseMs`; tells who holds it otherwise. Never throws. */
export async function acquireGate(redis: Redis | undefined, gateKey: string, token: string, leaseMs: number): Promise<GateState> {
  if (!redis) return { state: 'unavailable' };
  try {
    const value: GateValue = { s: 'p', t: token };
    const ok = await redis.set(gateKey, JSON.stringify(value), 'PX', Math.max(1, Math.ceil(leaseMs)), 'NX');
    if (ok === 'OK') return { state: 'acquired', token };
    const [raw, pttl] = await Promise.all([redis.get(gateKey), redis.pttl(gateKey)]);
    if (raw === null) return { state: 'unavailable' }; // expired in between: let the database decide
    const current = JSON.parse(raw) as GateValue;
    if (current.s === 'c') return { state: 'completed', outcome: current.o ?? {}, fingerprintHex: current.f ?? '' };
    return { state: 'held', retryAfterMs: pttl > 0 ? pttl : leaseMs };
  } catch {
    redisFallback('gate_acquire');
    return { state: 'unavailable' };
  }
}

const RELEASE_IF_OWNER = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

/** Frees the gate if this token still holds it (after a failure or a release), so a retry need not wait. */
export async function releaseGate(redis: Redis | undefined, gateKey: string, token: string): Promise<void> {
  if (!redis) return;
  try {
    await redis.eval(RELEASE_IF_OWNER, 1, gateKey, JSON.stringify({ s: 'p', t: token } satisfies GateValue));
  } catch {
    redisFallback('gate_release');
    // The gate expires by itself after the lease.
  }
}

/** The SET arguments of a gate holding a completed result: a replay answers from it until `retentionMs`. */
function completedGate(fingerprint: Buffer, outcome: LedgerOutcome, retentionMs: number): [string, 'PX', number] {
  const value: GateValue = { s: 'c', f: fingerprint.toString('hex'), o: outcome };
  return [JSON.stringify(value), 'PX', Math.max(1, Math.ceil(retentionMs))];
}

/** Copies a committed result into Redis for fast replay (after commit, or when repopulating). */
export async function recordGateResult(
  redis: Redis | undefined,
  gateKey: string,
  fingerprint: Buffer,
  outcome: LedgerOutcome,
  retentionMs: number,
): Promise<void> {
  if (!redis) return;
  try {
    await redis.set(gateKey, ...completedGate(fingerprint, outcome, retentionMs));
  } catch {
    redisFallback('gate_record');
    // Not authoritative: the ledger row answers the next replay.
  }
}

/** One committed result for recordGateResultsAndEvict: the run's cached status to evict, its gate to fill. */
export interface GateResult {
  evictKey: string;
  gateKey: string | undefined;
  fingerprint: Buffer | undefined;
  outcome: LedgerOutcome;
}

/**
 * After the effects committed: evicts each run's cached status and copies each result into its gate,
 * all in one pipelined round trip (a group commit sends its members' together). Never throws (neither
 * write is authoritative).
 */
export async function recordGateResultsAndEvict(redis: Redis | undefined, results: readonly GateResult[], retentionMs: number): Promise<void> {
  if (!redis || results.length === 0) return;
  try {
    const pipeline = redis.pipeline();
    for (const r of results) {
      pipeline.del(r.evictKey);
      if (r.gateKey && r.fingerprint) pipeline.set(r.gateKey, ...completedGate(r.fingerprint, r.outcome, retentionMs));
    }
    await pipeline.exec();
  } catch {
    redisFallback('gate_record');
    // The cached status expires by itself; the ledger row answers the next replay.
  }
}

// ───────────────────────────── database ledger ─────────────────────────────

export type ClaimResult =
  | { kind: 'claimed'; attempt: number }
  | { kind: 'completed'; outcome: LedgerOutcome }
  | { kind: 'failed_permanent' }
  | { kind: 'reused' }
  | { kind: 'held' };

/** Where a key lives: the tenant ledger (with its tenant) or the platform ledger. */
export interface LedgerScope {
  scope: RunScope;
  /** Required for scope tenant, null for platform. */
  tenantId: string | null;
}

function tenantFilter(db: Db, at: LedgerScope) {
  return at.scope === 'tenant' ? db`AND tenant_id = ${at.tenantId}` : db``;
}

/** The INSERT of a fresh claim of the key (claimKey, claimKeyAndStart). */
function insertClaim(at: LedgerScope, key: Buffer, fingerprint: Buffer, leaseMs: number) {
  return piece`INSERT INTO ${scopeTables(at.scope).ledger} (${tenantText(at.scope, 'tenant_id,')} idempotency_key, request_fingerprint, expires_at)
            VALUES (${tenantOnly(at.scope, piece`${at.tenantId},`)} ${key}, ${fingerprint}, clock_timestamp() + make_interval(secs => ${leaseMs / 1000}))
            ON CONFLICT DO NOTHING RETURNING attempt`;
}

/**
 * Tries the advisory lock of the key for the rest of the transaction. False: another open transaction
 * (a concurrent duplicate) is executing this key right now.
 */
export async function tryLockKey(tx: TxSql, key: Buffer): Promise<boolean> {
  const [row] = await tx<{ locked: boolean }[]>`SELECT pg_try_advisory_xact_lock(${advisoryKeyOf(key)}::bigint) AS locked`;
  return row!.locked;
}

/** Claims the key inside the effect transaction (call tryLockKey first). */
export async function claimKey(tx: TxSql, at: LedgerScope, key: Buffer, fingerprint: Buffer, leaseMs: number): Promise<ClaimResult> {
  const inserted = await scoped(tx)`${insertClaim(at, key, fingerprint, leaseMs)}`;
  if (inserted.length > 0) return { kind: 'claimed', attempt: inserted[0]!.attempt as number };
  return claimExistingKey(tx, at, key, fingerprint, leaseMs);
}

/**
 * The run's execution lock (a transaction-scoped advisory lock in a space of its own, the two-int form):
 * a delivery's effect transaction tries it in its opening and holds it while the handler runs, so a
 * delivery that will not execute (registration.ts executingElsewhere) sees, without waiting, that
 * another is executing the run, whatever its key (a worker that lacks the unit cannot compute a
 * business key). A delivery that did not get it (held by such a delivery, or by a run whose id hashes
 * alike) writes `started` before its handler instead, whose row locks the run row (execution.ts).
 */
export function tryLockRunExecution(tx: TxSql, runId: string) {
  return tx`pg_try_advisory_xact_lock(hashtext('svc.run-executing'), hashtext(${runId}::text))`;
}

/** The trail event `started` written together with a fresh claim (claimKeyAndStart). */
export interface StartedEvent {
  runId: string;
  attempt: number;
  receiveCount: number;
  queue: string;
  workerInstance: string;
}

/**
 * claimKey and, when the insert claims a fresh key (the usual case), the `started` trail event in the
 * SAME statement: one round trip instead of three (claim, clock, trail). `startedAt` is the event's
 * database instant. Any other outcome (an existing row: replay, held, reused, retry takeover) takes
 * claimKey's general path and returns without a trail event: the caller then writes `started` itself.
 */
export async function claimKeyAndStart(
  tx: TxSql,
  at: LedgerScope,
  key: Buffer,
  fingerprint: Buffer,
  leaseMs: number,
  started: StartedEvent,
): Promise<ClaimResult & { startedAt?: string }> {
  const inserted = await scoped(tx)<{ attempt: number; started_at: string }[]>`
        WITH claim AS (${insertClaim(at, key, fingerprint, leaseMs)}),
        ev AS (${trailRows(
          at.scope,
          {
            runId: started.runId, tenantId: at.tenantId, event: sqlText(`'started'`), attempt: started.attempt,
            receiveCount: started.receiveCount, queue: started.queue, workerInstance: started.workerInstance,
          },
          sqlText('FROM claim'),
          sqlText('RETURNING occurred_at'),
        )})
        SELECT claim.attempt, (SELECT occurred_at::text FROM ev) AS started_at FROM claim`;
  if (inserted.length > 0) return { kind: 'claimed', attempt: inserted[0]!.attempt, startedAt: inserted[0]!.started_at };
  return claimExistingKey(tx, at, key, fingerprint, leaseMs);
}

/**
 * A key claimed fresh by a group commit's opening (src/work/runtime/execute/group-opening.ts): its attempt, the database clock's instant of the claim, and the
 * claim row's physical address (ctid). Nothing else can see or change that row before the transaction
 * ends (it is not committed), so the address holds until the group's finish, which deletes the row by
 * it when the member is left out (a TID scan, whatever the ledger's statistics say).
 */
export interface FreshClaim {
  attempt: number;
  claimedAt: string;
  row: string;
}

/** Takes back a fresh claim (FreshClaim) whose attempt rolled back (its ledger row is deleted, as a rollback would). */
export async function unclaimFreshKey(tx: TxSql, at: LedgerScope, key: Buffer): Promise<void> {
  // Literal table names: a DELETE through a dynamic name is what R-RUN-21's source scan forbids.
  if (at.scope === 'tenant') await tx`DELETE FROM idempotency_keys WHERE tenant_id = ${at.tenantId} AND idempotency_key = ${key}`;
  else await tx`DELETE FROM platform_idempotency_keys WHERE idempotency_key = ${key}`;
}

/** The key already has a ledger row: replay, held, reused, permanently failed, or taken over. */
export async function claimExistingKey(tx: TxSql, at: LedgerScope, key: Buffer, fingerprint: Buffer, leaseMs: number): Promise<ClaimResult> {
  const ledger = tx(LEDGER_TABLE[at.scope]);
  const lease = leaseMs / 1000;
  const [row] = await tx<{ status: string; request_fingerprint: Buffer; outcome: LedgerOutcome; lease_over: boolean }[]>`
    SELECT status, request_fingerprint, outcome, expires_at <= clock_timestamp() AS lease_over
      FROM ${ledger} WHERE idempotency_key = ${key} ${tenantFilter(tx, at)} FOR UPDATE`;
  if (!row) return { kind: 'held' }; // deleted between the insert and the read: let the message come back
  if (!Buffer.from(row.request_fingerprint).equals(fingerprint)) return { kind: 'reused' };
  if (row.status === 'completed') return { kind: 'completed', outcome: row.outcome };
  if (row.status === 'failed_permanent') return { kind: 'failed_permanent' };
  if (row.status === 'processing' && !row.lease_over) return { kind: 'held' };
  // failed_retryable, or a processing row whose lease ran out: this execution takes it over.
  const [updated] = await tx`
    UPDATE ${ledger} SET status = 'processing', attempt = attempt + 1, outcome = '{}'::jsonb,
           expires_at = clock_timestamp() + make_interval(secs => ${lease}), updated_at = clock_timestamp()
     WHERE idempotency_key = ${key} ${tenantFilter(tx, at)} RETURNING attempt`;
  return { kind: 'claimed', attempt: updated!.attempt as number };
}

/** Marks the claimed key completed with its outcome, inside the effect transaction. */
export async function completeKey(tx: TxSql, at: LedgerScope, key: Buffer, outcome: LedgerOutcome, retentionMs: number): Promise<void> {
  const ledger = tx(LEDGER_TABLE[at.scope]);
  await tx`UPDATE ${ledger} SET status = 'completed', outcome = ${tx.json(outcome as never)},
                  expires_at = clock_timestamp() + make_interval(secs => ${retentionMs / 1000}), updated_at = clock_timestamp()
            WHERE idempotency_key = ${key} ${tenantFilter(tx, at)}`;
}

/**
 * Records a failed execution in its own transaction (the effect transaction rolled back with its
 * claim): `failed_retryable` or `failed_permanent`, attempt counted. A row of another request (other
 * fingerprint) or an already completed one is left alone.
 */
export async function failKey(
  db: Db,
  at: LedgerScope,
  key: Buffer,
  fingerprint: Buffer,
  status: 'failed_retryable' | 'failed_permanent',
  retentionMs: number,
): Promise<void> {
  const retention = retentionMs / 1000;
  await scoped(db)`INSERT INTO ${scopeTables(at.scope).ledger} AS k (${tenantText(at.scope, 'tenant_id,')} idempotency_key, request_fingerprint, status, expires_at)
           VALUES (${tenantOnly(at.scope, piece`${at.tenantId},`)} ${key}, ${fingerprint}, ${status}, clock_timestamp() + make_interval(secs => ${retention}))
           ON CONFLICT (${tenantText(at.scope, 'tenant_id,')} idempotency_key) DO UPDATE
             SET status = EXCLUDED.status, attempt = k.attempt + 1, expires_at = EXCLUDED.expires_at, updated_at = clock_timestamp()
             WHERE k.request_fingerprint = EXCLUDED.request_fingerprint AND k.status <> 'completed'`;
}

/**
 * A completed gate is a hint, never a verdict: Redis may remember what this database does not (another
 * stack's database sharing the Redis, a database restored from a backup, a data directory recreated).
 * Only the ledger's completed row of the key is replayed, with the ledger's outcome and fingerprint;
 * without one the gate counts as absent (`unavailable`) and the claim in the effect transaction
 * decides. One indexed read, on the replay path only.
 */
export async function confirmCompletedGate(db: Db, at: LedgerScope, key: Buffer): Promise<GateState> {
  const row = await readKey(db, at, key);
  if (row?.status !== 'completed') return { state: 'unavailable' };
  return { state: 'completed', outcome: row.outcome, fingerprintHex: row.fingerprint.toString('hex') };
}

/** The committed ledger row of a key, if any (to replay and repopulate Redis). */
export async function readKey(
  db: Db,
  at: LedgerScope,
  key: Buffer,
): Promise<{ status: string; fingerprint: Buffer; outcome: LedgerOutcome; attempt: number } | undefined> {
  const ledger = db(LEDGER_TABLE[at.scope]);
  const [row] = await db<{ status: string; request_fingerprint: Buffer; outcome: LedgerOutcome; attempt: number }[]>`
    SELECT status, request_fingerprint, outcome, attempt FROM ${ledger}
     WHERE idempotency_key = ${key} ${tenantFilter(db, at)}`;
  return row ? { status: row.status, fingerprint: Buffer.from(row.request_fingerprint), outcome: row.outcome, attempt: row.attempt } : undefined;
}
