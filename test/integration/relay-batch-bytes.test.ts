// The relay's SendMessageBatch calls stay within the SQS limits by bytes as well as by count: pending
// rows whose envelopes together far exceed 256 KiB go out in several calls of at most 262144 bytes,
// each row exactly once. The calls are observed on the real client, against the real queue server.
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/db/client.ts';
import { inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
import { createSqsClient } from '../../src/queue/client.ts';
import { queueUrl, type QueueName } from '../../src/queue/names.ts';
import { provisionQueues } from '../../src/queue/provision.ts';
import { relayPass } from '../../src/work/runtime/produce/relay.ts';
import { freshQueuePrefix, type TestDatabase } from '../support/services.ts';
import { observeCommands } from '../support/sqs-observe.ts';
import { createTenantMember, workDatabase } from './work-tables-support.ts';
import { testDispatcher } from './work-test-units.ts';

/** SQS: at most 256 KiB of message payload per SendMessageBatch call (spec R-OBX-13). */
const SPEC_BATCH_BYTES = 262_144;
/** SQS: at most 10 entries per SendMessageBatch call (spec R-OBX-13). */
const SPEC_BATCH_ENTRIES = 10;

let db: TestDatabase;
let sql: Sql;
let sqs: SQSClient;
let prefix: string;
let tenantActor: Actor;
const system: Actor = { kind: 'system', label: 'relay-bytes-test' };
const dispatcher = testDispatcher();

interface ObservedCall {
  queueUrl: string;
  entries: number;
  /** Bodies plus attribute names, types and values: everything SQS counts toward the limit. */
  bytes: number;
}
const calls: ObservedCall[] = [];

interface OutgoingEntry {
  MessageBody?: string;
  MessageAttributes?: Record<string, { DataType?: string; StringValue?: string; BinaryValue?: Uint8Array }>;
}

function entryBytes(e: OutgoingEntry): number {
  let n = Buffer.byteLength(e.MessageBody ?? '', 'utf8');
  for (const [name, v] of Object.entries(e.MessageAttributes ?? {})) {
    n += Buffer.byteLength(name, 'utf8') + Buffer.byteLength(v.DataType ?? '', 'utf8');
    n += v.StringValue !== undefined ? Buffer.byteLength(v.StringValue, 'utf8') : (v.BinaryValue?.byteLength ?? 0);
  }
  return n;
}

beforeAll(async () => {
  db = await workDatabase({ max: 6 });
  sql = db.sql;
  const member = await createTenantMember(sql);
  tenantActor = { kind: 'system', tenantId: member.tenantId, label: 'relay-bytes-test' };
  const q = freshQueuePrefix();
  prefix = q.queueUrlPrefix;
  sqs = createSqsClient({ region: 'us-east-1', endpoint: q.endpoint, localCredentials: true }, { maxAttempts: 1 });
  // Every SendMessageBatch the relay makes, as it leaves the client (before serialization).
  observeCommands(sqs, (_command, args) => {
    const input = args as { QueueUrl?: string; Entries?: OutgoingEntry[] };
    if (input.QueueUrl && input.Entries && input.Entries.some((e) => e.MessageBody !== undefined)) {
      calls.push({ queueUrl: input.QueueUrl, entries: input.Entries.length, bytes: input.Entries.reduce((a, e) => a + entryBytes(e), 0) });
    }
  });
  await provisionQueues(sqs, prefix);
});

afterAll(async () => {
  sqs?.destroy();
  await db?.drop();
});

/** Receives and deletes every message of a queue until it stays empty for two polls. */
async function drain(queue: QueueName): Promise<string[]> {
  const url = queueUrl(prefix, queue);
  const bodies: string[] = [];
  for (let idle = 0; idle < 2; ) {
    const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
    if (!Messages?.length) {
      idle++;
      continue;
    }
    bodies.push(...Messages.map((m) => m.Body!));
    await sqs.send(new DeleteMessageBatchCommand({ QueueUrl: url, Entries: Messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })) }));
  }
  return bodies;
}

/** A payload whose JSON is exactly `bytes` long (under the 64 KiB dispatch limit). */
function payloadOf(bytes: number, tag: number): { tag: number; blob: string } {
  const skeleton = JSON.stringify({ tag, blob: '' }).length;
  return { tag, blob: 'x'.repeat(bytes - skeleton) };
}

