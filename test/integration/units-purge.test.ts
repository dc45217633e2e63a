// maintenance.purge through the worker runtime: deletes expired idempotency keys (both ledgers) and
// outbox rows sent more than 7 days ago, in batches; never pending outbox rows, runs or trails.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { purge } from '../../units/maintenance/purge.task.ts';
import { loginNotificationEmail } from '../../units/identity/login-notification-email.handler.ts';
import { RUNTIME_UNITS } from '../fixtures/units/runtime-units.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { createTenant } from './work-tables-support.ts';

let h: WorkHarness;
let tenantId: string;
beforeAll(async () => {
  h = await workHarness({ units: new Map([...RUNTIME_UNITS, [purge.name, purge], [loginNotificationEmail.name, loginNotificationEmail]]) });
  tenantId = await createTenant(h.sql);
});
afterAll(async () => h?.close());

const digest = () => randomBytes(32);

async function seed(): Promise<void> {
  const sql = h.sql;
  for (const [expired, n] of [[true, 5], [false, 2]] as const) {
    for (let i = 0; i < n; i++) {
      const expires = expired ? sql`clock_timestamp() - interval '1 minute'` : sql`clock_timestamp() + interval '1 day'`;
      await sql`INSERT INTO idempotency_keys (tenant_id, idempotency_key, request_fingerprint, status, outcome, expires_at)
                VALUES (${tenantId}, ${digest()}, ${digest()}, 'completed', ${sql.json({ keep: !expired })}, ${expires})`;
      await sql`INSERT INTO platform_idempotency_keys (idempotency_key, request_fingerprint, status, outcome, expires_at)
                VALUES (${digest()}, ${digest()}, 'completed', ${sql.json({ keep: !expired })}, ${expires})`;
    }
  }
  const rows: Array<[string, string | null, string]> = [
    ['old-sent', "clock_timestamp() - interval '8 days'", "clock_timestamp() - interval '9 days'"],
    ['old-sent-2', "clock_timestamp() - interval '30 days'", "clock_timestamp() - interval '31 days'"],
    ['old-sent-3', "clock_timestamp() - interval '7 days 1 hour'", "clock_timestamp() - interval '8 days'"],
    ['recent-sent', "clock_timestamp() - interval '1 day'", "clock_timestamp() - interval '2 days'"],
    ['old-pending', null, "clock_timestamp() - interval '60 days'"],
  ];
  for (const [label, sentAt, createdAt] of rows) {
    // The pending row has no run behind it: keep the relay of this test away from it.
    const availableAt = sentAt === null ? "clock_timestamp() + interval '100 years'" : createdAt;
    await sql.unsafe(
      `INSERT INTO outbox_messages (tenant_id, run_id, queue, envelope, sent_at, created_at, available_at)
       VALUES ($1, $2, 'default', jsonb_build_object('label', $3::text), ${sentAt ?? 'NULL'}, ${createdAt}, ${availableAt})`,
      [tenantId, randomUUID(), label] as never[],
    );
    await sql.unsafe(
      `INSERT INTO platform_outbox_messages (run_id, queue, envelope, sent_at, created_at, available_at)
       VALUES ($1, 'default', jsonb_build_object('label', $2::text), ${sentAt ?? 'NULL'}, ${createdAt}, ${availableAt})`,
      [randomUUID(), label] as never[],
    );
  }
}

describe('maintenance.purge', () => {
  it('R-UNT-10 is a system task on maintenance, overlap skip, timeout 900 s, schedule rate(1 hour)', () => {
    expect(purge).toMatchObject({ kind: 'task', name: 'maintenance.purge', queue: 'maintenance', context: 'system', overlap: 'skip', timeoutSeconds: 900, schedule: 'rate(1 hour)' });
  });

  it('R-UNT-11 deletes in batches expired keys of both ledgers and outbox rows sent over 7 days ago, and nothing else', async () => {
    await seed();
    // Some runs and trails, which the purge must never touch.
    const ran = await h.dispatch('fixture.effect', { key: 'kept-run' });
    const [before] = await h.sql`SELECT (SELECT count(*) FROM platform_task_runs)::int AS runs, (SELECT count(*) FROM platform_task_run_events)::int AS events`;
    await h.startWorkers({ queues: ['maintenance'] });
    const { runId } = await h.dispatch('maintenance.purge', { batchSize: 2 });
    await h.relay();
    const run = await h.waitForStatus(runId, ['succeeded', 'failed']);
    expect(run.status).toBe('succeeded');
    expect(run.outcome).toEqual({ deleted: { idempotency_keys: 5, platform_idempotency_keys: 5, outbox_messages: 3, platform_outbox_messages: 3 } });
    const left = async (table: string) => h.sql.unsafe(`SELECT ${table.includes('outbox') ? "envelope->>'label'" : "outcome->>'keep'"} AS v FROM ${table} ORDER BY 1`);
    expect((await left('idempotency_keys')).map((r) => r.v)).toEqual(['true', 'true']);
    // (plus the purge run's own key, claimed in the same transaction and not expired)
    expect((await left('platform_idempotency_keys')).map((r) => r.v)).toEqual(['true', 'true', null]);
    // The dispatches of this test wrote pending platform outbox rows too: pending rows always stay.
    expect((await left('outbox_messages')).map((r) => r.v)).toEqual(['old-pending', 'recent-sent']);
    expect((await left('platform_outbox_messages')).map((r) => r.v).filter((v) => v !== null)).toEqual(['old-pending', 'recent-sent']);
    const [after] = await h.sql`SELECT (SELECT count(*) FROM platform_task_runs)::int AS runs, (SELECT count(*) FROM platform_task_run_events)::int AS events`;
    expect(after!.runs).toBe(before!.runs + 1);
    expect(after!.events).toBeGreaterThan(before!.events);
    expect(await h.run(ran.runId)).toBeDefined();
  });

  it('R-UNT-12 identity.login_notification_email subscribes to identity.session_started v1 on critical and sends through the mail port', async () => {
    expect(loginNotificationEmail).toMatchObject({ kind: 'subscriber', event: { type: 'identity.session_started', version: 1 }, queue: 'critical' });
    await h.startWorkers({ queues: ['critical'] });
    const actor = { kind: 'system' as const, tenantId, label: 'test' };
    const { runId } = await h.dispatch(
      'identity.login_notification_email',
      { userId: '42', email: 'someone@example.com', occurredAt: '2030-01-01T00:00:00Z' },
      actor,
    );
    await h.relay();
    expect((await h.waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    expect(h.logs()).toContain('mail sent (logging transport)');
    expect(h.logs()).not.toContain('someone@example.com');
  });
});
