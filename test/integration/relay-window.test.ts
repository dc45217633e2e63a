// The relay's wake passes read the pending-row index from their window (src/work/runtime/produce/relay.ts, header):
// measured in the index's own statistics, on a database of its own so no other test's scans count.
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connectedRedis, freshQueuePrefix, freshRedisUrl, type TestDatabase } from '../support/services.ts';
import { waitFor } from '../support/wait-for.ts';
import { createSql, type Sql } from '../../src/db/client.ts';
import { inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
import { afterCommit } from '../../src/kv/wake.ts';
import { createSqsClient } from '../../src/queue/client.ts';
import { provisionQueues } from '../../src/queue/provision.ts';
import { startRelay } from '../../src/work/runtime/produce/relay.ts';
import { createTenantMember, workDatabase } from './work-tables-support.ts';
import { testDispatcher } from './work-test-units.ts';

let db: TestDatabase;
let redis: Redis;
let sqs: SQSClient;
// One connection each, so the test can make each backend flush its statistics before reading them.
let setupSql: Sql;
let relaySql: Sql;

beforeAll(async () => {
  db = await workDatabase({ max: 1 });
  redis = await connectedRedis(await freshRedisUrl(), { name: 'relay-window-test' });
  sqs = createSqsClient({ region: 'us-east-1', endpoint: freshQueuePrefix().endpoint, localCredentials: true }, { maxAttempts: 1 });
  setupSql = createSql(db.url, { max: 1 });
  relaySql = createSql(db.url, { max: 1 });
});

afterAll(async () => {
  redis?.disconnect();
  sqs?.destroy();
  await setupSql?.end({ timeout: 5 });
  await relaySql?.end({ timeout: 5 });
  await db?.drop();
});

/** Scans of the tenant outbox's pending-row index and the index pages read so far, every backend's statistics flushed. */
async function pendingIndexUse(): Promise<{ scans: number; blocks: number }> {
  // pg_stat_force_next_flush: the backend flushes its statistics before it reports ready for the next query.
  await relaySql`SELECT pg_stat_force_next_flush()`;
  await setupSql`SELECT pg_stat_force_next_flush()`;
  const [row] = await setupSql`SELECT s.idx_scan::int AS scans, (io.idx_blks_hit + io.idx_blks_read)::int AS blocks
                                 FROM pg_stat_user_indexes s JOIN pg_statio_user_indexes io USING (indexrelid)
                                WHERE s.indexrelname = 'outbox_messages_pending'`;
  return { scans: row!.scans as number, blocks: row!.blocks as number };
}

it('R-OBX-10 a pass woken by recent signals, after a pass that drained what it saw, does not walk the pending-row index entries of rows sent before it', async () => {
  const prefix = freshQueuePrefix().queueUrlPrefix;
  await provisionQueues(sqs, prefix);
  const member = await createTenantMember(setupSql);
  const actor: Actor = { kind: 'system', tenantId: member.tenantId, label: 'relay-window-test' };
  // 40,000 rows of the last hour marked sent: their entries stay in the pending-row index until a
  // vacuum, and sort first.
  await setupSql`INSERT INTO outbox_messages (tenant_id, run_id, queue, envelope, available_at)
                 SELECT ${member.tenantId}, gen_random_uuid(), 'default', '{}'::jsonb, now() - interval '1 hour' + i * interval '50 ms'
                   FROM generate_series(1, 40000) i`;
  await setupSql`UPDATE outbox_messages SET sent_at = clock_timestamp() WHERE sent_at IS NULL`;
  const relay = startRelay({ sql: relaySql, redis, sqs, queueUrlPrefix: prefix, sweepIntervalMs: 60_000, backlogSampleIntervalMs: 600_000, instance: 'relay-window-test' });
  try {
    // The relay's first pass reads every due row, walking the 40,000 entries, and finds none.
    await waitFor(
      async () => ((await redis.client('LIST')) as string).split('\n').some((line) => line.includes('name=svc-relay-wake') && line.includes('cmd=blmpop')),
      5_000,
      { stepMs: 20, what: 'the first pass done, the relay waiting for a signal' },
    );
    const before = await pendingIndexUse();
    const dispatcher = testDispatcher();
    const { runId } = await afterCommit(redis, inUnitOfWork(setupSql, actor, (tx) => dispatcher.dispatchTask(tx, 'demo.tenant_task', { n: 1 }, { actor })));
    await waitFor(async () => (await setupSql`SELECT 1 FROM outbox_messages WHERE run_id = ${runId} AND sent_at IS NOT NULL`).length === 1, 5_000, {
      stepMs: 10,
      what: 'the row sent',
    });
    const after = await pendingIndexUse();
    expect(after.scans - before.scans).toBe(1);
    // The row's insert and the pass's descent to the window: a few pages. From the front of the index
    // the pass read about two hundred.
    expect(after.blocks - before.blocks, `pending-row index pages read: ${after.blocks - before.blocks}`).toBeLessThanOrEqual(20);
  } finally {
    await relay.stop();
  }
});
