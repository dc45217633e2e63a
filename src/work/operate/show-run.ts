// `svc runs show <runId>`: one run with everything an operator needs to understand it: the run row,
// its whole trail in causal order (by occurred_at, then id: a rolled-back attempt's `started` is
// recorded later, at the instant it happened), its idempotency ledger row, its outbox row (envelope,
// sent or pending) and its redrive chain.
import type { Sql, TxSql } from '../../db/client.ts';
import { idempotencyKeyOf } from '../runtime/store/idempotency.ts';
import type { RunRow } from '../runtime/store/run-store.ts';
import { readTrail, type TrailEvent } from '../runtime/store/trail.ts';
import { requireRun } from './find-run.ts';

/** A trail event as `runs show` prints it: the instant as an ISO string. */
export type TrailEntry = Omit<TrailEvent, 'occurredAt'> & { occurredAt: string };

export interface LedgerEntry {
  status: string;
  attempt: number;
  outcome: Record<string, unknown>;
  expiresAt: string;
  createdAt: string;
  updatedAt: string;
}

export interface OutboxEntry {
  queue: string;
  envelope: Record<string, unknown>;
  availableAt: string;
  sentAt: string | null;
  attempts: number;
}

export interface RunDetail {
  scope: 'tenant' | 'platform';
  /** Tenant uid, null for a platform run. */
  tenant: string | null;
  run: Omit<RunRow, 'tenantId' | 'queuedAt' | 'startedAt' | 'finishedAt' | 'updatedAt'> & {
    queuedAt: string;
    startedAt: string | null;
    finishedAt: string | null;
    updatedAt: string;
  };
  trail: TrailEntry[];
  /** The ledger row of the run's key; null before the first start or once purged. */
  ledger: LedgerEntry | null;
  /** Null once purged (sent rows are kept 7 days) or for a run never sent (skipped). */
  outbox: OutboxEntry | null;
  /** The failed run this run redrives (trigger redrive), else null. */
  redriveOf: string | null;
  /** The run that redrove this one, else null. */
  redrivenAs: string | null;
  /** The unique key it was dispatched with (from its first `queued` event), else null. */
  uniqueKey: string | null;
  /** The serial key that orders it among its unit's runs (from its first `queued` event), else null. */
  serialKey: string | null;
}

export interface ShowRunOptions {
  /**
   * The key source of a unit declaring a business idempotency key (from its definition); default the
   * run id, the key of every unit without one.
   */
  keySource?: (unit: string, payload: unknown) => string | undefined;
}

/**
 * A key the dispatch recorded in the detail of the run's first `queued` event: `unique_key` (unique
 * dispatch, src/work/runtime/produce/unique-dispatch.ts) or `serial_key` (a unit's serialKey,
 * src/work/runtime/execute/serial-turn.ts).
 */
function dispatchKey(trail: readonly TrailEvent[], field: 'unique_key' | 'serial_key'): string | null {
  const key = trail.find((e) => e.event === 'queued')?.detail?.[field];
  return typeof key === 'string' ? key : null;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export async function showRun(sql: Sql | TxSql, runId: string, options: ShowRunOptions = {}): Promise<RunDetail> {
  const { scope, run, tenantUid } = await requireRun(sql, runId);
  const t = scope === 'tenant'
    ? { trail: 'task_run_events', outbox: 'outbox_messages', ledger: 'idempotency_keys', runs: 'task_runs' }
    : { trail: 'platform_task_run_events', outbox: 'platform_outbox_messages', ledger: 'platform_idempotency_keys', runs: 'platform_task_runs' };
  const trailRows = await readTrail(sql, scope, run.runId);
  const [outboxRow] = await sql<Record<string, unknown>[]>`
    SELECT queue, envelope, available_at, sent_at, attempts FROM ${sql(t.outbox)} WHERE run_id = ${run.runId}`;
  const envelope = (outboxRow?.envelope as Record<string, unknown> | undefined) ?? null;
  const source = (envelope && options.keySource?.(run.name, envelope.payload)) ?? run.runId;
  const key = idempotencyKeyOf(run.name, source);
  const [ledgerRow] = await sql<Record<string, unknown>[]>`
    SELECT status, attempt, outcome, expires_at, created_at, updated_at FROM ${sql(t.ledger)}
     WHERE idempotency_key = ${key} ${run.tenantId ? sql`AND tenant_id = ${run.tenantId}` : sql``}`;
  const [child] = await sql<{ run_id: string }[]>`
    SELECT run_id::text FROM ${sql(t.runs)} WHERE causation_id = ${run.runId} AND trigger = 'redrive' ORDER BY queued_at LIMIT 1`;
  const { tenantId: _tenant, queuedAt, startedAt, finishedAt, updatedAt, ...rest } = run;
  return {
    scope,
    tenant: tenantUid,
    run: { ...rest, queuedAt: queuedAt.toISOString(), startedAt: iso(startedAt), finishedAt: iso(finishedAt), updatedAt: updatedAt.toISOString() },
    trail: trailRows.map((e) => ({ ...e, occurredAt: e.occurredAt.toISOString() })),
    ledger: ledgerRow
      ? {
          status: ledgerRow.status as string,
          attempt: ledgerRow.attempt as number,
          outcome: ledgerRow.outcome as Record<string, unknown>,
          expiresAt: (ledgerRow.expires_at as Date).toISOString(),
          createdAt: (ledgerRow.created_at as Date).toISOString(),
          updatedAt: (ledgerRow.updated_at as Date).toISOString(),
        }
      : null,
    outbox: outboxRow
      ? {
          queue: outboxRow.queue as string,
          // The envelope's tenant_id is the numeric tenant id: never shown (the tenant is named by its uid above).
          envelope: Object.fromEntries(Object.entries(envelope!).filter(([k]) => k !== 'tenant_id')),
          availableAt: (outboxRow.available_at as Date).toISOString(),
          sentAt: iso(outboxRow.sent_at as Date | null),
          attempts: outboxRow.attempts as number,
        }
      : null,
    redriveOf: run.trigger === 'redrive' ? run.causationId : null,
    redrivenAs: child?.run_id ?? null,
    uniqueKey: dispatchKey(trailRows, 'unique_key'),
    serialKey: dispatchKey(trailRows, 'serial_key'),
  };
}
