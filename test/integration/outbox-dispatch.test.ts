// dispatchTask / publishEvent / dispatchScheduled write run, trail, actor and outbox rows inside the
// caller's transaction; afterCommit pushes the wake signal.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import type { TestDatabase } from '../support/services.ts';
import { connectedRedis, freshRedisUrl } from '../support/services.ts';
import { refusal } from '../support/refusal.ts';
import { commitStatementName, recordingProxy } from '../support/recording-proxy.ts';
import { within } from '../support/wait-for.ts';
import { stoppableRedis } from '../support/stoppable-redis.ts';
import { createSql, type Sql, type TxSql } from '../../src/db/client.ts';
import { inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
import { OUTBOX_WAKE_KEY } from '../../src/kv/keys.ts';
import { afterCommit, signalOutbox, WAKE_LIST_MAX } from '../../src/kv/wake.ts';
import { DispatchError } from '../../src/work/runtime/produce/dispatch.ts';
import { envelopeSchema, parseEnvelope } from '../../src/work/runtime/produce/envelope.ts';
import { createTenantMember, workDatabase, type TenantMember } from './work-tables-support.ts';
import { testDispatcher } from './work-test-units.ts';

let db: TestDatabase;
let sql: Sql;
let redis: Redis;
let member: TenantMember;
const dispatcher = testDispatcher();

let userActor: Actor;
const systemNoTenant: Actor = { kind: 'system', label: 'test-process' };
let systemWithTenant: Actor;

beforeAll(async () => {
  db = await workDatabase();
  sql = db.sql;
  redis = await connectedRedis(await freshRedisUrl(), { name: 'outbox-dispatch-test' });
  member = await createTenantMember(sql);
  userActor = { kind: 'user', tenantId: member.tenantId, userId: member.userId, membershipId: member.membershipId, label: `user:${member.userId}` };
  systemWithTenant = { kind: 'system', tenantId: member.tenantId, label: 'test-process' };
});
afterAll(async () => {
  redis?.disconnect();
  await db?.drop();
});

async function dispatchError(work: Promise<unknown>): Promise<DispatchError> {
  const error = await refusal(work);
  expect(error).toBeInstanceOf(DispatchError);
  return error as DispatchError;
}

const inTx = <T>(actor: Actor, work: (tx: TxSql) => Promise<T>) => inUnitOfWork(sql, actor, work);

describe('dispatchTask', () => {
  it('R-OBX-05 R-OBX-06 R-RUN-02 writes the queued run, its trail event, the user actor and the outbox row with one run_id', async () => {
    const correlationId = randomUUID();
    const run = await inTx(userActor, (tx) =>
      dispatcher.dispatchTask(tx, 'demo.tenant_task', { n: 7, extra: 'kept' }, { actor: userActor, correlationId }),
    );
    expect(run.scope).toBe('tenant');
    const [r] = await sql`SELECT * FROM task_runs WHERE run_id = ${run.runId}`;
    expect(r).toMatchObject({
      tenant_id: member.tenantId, name: 'demo.tenant_task', queue: 'default', trigger: 'dispatch', actor_kind: 'user',
      actor_label: `user:${member.userId}`, correlation_id: correlationId, causation_id: correlationId, status: 'queued',
      attempts: 0, progress: 0, finished_at: null,
    });
    const trail = await sql`SELECT event, attempt, queue, worker_instance FROM task_run_events WHERE run_id = ${run.runId}`;
    expect(trail).toEqual([{ event: 'queued', attempt: 0, queue: 'default', worker_instance: 'test-dispatcher' }]);
    const [actor] = await sql`SELECT tenant_id, user_id, membership_id FROM task_run_user_actors WHERE run_id = ${run.runId}`;
    expect(actor).toEqual({ tenant_id: member.tenantId, user_id: member.userId, membership_id: member.membershipId });
    const [o] = await sql`SELECT tenant_id, queue, envelope, sent_at, attempts, available_at <= clock_timestamp() AS due
      FROM outbox_messages WHERE run_id = ${run.runId}`;
    expect(o).toMatchObject({ tenant_id: member.tenantId, queue: 'default', sent_at: null, attempts: 0, due: true });
    // The envelope carries the run id, and parses as the worker will parse the message body. The payload is
    // stored as dispatched (the schema's input side): the worker's parse strips and transforms it once.
    const envelope = parseEnvelope(JSON.stringify(o!.envelope));
    expect(envelope).toEqual({
      run_id: run.runId, kind: 'task', name: 'demo.tenant_task', tenant_id: member.tenantId, payload: { n: 7, extra: 'kept' },
      correlation_id: correlationId, causation_id: correlationId,
    });
    expect(envelopeSchema.safeParse(run.envelope).success).toBe(true);
  });

  it('R-OBX-06 a rolled-back use case leaves no run, trail, actor or outbox row', async () => {
    let runId = '';
    await expect(
      inTx(userActor, async (tx) => {
        runId = (await dispatcher.dispatchTask(tx, 'demo.tenant_task', { n: 1 }, { actor: userActor })).runId;
        throw new Error('use case failed after dispatch');
      }),
    ).rejects.toThrow('use case failed');
    expect(runId).not.toBe('');
    const [c] = await sql`SELECT (SELECT count(*) FROM task_runs WHERE run_id = ${runId})
      + (SELECT count(*) FROM task_run_events WHERE run_id = ${runId})
      + (SELECT count(*) FROM task_run_user_actors WHERE run_id = ${runId})
      + (SELECT count(*) FROM outbox_messages WHERE run_id = ${runId}) AS n`;
    expect(Number(c!.n)).toBe(0);
  });

  it('R-OBX-06 a use case that ends with a dispatch commits in one round trip: its inserts are not waited for before COMMIT', async () => {
    const proxy = await recordingProxy(db.url);
    const viaProxy = createSql(proxy.url, { max: 1, applicationName: 'outbox-dispatch-test' });
    try {
      const dispatch = () => inUnitOfWork(viaProxy, userActor, (tx) => dispatcher.dispatchTask(tx, 'demo.tenant_task', { n: 3 }, { actor: userActor }));
      // The first use of each statement on a connection waits for its description (postgres.js prepares it).
      await dispatch();
      // Every answer is held back until COMMIT is on the wire: a use case that waited for its inserts'
      // answers before its COMMIT would never send it.
      proxy.holdAnswersUntil(commitStatementName(proxy.chunks));
      const run = await within(dispatch(), 10_000, 'COMMIT went out before the dispatch’s answers');
      const [c] = await sql`SELECT (SELECT count(*) FROM task_runs WHERE run_id = ${run.runId} AND status = 'queued')
        + (SELECT count(*) FROM task_run_events WHERE run_id = ${run.runId} AND event = 'queued')
        + (SELECT count(*) FROM outbox_messages WHERE run_id = ${run.runId} AND sent_at IS NULL) AS n`;
      expect(Number(c!.n)).toBe(3);
    } finally {
      await viaProxy.end({ timeout: 5 });
      await proxy.close();
    }
  });

  it('R-OBX-06 a dispatch the database refuses fails its use case with the database’s error, and nothing of the use case is stored', async () => {
    // A tenant that does not exist: the run's insert breaks its foreign key, after the work has returned.
    const ghost: Actor = { kind: 'system', tenantId: '999999999', label: 'test-process' };
    const existing = await inTx(systemWithTenant, (tx) => dispatcher.dispatchTask(tx, 'demo.tenant_task', { n: 5 }, { actor: systemWithTenant }));
    let first = '';
    let before = 0;
    const failed = await inTx(ghost, async (tx) => {
      // A write the use case made before its dispatch, on a run that exists.
      before = (await tx`INSERT INTO task_run_events (run_id, tenant_id, event, attempt, queue, worker_instance)
        VALUES (${existing.runId}, ${member.tenantId}, 'progress', 0, 'default', 'before-a-refused-dispatch') RETURNING id`).length;
      first = (await dispatcher.dispatchTask(tx, 'demo.tenant_task', { n: 4 }, { actor: ghost })).runId;
      return 'returned';
    }).catch((error: unknown) => error as { code?: string });
    expect(before).toBe(1);
    expect(first).not.toBe('');
    expect(failed).toMatchObject({ code: '23503' });
    expect(await sql`SELECT 1 FROM task_run_events WHERE worker_instance = 'before-a-refused-dispatch'`).toEqual([]);
    const [c] = await sql`SELECT (SELECT count(*) FROM task_runs WHERE run_id = ${first})
      + (SELECT count(*) FROM task_run_events WHERE run_id = ${first})
      + (SELECT count(*) FROM outbox_messages WHERE run_id = ${first}) AS n`;
    expect(Number(c!.n)).toBe(0);
  });

  it('R-DB-06 a dispatched run reads the database clock once: queued_at = updated_at, so no unsent run counts as in flight', async () => {
    // The in-flight indexes (sql/work/0018_tenant-fairness.sql) hold a queued run once its updated_at is
    // past its queued_at, which the relay's send stamps. Two column defaults read the clock twice, and
    // a run whose second reading fell later sat in the index unsent (17 of 400 measured).
    const [before] = await sql<{ t: Date }[]>`SELECT clock_timestamp() AS t`;
    const batch = await inTx(systemWithTenant, (tx) => dispatcher.dispatchMany(tx, 'demo.tenant_task', Array.from({ length: 400 }, (_, n) => ({ n })), { actor: systemWithTenant }));
    const runs = [
      ...batch,
      ...(await inTx(systemNoTenant, (tx) => dispatcher.dispatchMany(tx, 'demo.platform_task', Array.from({ length: 200 }, () => ({})), { actor: systemNoTenant }))),
    ];
    for (let n = 0; n < 50; n++) runs.push(await inTx(userActor, (tx) => dispatcher.dispatchTask(tx, 'demo.tenant_task', { n }, { actor: userActor })));
    const [after] = await sql<{ t: Date }[]>`SELECT clock_timestamp() AS t`;
    const tenantIds = runs.filter((r) => r.scope === 'tenant').map((r) => r.runId);
    const platformIds = runs.filter((r) => r.scope === 'platform').map((r) => r.runId);
    expect([tenantIds.length, platformIds.length]).toEqual([450, 200]);
    const rows = await sql<{ queued_at: Date; updated_at: Date; in_flight: boolean }[]>`
      SELECT queued_at, updated_at, (status = 'queued' AND updated_at > queued_at) AS in_flight FROM task_runs WHERE run_id = ANY(${tenantIds}::uuid[])
      UNION ALL
      SELECT queued_at, updated_at, (status = 'queued' AND updated_at > queued_at) FROM platform_task_runs WHERE run_id = ANY(${platformIds}::uuid[])`;
    expect(rows).toHaveLength(650);
    expect(rows.filter((r) => r.in_flight)).toHaveLength(0);
    expect(rows.filter((r) => r.updated_at.getTime() !== r.queued_at.getTime())).toHaveLength(0);
    // Still the database clock at each statement, not the transaction's start nor the client's.
    for (const r of rows) {
      expect(r.queued_at.getTime()).toBeGreaterThanOrEqual(before!.t.getTime());
      expect(r.queued_at.getTime()).toBeLessThanOrEqual(after!.t.getTime());
    }
    // One reading per row, as it is inserted: the 400 rows of one statement do not share an instant, and
    // they read the clock in the order they are inserted (dispatch order), as column defaults would.
    const [spread] = await sql<{ distinct_instants: number; out_of_order: number }[]>`
      SELECT count(DISTINCT queued_at)::int AS distinct_instants,
             count(*) FILTER (WHERE queued_at < previous)::int AS out_of_order
        FROM (SELECT queued_at, lag(queued_at) OVER (ORDER BY (envelope->'payload'->>'n')::int) AS previous
                FROM task_runs JOIN outbox_messages USING (run_id) WHERE run_id = ANY(${batch.map((r) => r.runId)}::uuid[])) AS x`;
    expect(spread!.distinct_instants).toBeGreaterThan(1);
    expect(spread!.out_of_order).toBe(0);
  });

  it('R-OBX-07 a delay becomes available_at on the outbox row', async () => {
    const run = await inTx(systemWithTenant, (tx) =>
      dispatcher.dispatchTask(tx, 'demo.tenant_task', { n: 1 }, { actor: systemWithTenant, delaySeconds: 30 }),
    );
    const [o] = await sql`SELECT extract(epoch FROM available_at - created_at)::float8 AS delay FROM outbox_messages WHERE run_id = ${run.runId}`;
    expect(o!.delay).toBeGreaterThan(29.9);
    expect(o!.delay).toBeLessThan(31);
    const e = await dispatchError(inTx(systemWithTenant, (tx) =>
      dispatcher.dispatchTask(tx, 'demo.tenant_task', { n: 1 }, { actor: systemWithTenant, delaySeconds: -1 })));
    expect(e.code).toBe('DISPATCH_DELAY_INVALID');
  });

  it('R-OBX-08 a tenant task needs a tenant; platform and system tasks must not have one', async () => {
    expect((await dispatchError(inTx(systemNoTenant, (tx) =>
      dispatcher.dispatchTask(tx, 'demo.tenant_task', { n: 1 }, { actor: systemNoTenant })))).code).toBe('RUN_CONTEXT_MISMATCH');
    for (const name of ['demo.platform_task', 'demo.system_task']) {
      expect((await dispatchError(inTx(userActor, (tx) =>
        dispatcher.dispatchTask(tx, name, {}, { actor: userActor })))).code).toBe('RUN_CONTEXT_MISMATCH');
      expect((await dispatchError(inTx(systemWithTenant, (tx) =>
        dispatcher.dispatchTask(tx, name, {}, { actor: systemWithTenant })))).code).toBe('RUN_CONTEXT_MISMATCH');
    }
    // Matching contexts: platform/system tasks go to the platform tables.
    for (const [name, queue] of [['demo.platform_task', 'critical'], ['demo.system_task', 'maintenance']] as const) {
      const run = await inTx(systemNoTenant, (tx) => dispatcher.dispatchTask(tx, name, { x: 1 }, { actor: systemNoTenant }));
      expect(run).toMatchObject({ scope: 'platform', tenantId: null, queue });
      const [r] = await sql`SELECT actor_kind, trigger, status FROM platform_task_runs WHERE run_id = ${run.runId}`;
      expect(r).toEqual({ actor_kind: 'system', trigger: 'dispatch', status: 'queued' });
      const [o] = await sql`SELECT envelope FROM platform_outbox_messages WHERE run_id = ${run.runId}`;
      expect(o!.envelope.tenant_id).toBeUndefined();
      const [t] = await sql`SELECT event FROM platform_task_run_events WHERE run_id = ${run.runId}`;
      expect(t!.event).toBe('queued');
    }
  });

  it('R-RUN-13 R-RUN-05 runs for a platform operator (or a scheduler as dispatch actor) are refused', async () => {
    const operator = { kind: 'platform_operator', label: 'op' } as unknown as Actor;
    expect((await dispatchError(inTx(systemNoTenant, (tx) =>
      dispatcher.dispatchTask(tx, 'demo.platform_task', {}, { actor: operator })))).code).toBe('RUN_ACTOR_REFUSED');
    expect((await dispatchError(inTx(systemNoTenant, (tx) =>
      dispatcher.dispatchTask(tx, 'demo.platform_task', {}, { actor: { kind: 'scheduler', label: 's' } })))).code).toBe('RUN_ACTOR_REFUSED');
  });

  it('refuses an unknown unit, a payload over 64 KiB and a payload its schema rejects', async () => {
    const unknown = await dispatchError(inTx(userActor, (tx) => dispatcher.dispatchTask(tx, 'demo.nope', {}, { actor: userActor })));
    expect(unknown.code).toBe('UNIT_NOT_REGISTERED');
    const exact = 'x'.repeat(65_536 - 2); // 64 KiB, the documented payload limit; JSON adds two quotes
    await inTx(userActor, (tx) => dispatcher.dispatchTask(tx, 'demo.any_payload', exact, { actor: userActor }));
    const big = await dispatchError(inTx(userActor, (tx) =>
      dispatcher.dispatchTask(tx, 'demo.any_payload', exact + 'x', { actor: userActor })));
    expect(big.code).toBe('PAYLOAD_TOO_LARGE');
    expect(big.details).toMatchObject({ bytes: 65_537, maxBytes: 65_536 });
    const invalid = await dispatchError(inTx(userActor, (tx) =>
      dispatcher.dispatchTask(tx, 'demo.tenant_task', { n: 'secret-value' }, { actor: userActor })));
    expect(invalid.code).toBe('PAYLOAD_INVALID');
    expect(JSON.stringify(invalid.details) + invalid.message).not.toContain('secret-value');
  });
});

describe('publishEvent', () => {
  it('R-OBX-09 writes one run and outbox row per subscriber, each with its own run_id', async () => {
    const runs = await inTx(userActor, (tx) =>
      dispatcher.publishEvent(tx, 'demo.happened', 1, { who: 'ana' }, { actor: userActor }),
    );
    expect(runs.map((r) => r.name)).toEqual(['demo.sub_a', 'demo.sub_b']);
    expect(new Set(runs.map((r) => r.runId)).size).toBe(2);
    const rows = await sql`SELECT r.name, r.trigger, r.correlation_id, o.queue, o.envelope
      FROM task_runs r JOIN outbox_messages o USING (run_id) WHERE run_id = ANY(${runs.map((r) => r.runId)}) ORDER BY r.name`;
    expect(rows.map((r) => [r.name, r.trigger, r.queue])).toEqual([
      ['demo.sub_a', 'event', 'critical'],
      ['demo.sub_b', 'event', 'bulk'],
    ]);
    expect(rows[0]!.correlation_id).toBe(rows[1]!.correlation_id);
    expect(rows[0]!.envelope).toMatchObject({ kind: 'event', name: 'demo.sub_a', event: 'demo.happened', version: 1, payload: { who: 'ana' } });
    const actors = await sql`SELECT count(*)::int AS n FROM task_run_user_actors WHERE run_id = ANY(${runs.map((r) => r.runId)})`;
    expect(actors[0]!.n).toBe(2);
    // No subscribers: nothing written.
    expect(await inTx(userActor, (tx) => dispatcher.publishEvent(tx, 'demo.unheard', 1, {}, { actor: userActor }))).toEqual([]);
  });

  it('R-OBX-09 a subscriber refusing the payload refuses the publish before anything is written', async () => {
    const [before] = await sql`SELECT count(*)::int AS n FROM task_runs`;
    const e = await dispatchError(inTx(userActor, (tx) => dispatcher.publishEvent(tx, 'demo.happened', 1, { who: 5 }, { actor: userActor })));
    expect(e.code).toBe('PAYLOAD_INVALID');
    const [after] = await sql`SELECT count(*)::int AS n FROM task_runs`;
    expect(after!.n).toBe(before!.n);
  });
});

describe('dispatchScheduled', () => {
  it('R-RUN-18 R-RUN-19 writes a scheduler run with its origin; the same moment again yields no second run', async () => {
    const moment = new Date('2030-05-01T10:00:00Z');
    const first = await inTx(systemNoTenant, (tx) =>
      dispatcher.dispatchScheduled(tx, 'demo.system_task', {}, { scheduleName: 'demo.system_task', executionId: 'e1', scheduledFor: moment }),
    );
    expect(first).not.toBeNull();
    const [r] = await sql`SELECT r.trigger, r.actor_kind, o.schedule_name, o.execution_id FROM platform_task_runs r
      JOIN platform_task_run_schedule_origins o USING (run_id) WHERE run_id = ${first!.runId}`;
    expect(r).toEqual({ trigger: 'schedule', actor_kind: 'scheduler', schedule_name: 'demo.system_task', execution_id: 'e1' });
    const second = await inTx(systemNoTenant, async (tx) => {
      const again = await dispatcher.dispatchScheduled(tx, 'demo.system_task', {}, { scheduleName: 'demo.system_task', executionId: 'e2', scheduledFor: moment });
      // The transaction stays usable after the refused moment.
      await tx`SELECT 1`;
      return again;
    });
    expect(second).toBeNull();
    const [c] = await sql`SELECT count(*)::int AS n FROM platform_task_run_schedule_origins WHERE scheduled_for = ${moment.toISOString()}`;
    expect(c!.n).toBe(1);
    expect((await dispatchError(inTx(systemNoTenant, (tx) =>
      dispatcher.dispatchScheduled(tx, 'demo.tenant_task', { n: 1 }, { scheduleName: 's', executionId: 'e', scheduledFor: moment })))).code).toBe('RUN_CONTEXT_MISMATCH');
  });
});

describe('wake signal', () => {
  it('R-OBX-10 after commit the dispatcher pushes onto svc:outbox:wake, and never before', async () => {
    await redis.del(OUTBOX_WAKE_KEY);
    let lengthInsideTx = -1;
    await afterCommit(redis, inTx(userActor, async (tx) => {
      await dispatcher.dispatchTask(tx, 'demo.tenant_task', { n: 2 }, { actor: userActor });
      lengthInsideTx = await redis.llen(OUTBOX_WAKE_KEY);
    }));
    expect(lengthInsideTx).toBe(0);
    expect(await redis.llen(OUTBOX_WAKE_KEY)).toBe(1);
    // A failed unit of work sends no signal.
    await expect(afterCommit(redis, inTx(userActor, async () => { throw new Error('boom'); }))).rejects.toThrow('boom');
    expect(await redis.llen(OUTBOX_WAKE_KEY)).toBe(1);
    for (let i = 0; i < 40; i++) await signalOutbox(redis);
    expect(await redis.llen(OUTBOX_WAKE_KEY)).toBe(WAKE_LIST_MAX);
  });

  it('R-OBX-11 a signal to a Redis that is down is dropped without an error', async () => {
    const down = await stoppableRedis('down');
    try {
      expect(await signalOutbox(down.redis)).toBe(true);
      await down.stopServer();
      expect(await signalOutbox(down.redis)).toBe(false);
      expect(await signalOutbox(undefined)).toBe(false);
    } finally {
      await down.close();
    }
  });
});
