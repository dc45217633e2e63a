// Redis only ever confirms what the database says. Two stacks with their own databases sharing one
// Redis logical database, a Redis remembering a result its database lost (a restore, a recreated
// data directory), a held gate left by someone else: in each case the run executes once in its own
// database, and a replay is served only when the database's ledger holds the completed key.
import type { FastifyInstance } from 'fastify';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../src/db/client.ts';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import { buildApp } from '../../src/http/app.ts';
import type { Redis } from '../../src/kv/client.ts';
import { databaseIdentityOf, readDatabaseIdentity } from '../../src/kv/database-identity.ts';
import { runStatusKey } from '../../src/kv/keys.ts';
import { createDispatcher } from '../../src/work/runtime/produce/dispatch.ts';
import { acquireGate, fingerprintOf, gateKeyOf, idempotencyKeyOf } from '../../src/work/runtime/store/idempotency.ts';
import { transitionRun } from '../../src/work/runtime/store/run-store.ts';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import { effectPayload, RUNTIME_UNITS } from '../fixtures/units/runtime-units.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { FakeSessionResolver } from '../support/fake-session-resolver.ts';
import { connectedRedis, freshDatabase, freshRedisUrl, services, type TestDatabase } from '../support/services.ts';
import { createTenant, createTenantMember, workDatabase } from './work-tables-support.ts';