describe('relay batch bytes', () => {
  it('R-OBX-13 rows whose envelopes sum far over 256 KiB go out in calls of at most 262144 bytes and 10 entries, each row once', async () => {
    // Sizes near the dispatch limit, varied so packing by count alone (10 per call) would put far more
    // than 256 KiB into one call, and so calls close at different fill levels.
    const sizes = [60_000, 64_000, 45_000, 63_500, 30_000, 62_000, 64_000, 20_000, 61_000, 58_000, 64_000];
    const tenantRuns = await inUnitOfWork(sql, tenantActor, async (tx) => {
      const ids: string[] = [];
      for (const [i, size] of sizes.entries()) {
        ids.push((await dispatcher.dispatchTask(tx, 'demo.any_payload', payloadOf(size, i), { actor: tenantActor })).runId);
      }
      return ids;
    });
    const platformRuns = await inUnitOfWork(sql, system, async (tx) => {
      const ids: string[] = [];
      for (const [i, size] of sizes.slice(0, 6).entries()) {
        ids.push((await dispatcher.dispatchTask(tx, 'demo.platform_task', payloadOf(size, i), { actor: system })).runId);
      }
      return ids;
    });
    // The premise: what is pending together is far over one call's byte limit, in both outboxes.
    const [pending] = await sql<{ tenant: number; platform: number }[]>`
      SELECT (SELECT sum(octet_length(envelope::text)) FROM outbox_messages WHERE sent_at IS NULL)::int8::float8 AS tenant,
             (SELECT sum(octet_length(envelope::text)) FROM platform_outbox_messages WHERE sent_at IS NULL)::int8::float8 AS platform`;
    expect(pending!.tenant).toBeGreaterThan(2 * SPEC_BATCH_BYTES);
    expect(pending!.platform).toBeGreaterThan(SPEC_BATCH_BYTES);

    const result = await relayPass(sql, sqs, prefix, { instance: 'relay-bytes-test' });
    expect(result).toMatchObject({ sent: sizes.length + 6, failed: 0 });

    // Every call within both limits; together they carried each row once.
    expect(calls.length).toBeGreaterThan(0);
    for (const call of calls) {
      expect(call.bytes).toBeLessThanOrEqual(SPEC_BATCH_BYTES);
      expect(call.entries).toBeLessThanOrEqual(SPEC_BATCH_ENTRIES);
    }
    expect(calls.reduce((a, c) => a + c.entries, 0)).toBe(sizes.length + 6);
    const tenantBytes = calls.filter((c) => c.queueUrl === queueUrl(prefix, 'default')).reduce((a, c) => a + c.bytes, 0);
    expect(calls.filter((c) => c.queueUrl === queueUrl(prefix, 'default')).length).toBeGreaterThanOrEqual(Math.ceil(tenantBytes / SPEC_BATCH_BYTES));

    // Every row marked sent, with one `sent` trail event, and exactly one message per run on its queue.
    const [unsent] = await sql<{ n: number }[]>`
      SELECT ((SELECT count(*) FROM outbox_messages WHERE sent_at IS NULL) + (SELECT count(*) FROM platform_outbox_messages WHERE sent_at IS NULL))::int AS n`;
    expect(unsent!.n).toBe(0);
    const sentEvents = await sql<{ run_id: string }[]>`
      SELECT run_id FROM task_run_events WHERE event = 'sent' UNION ALL SELECT run_id FROM platform_task_run_events WHERE event = 'sent'`;
    expect(sentEvents.map((e) => e.run_id).sort()).toEqual([...tenantRuns, ...platformRuns].sort());
    const tenantBodies = (await drain('default')).map((b) => JSON.parse(b) as { run_id: string; payload: { tag: number; blob: string } });
    const platformBodies = (await drain('critical')).map((b) => JSON.parse(b) as { run_id: string; payload: { tag: number; blob: string } });
    expect(tenantBodies.map((b) => b.run_id).sort()).toEqual([...tenantRuns].sort());
    expect(platformBodies.map((b) => b.run_id).sort()).toEqual([...platformRuns].sort());
    // The bodies arrived whole (a truncated or split body would not parse or would be shorter).
    for (const b of tenantBodies) expect(JSON.stringify(b.payload).length).toBe(sizes[b.payload.tag]);
  });
});
