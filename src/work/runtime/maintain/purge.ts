// What maintenance.purge deletes, in batches: expired idempotency keys of both ledgers and outbox rows
// of both outboxes sent before the retention. Pending outbox rows (sent_at null), runs and trails are
// never touched. A row the relay gave up (its run cancelled, or the queue kept refusing it) has its
// sent_at set when it was given up (src/work/runtime/produce/relay.ts), so it is purged like a sent one. Each batch is one bounded DELETE, so a large backlog never becomes one huge statement.
import type { TxSql } from '../../../db/client.ts';
import { DEFAULT_OUTBOX_RETENTION_MS } from '../../../config/limits.ts';

export interface PurgeOptions {
  /** Rows per DELETE. Default 1000. */
  batchSize?: number;
  /** Sent outbox rows older than this are deleted, ms. Default 7 days. */
  outboxRetentionMs?: number;
  /** Called after each batch with the rows deleted so far. */
  onBatch?: (deletedSoFar: number) => Promise<void> | void;
}

export interface PurgeCounts {
  idempotency_keys: number;
  platform_idempotency_keys: number;
  outbox_messages: number;
  platform_outbox_messages: number;
}

export const DEFAULT_PURGE_BATCH = 1000;
/** The spec's sent-outbox retention (7 days) lives with the other limits; re-exported for the unit. */
export { DEFAULT_OUTBOX_RETENTION_MS };

export async function purgeExpired(tx: TxSql, options: PurgeOptions = {}): Promise<PurgeCounts> {
  const batch = options.batchSize ?? DEFAULT_PURGE_BATCH;
  const retentionSeconds = (options.outboxRetentionMs ?? DEFAULT_OUTBOX_RETENTION_MS) / 1000;
  const counts: PurgeCounts = { idempotency_keys: 0, platform_idempotency_keys: 0, outbox_messages: 0, platform_outbox_messages: 0 };
  let total = 0;
  const drain = async (table: keyof PurgeCounts, deleteBatch: () => Promise<number>) => {
    for (;;) {
      const n = await deleteBatch();
      counts[table] += n;
      total += n;
      if (n > 0) await options.onBatch?.(total);
      if (n < batch) return;
    }
  };
  for (const table of ['idempotency_keys', 'platform_idempotency_keys'] as const) {
    await drain(table, async () => {
      const rows = await tx`DELETE FROM ${tx(table)} WHERE id IN (
          SELECT id FROM ${tx(table)} WHERE expires_at < clock_timestamp() ORDER BY expires_at LIMIT ${batch}
        ) RETURNING id`;
      return rows.length;
    });
  }
  for (const table of ['outbox_messages', 'platform_outbox_messages'] as const) {
    await drain(table, async () => {
      // sent_at IS NOT NULL is explicit: a pending row is never a candidate, whatever its age.
      const rows = await tx`DELETE FROM ${tx(table)} WHERE id IN (
          SELECT id FROM ${tx(table)}
           WHERE sent_at IS NOT NULL AND sent_at < clock_timestamp() - make_interval(secs => ${retentionSeconds})
           ORDER BY sent_at LIMIT ${batch}
        ) RETURNING id`;
      return rows.length;
    });
  }
  return counts;
}
