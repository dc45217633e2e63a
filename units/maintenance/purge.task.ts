// maintenance.purge: hourly, deletes expired idempotency keys (both ledgers) and outbox rows sent more
// than 7 days ago, in batches. Never pending outbox rows, runs or trails (see src/work/runtime/maintain/purge.ts).
import { z } from 'zod';
import { defineTask } from '../../src/work/index.ts';
import { DEFAULT_OUTBOX_RETENTION_MS, DEFAULT_PURGE_BATCH, purgeExpired } from '../../src/work/runtime/maintain/purge.ts';

export const purge = defineTask({
  name: 'maintenance.purge',
  queue: 'maintenance',
  context: 'system',
  concurrency: 1,
  timeoutSeconds: 900,
  schedule: 'rate(1 hour)',
  overlap: 'skip',
  payload: z
    .object({
      /** Rows per DELETE. Default 1000. */
      batchSize: z.number().int().min(1).max(100_000).default(DEFAULT_PURGE_BATCH),
      /** Sent outbox rows older than this many seconds are deleted. Default 7 days. */
      outboxRetentionSeconds: z.number().int().min(0).default(DEFAULT_OUTBOX_RETENTION_MS / 1000),
    })
    .strict(),
  async handler(payload, run) {
    const counts = await purgeExpired(run.transaction, {
      batchSize: payload.batchSize,
      outboxRetentionMs: payload.outboxRetentionSeconds * 1000,
    });
    run.logger.info({ ...counts }, 'purged expired idempotency keys and sent outbox rows');
    return { deleted: counts };
  },
});
