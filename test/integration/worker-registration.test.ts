// The worker's registration statements on real PostgreSQL: one delivery (startDelivery) or several
// arriving together (startDeliveries) move each run to `running` with its own `received` event in the
// same commit, and leave missing or finished runs untouched for the general path.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDeliveries, startDelivery, transitionRun } from '../../src/work/runtime/store/run-store.ts';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import { createTenant } from './work-tables-support.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { createSql, type Sql } from '../../src/db/client.ts';

let h: WorkHarness;

beforeAll(async () => {
  h = await workHarness({ redis: false });
});
afterAll(async () => h?.close());

describe('worker registration statements', () => {
  it('R-WRK-01 R-TRL-08 deliveries registered together each become running with their own received event, committed together', async () => {
    const tenantId = await createTenant(h.sql);
    const actor = { kind: 'system' as const, tenantId, label: 'test' };
    const a = await h.dispatch('fixture.tenant_effect', { key: 'reg-a' }, actor);
    const b = await h.dispatch('fixture.tenant_effect', { key: 'reg-b' }, actor);
    const done = await h.dispatch('fixture.tenant_effect', { key: 'reg-done' }, actor);
    await inUnitOfWork(h.sql, actor, (tx) => transitionRun(tx, 'tenant', { runId: done.runId, tenantId, to: 'succeeded' }));
    const missing = randomUUID();
    const settings = { tenantId, userId: '', process: 'worker:fixture.tenant_effect' };

    const started = await startDeliveries(h.sql, 'tenant', settings, tenantId, 'reg-worker', [
      { runId: a.runId, receiveCount: 1 },
      { runId: b.runId, receiveCount: 3 },
      { runId: done.runId, receiveCount: 2 },
      { runId: missing, receiveCount: 1 },
    ]);
    expect([...started.keys()].sort()).toEqual([a.runId, b.runId].sort());
    expect(started.get(b.runId)!.run).toMatchObject({ status: 'running', attempts: 1, tenantId });
    expect(started.get(b.runId)!.scheduledFor).toBeNull();

    const [ra, rb, rdone] = await Promise.all([h.run(a.runId), h.run(b.runId), h.run(done.runId)]);
    expect([ra!.status, rb!.status, rdone!.status]).toEqual(['running', 'running', 'succeeded']);
    expect(ra!.started_at).not.toBeNull();
    const trailB = await h.trail(b.runId);
    // Nothing relayed these runs: the delivery proves the send and records it first.
    expect(events(trailB)).toEqual(['queued', 'sent', 'received']);
    expect(trailB[1]).toMatchObject({ attempt: 0, worker_instance: 'reg-worker', detail: { recorded_by: 'delivery' } });
    expect(trailB[2]).toMatchObject({ attempt: 1, receive_count: 3, worker_instance: 'reg-worker' });
    // The finished run got nothing: the general path records its late delivery.
    expect(events(await h.trail(done.runId))).toEqual(['queued']);
    // Both events belong to one transaction.
    const xmins = await h.sql`SELECT DISTINCT xmin::text AS x FROM task_run_events WHERE run_id IN (${a.runId}, ${b.runId}) AND event = 'received'`;
    expect(xmins).toHaveLength(1);

    // A new delivery of a running run is a new attempt.
    const again = await startDelivery(h.sql, 'tenant', settings, { runId: a.runId, tenantId, receiveCount: 2, workerInstance: 'reg-worker' });
    expect(again!.run).toMatchObject({ status: 'running', attempts: 2 });
    expect((await h.trail(a.runId)).filter((t) => t.event === 'received').map((t) => t.attempt)).toEqual([1, 2]);
  });

  it('R-WRK-01 a platform delivery (no schedule origin) registers with no scheduled moment and its received event', async () => {
    const p = await h.dispatch('fixture.effect', { key: 'reg-platform' });
    const settings = { tenantId: '', userId: '', process: 'worker:fixture.effect' };
    const started = await startDeliveries(h.sql, 'platform', settings, null, 'reg-worker', [{ runId: p.runId, receiveCount: 1 }]);
    expect(started.get(p.runId)!.run).toMatchObject({ status: 'running', attempts: 1, tenantId: null });
    expect(started.get(p.runId)!.scheduledFor).toBeNull();
    expect(events(await h.trail(p.runId))).toEqual(['queued', 'sent', 'received']);
  });

  it('deliveries registered together run on the statement\'s generic plan from its sixth call: it is not planned anew for every group', async () => {
    const tenantId = await createTenant(h.sql);
    const actor = { kind: 'system' as const, tenantId, label: 'test' };
    const settings = { tenantId, userId: '', process: 'worker:fixture.tenant_effect' };
    // Tables under a burst (queued runs, their outbox rows pending), analysed: on them a plan sized from
    // the values looked cheaper than the generic plan, every time.
    await h.sql`INSERT INTO task_runs (run_id, tenant_id, name, queue, trigger, actor_kind, actor_label, correlation_id, causation_id)
                SELECT gen_random_uuid(), ${tenantId}, 'fixture.tenant_effect', 'default', 'dispatch', 'system', 'test', gen_random_uuid(), gen_random_uuid()
                  FROM generate_series(1, 30000)`;
    await h.sql`INSERT INTO outbox_messages (tenant_id, run_id, queue, envelope)
                SELECT tenant_id, run_id, queue, '{}'::jsonb FROM task_runs WHERE tenant_id = ${tenantId} AND status = 'queued'`;
    await h.sql`ANALYZE task_runs`;
    await h.sql`ANALYZE outbox_messages`;
    // One connection: prepared statements and their plans are a session's.
    const session = createSql(h.db.url, { max: 1 });
    try {
      for (let call = 0; call < 8; call++) {
        const runs = [];
        for (let i = 0; i < 2 + (call % 3); i++) runs.push(await h.dispatch('fixture.tenant_effect', { key: `reg-plan-${call}-${i}` }, actor));
        const started = await startDeliveries(session, 'tenant', settings, tenantId, 'reg-worker', runs.map((r) => ({ runId: r.runId, receiveCount: 1 })));
        expect(started.size).toBe(runs.length);
      }
      const [plans] = await session<{ generic: number; custom: number }[]>`
        SELECT generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements
         WHERE statement LIKE '%AS d(run_id, receive_count, message_id, received_at, key_hex)%' AND statement NOT LIKE '%pg_prepared_statements%'`;
      // PostgreSQL plans the first five calls with their values, then compares: every later call ran on the generic plan.
      expect(plans).toEqual({ generic: 3, custom: 5 });
    } finally {
      await session.end({ timeout: 5 });
    }
  });
  it('a registration\'s ledger check probes the key\'s index however the ledger grew since its plan was made: it never reads the whole ledger', async () => {
    // Found with auto_explain in a burn-down: on the generic plan made while the ledger was small, the
    // check hashed the whole ledger once per statement (2-4 ms, growing with every run's key).
    const tenantId = await createTenant(h.sql);
    const actor = { kind: 'system' as const, tenantId, label: 'test' };
    const settings = { tenantId, userId: '', process: 'worker:fixture.tenant_effect' };
    const ledgerRows = (n: number) => h.sql`INSERT INTO idempotency_keys (tenant_id, idempotency_key, request_fingerprint, status, expires_at)
      SELECT ${tenantId}, sha256(gen_random_uuid()::text::bytea), sha256(gen_random_uuid()::text::bytea), 'completed', now() + interval '1 day' FROM generate_series(1, ${n})`;
    // A tenant's runs queued under a burst and a ledger of 700 keys, both analysed; no autovacuum
    // analyse after that, so the plan made now stays, as between two of its passes.
    await h.sql`ALTER TABLE idempotency_keys SET (autovacuum_enabled = false)`;
    await h.sql`INSERT INTO task_runs (run_id, tenant_id, name, queue, trigger, actor_kind, actor_label, correlation_id, causation_id)
                SELECT gen_random_uuid(), ${tenantId}, 'fixture.tenant_effect', 'default', 'dispatch', 'system', 'test', gen_random_uuid(), gen_random_uuid()
                  FROM generate_series(1, 3000)`;
    await ledgerRows(700);
    await h.sql`ANALYZE task_runs`;
    await h.sql`ANALYZE idempotency_keys`;
    const session = createSql(h.db.url, { max: 1 });
    const key = () => Buffer.from(randomUUID().replaceAll('-', '').repeat(2), 'hex');
    const register = async (label: string, n: number) => {
      const runs: Array<{ runId: string }> = [];
      for (let i = 0; i < n; i++) runs.push(await h.dispatch('fixture.tenant_effect', { key: `reg-ledger-${label}-${i}` }, actor));
      return (on: Sql) => startDeliveries(on, 'tenant', settings, tenantId, 'reg-worker', runs.map((r) => ({ runId: r.runId, receiveCount: 1, key: key() })));
    };
    try {
      // Past the sixth call: the statement runs on its generic plan, made on the small ledger.
      for (let call = 0; call < 8; call++) expect((await (await register(`warm-${call}`, 3))(session)).size).toBe(3);
      await ledgerRows(30_000);
      const next = await register('measured', 5);
      // The registration, and what this transaction's sequential scans of the ledger read.
      const read = await session.begin(async (tx) => {
        const started = await next(tx as unknown as Sql);
        const [counts] = await tx<{ tuples: number }[]>`SELECT pg_stat_get_xact_tuples_returned('idempotency_keys'::regclass)::int AS tuples`;
        return { started, tuples: counts!.tuples };
      });
      expect([...read.started.values()].map((s) => s.keyed)).toEqual([false, false, false, false, false]);
      // Five probes of the key's unique index read nothing by a sequential scan; a hashed check reads the whole ledger.
      expect(read.tuples).toBeLessThan(100);
    } finally {
      await session.end({ timeout: 5 });
      await h.sql`ALTER TABLE idempotency_keys RESET (autovacuum_enabled)`;
    }
  });
});