/** A tenant unit keyed by its business key, as a credit would be (`credit:<creditId>`). */
const creditTask = defineTask({
  name: 'fixture.credit',
  queue: 'default',
  context: 'tenant',
  concurrency: 2,
  timeoutSeconds: 5,
  payload: effectPayload,
  idempotencyKey: (p) => `credit:${p.key}`,
  async handler(p, run) {
    await run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`;
    return { key: p.key, attempt: run.attempt, runId: run.runId };
  },
});
const UNITS: ReadonlyMap<string, WorkUnit> = new Map([...RUNTIME_UNITS, [creditTask.name, creditTask]]);

let a: WorkHarness;
let b: WorkHarness;

beforeAll(async () => {
  // One Redis logical database, two stacks each with its own database (cloned from the same template,
  // so their tenant ids repeat, as two clones of the project started with `npm start` do).
  const redisUrl = await freshRedisUrl();
  a = await workHarness({ units: UNITS, redisUrl });
  b = await workHarness({ units: UNITS, redisUrl });
  await a.startWorkers();
  await b.startWorkers();
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

async function ledgerRows(h: WorkHarness, unit: string, source: string) {
  const key = idempotencyKeyOf(unit, source);
  return h.sql<{ status: string; outcome: Record<string, unknown> }[]>`
    SELECT status, outcome FROM idempotency_keys WHERE idempotency_key = ${key}
    UNION ALL SELECT status, outcome FROM platform_idempotency_keys WHERE idempotency_key = ${key}`;
}

describe('the Redis gate is confirmed by the ledger before a replay', () => {
  it('two databases sharing one Redis: the same unit and business key execute in each, each with its own ledger row and effect', async () => {
    const tenantA = await createTenant(a.sql);
    const tenantB = await createTenant(b.sql);
    expect(tenantB).toBe(tenantA); // the same tenant id, unit and business key in both stacks
    // Each database names its own gates, so the stacks never even meet in Redis.
    const key = idempotencyKeyOf('fixture.credit', 'credit:c-1');
    expect(gateKeyOf(await databaseIdentityOf(b.sql), 'tenant', tenantB, key)).not.toBe(gateKeyOf(await databaseIdentityOf(a.sql), 'tenant', tenantA, key));
    const first = await a.dispatch('fixture.credit', { key: 'c-1' }, { kind: 'system', tenantId: tenantA, label: 'test' });
    await a.relay();
    expect((await a.waitForStatus(first.runId, ['succeeded', 'failed'])).status).toBe('succeeded');

    const second = await b.dispatch('fixture.credit', { key: 'c-1' }, { kind: 'system', tenantId: tenantB, label: 'test' });
    await b.relay();
    const run = await b.waitForStatus(second.runId, ['succeeded', 'failed']);
    expect(run.status).toBe('succeeded');
    expect(run.attempts).toBe(1);
    expect(run.outcome).toEqual({ key: 'c-1', attempt: 1, runId: second.runId }); // its own outcome, not database A's
    const trail = await b.waitForEvent(second.runId, 'succeeded');
    expect(events(trail)).toContain('started');
    expect(trail.some((t) => t.detail.replay === 'gate' || t.detail.replayed === true)).toBe(false);
    expect(await b.effects('c-1')).toBe(1);
    expect(await a.effects('c-1')).toBe(1);
    expect(await ledgerRows(b, 'fixture.credit', 'credit:c-1')).toMatchObject([{ status: 'completed', outcome: { runId: second.runId } }]);
    expect(await ledgerRows(a, 'fixture.credit', 'credit:c-1')).toMatchObject([{ status: 'completed', outcome: { runId: first.runId } }]);

    // The gate now holds B's result; a replay in A is still A's own, from A's ledger.
    const third = await a.dispatch('fixture.credit', { key: 'c-1' }, { kind: 'system', tenantId: tenantA, label: 'test' });
    await a.relay();
    const replayed = await a.waitForStatus(third.runId, ['succeeded', 'failed']);
    expect(replayed).toMatchObject({ status: 'succeeded', attempts: 0, outcome: { runId: first.runId } });
    expect(await a.effects('c-1')).toBe(1);
  });

  it('a completed gate whose ledger row the database does not have (a fresh database) does not replay: the run executes once', async () => {
    const key = idempotencyKeyOf('fixture.business_key', 'order:forgotten');
    // What Redis kept from a database that was since recreated: same key, same payload, a result.
    await b.redis!.set(gateKeyOf(await databaseIdentityOf(b.sql), 'platform', null, key), JSON.stringify({ s: 'c', f: fingerprintOf({ key: 'forgotten' }).toString('hex'), o: { from: 'elsewhere' } }), 'PX', 60_000);
    const { runId } = await b.dispatch('fixture.business_key', { key: 'forgotten' });
    await b.relay();
    const run = await b.waitForStatus(runId, ['succeeded', 'failed']);
    expect(run).toMatchObject({ status: 'succeeded', attempts: 1, outcome: { key: 'forgotten', attempt: 1 } });
    expect(await b.effects('forgotten')).toBe(1);
    expect(await ledgerRows(b, 'fixture.business_key', 'order:forgotten')).toMatchObject([{ status: 'completed', outcome: { key: 'forgotten' } }]);
  });

  it('a completed gate whose ledger row and effect the database lost (restored from a backup) does not replay: the run executes once', async () => {
    const first = await b.dispatch('fixture.business_key', { key: 'restored' });
    await b.relay();
    await b.waitForStatus(first.runId, ['succeeded']);
    const key = idempotencyKeyOf('fixture.business_key', 'order:restored');
    // The backup predates that execution: neither its ledger row nor its effect is in the database.
    await b.sql`DELETE FROM platform_idempotency_keys WHERE idempotency_key = ${key}`;
    await b.sql`DELETE FROM fixture_effects WHERE key = 'restored'`;
    expect(JSON.parse((await b.redis!.get(gateKeyOf(await databaseIdentityOf(b.sql), 'platform', null, key)))!)).toMatchObject({ s: 'c' });

    const second = await b.dispatch('fixture.business_key', { key: 'restored' });
    await b.relay();
    const run = await b.waitForStatus(second.runId, ['succeeded', 'failed']);
    expect(run).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(events(await b.waitForEvent(second.runId, 'succeeded'))).toContain('started');
    expect(await b.effects('restored')).toBe(1);
    expect(await ledgerRows(b, 'fixture.business_key', 'order:restored')).toMatchObject([{ status: 'completed' }]);
  });

  it('a business key reused with another payload still fails from the gate when the ledger confirms the other payload', async () => {
    const first = await b.dispatch('fixture.business_key', { key: 'reused' });
    await b.relay();
    await b.waitForStatus(first.runId, ['succeeded']);
    const second = await b.dispatch('fixture.business_key', { key: 'reused', sleepMs: 0 });
    await b.relay();
    const run = await b.waitForStatus(second.runId, ['succeeded', 'failed']);
    expect(run).toMatchObject({ status: 'failed', attempts: 0 });
    expect((await b.waitForEvent(second.runId, 'failed')).find((t) => t.event === 'failed')?.error_code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(await b.effects('reused')).toBe(1);
  });

  it('a held gate of someone else delays no run, and a gate is always taken with an expiry', async () => {
    const key = idempotencyKeyOf('fixture.business_key', 'order:held');
    const gateKey = gateKeyOf(await databaseIdentityOf(b.sql), 'platform', null, key);
    // Left by a holder that is gone (or by another stack), with a lease far longer than this test.
    await b.redis!.set(gateKey, JSON.stringify({ s: 'p', t: 'gone' }), 'PX', 600_000);
    const { runId } = await b.dispatch('fixture.business_key', { key: 'held' });
    await b.relay();
    const run = await b.waitForStatus(runId, ['succeeded', 'failed'], 10_000);
    expect(run).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(await b.effects('held')).toBe(1);

    const fresh = gateKeyOf(await databaseIdentityOf(b.sql), 'platform', null, idempotencyKeyOf('fixture.business_key', 'order:expiring'));
    expect(await acquireGate(b.redis, fresh, 'token', 2_500)).toMatchObject({ state: 'acquired' });
    const pttl = await b.redis!.pttl(fresh);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(2_500);
  });
});

describe('the run-status cache of the HTTP API', () => {
  let source: TestDatabase;
  let clone: TestDatabase;
  let sqlSource: Sql;
  let redis: Redis;
  const apps: FastifyInstance[] = [];

  afterAll(async () => {
    for (const app of apps) await app.close();
    redis?.disconnect();
    await sqlSource?.end({ timeout: 5 });
    await clone?.drop();
    await source?.drop();
  });

  it('never shows one database’s cached status for the same run id in another database sharing the Redis', async () => {
    // A database and a copy of it (a clone, a restore elsewhere): the same run id and tenant in both.
    source = await workDatabase();
    const member = await createTenantMember(source.sql);
    const unit = RUNTIME_UNITS.get('fixture.tenant_effect')!;
    const dispatcher = createDispatcher({ resolve: (name) => (name === unit.name ? { name, queue: unit.queue, context: unit.context, payload: unit.payload } : undefined), instance: 'test' });
    const actor = { kind: 'system' as const, tenantId: member.tenantId, label: 'test' };
    const { runId } = await inUnitOfWork(source.sql, actor, (tx) => dispatcher.dispatchTask(tx, unit.name, { key: 'status' }, { actor }));
    await source.sql.end({ timeout: 5 });
    clone = await freshDatabase({ template: source.name });
    sqlSource = createSql(source.url, { max: 3 });
    // The copy moves on: its run is running; the source's is still queued.
    await inUnitOfWork(clone.sql, actor, (tx) => transitionRun(tx, 'tenant', { runId, tenantId: member.tenantId, to: 'running', from: ['queued'] }));

    redis = await connectedRedis(await freshRedisUrl(), { name: 'run-status-test' });
    const resolver = new FakeSessionResolver().add('token', member);
    for (const sql of [sqlSource, clone.sql]) {
      const app = await buildApp({
        sql,
        redis,
        resolver,
        catalog: { version: 1, tasks: [], subscriptions: [] },
        latestMigration: 'test',
        config: { corsOrigins: [], corsCredentials: false },
        logger: false,
      });
      await app.ready();
      apps.push(app);
    }
    const statusFrom = async (app: FastifyInstance) => {
      const res = await app.inject({ method: 'GET', url: `/task-runs/${runId}`, headers: { authorization: 'Bearer token' } });
      expect(res.statusCode).toBe(200);
      return res.json<{ data: { status: string } }>().data.status;
    };
    expect(await statusFrom(apps[0]!)).toBe('queued');
    expect(await redis.exists(runStatusKey(runId))).toBe(1); // cached by the source's API
    expect(await statusFrom(apps[1]!)).toBe('running');
    // Each API keeps serving its own database's status, from the cache or not.
    expect(await statusFrom(apps[0]!)).toBe('queued');
    expect(await statusFrom(apps[1]!)).toBe('running');
  });
});

describe('the database identity', () => {
  it('is read without EXECUTE on pg_control_system() too, and tells two databases of one cluster apart', async () => {
    const one = await workDatabase();
    const two = await workDatabase();
    const role = `ident_${randomBytes(4).toString('hex')}`;
    const password = randomBytes(12).toString('hex');
    let restricted: Sql | undefined;
    try {
      // An operator who revoked the function from PUBLIC (in this database only: pg_proc is per database).
      await one.sql.unsafe(`REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC`);
      await one.sql.unsafe(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
      await one.sql.unsafe(`GRANT CONNECT ON DATABASE ${one.name} TO ${role}`);
      const url = new URL(one.url);
      url.username = role;
      url.password = password;
      restricted = createSql(url.toString(), { max: 1 });
      const [denied] = await restricted<{ allowed: boolean }[]>`SELECT has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE') AS allowed`;
      expect(denied!.allowed).toBe(false);
      const fallback = await readDatabaseIdentity(restricted);
      expect(fallback).toMatch(/^[0-9a-f]{16}$/);
      expect(await readDatabaseIdentity(restricted)).toBe(fallback);
      const [privileged, other] = [await readDatabaseIdentity(one.sql), await readDatabaseIdentity(two.sql)];
      expect(privileged).toMatch(/^[0-9a-f]{16}$/);
      expect(other).not.toBe(privileged);
      // Memoized per pool: one read, the same answer.
      expect(await databaseIdentityOf(two.sql)).toBe(other);
    } finally {
      await restricted?.end({ timeout: 5 });
      await one.drop();
      await two.drop();
      // A role belongs to the cluster: dropped once its database (and the grant there) is gone.
      const admin = createSql(services().pgAdminUrl, { max: 1 });
      await admin.unsafe(`DROP ROLE IF EXISTS ${role}`).finally(() => admin.end({ timeout: 5 }));
    }
  });
});
