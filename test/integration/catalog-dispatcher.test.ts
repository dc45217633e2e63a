// The API's dispatcher resolves tasks and event subscribers from tasks.json, without importing unit
// code: a subscriber whose unit file does not even exist here still gets its run and outbox row. It is
// the dispatcher buildApp hands to the use cases (`app.dispatcher`).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/app.ts';
import { inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
import { loadCatalog, writeCatalog, type Catalog } from '../../src/work/catalog.ts';
import { DispatchError } from '../../src/work/runtime/produce/dispatch.ts';
import { payloadJsonSchema } from '../../src/work/define/payload-schema.ts';
import { loginNotificationEmail } from '../../units/identity/login-notification-email.handler.ts';
import { FakeSessionResolver } from '../support/fake-session-resolver.ts';
import { refusal } from '../support/refusal.ts';
import { connectedRedis, freshDatabase, freshRedisUrl, type TestDatabase } from '../support/services.ts';
import { createTenantMember, memberActor } from './work-tables-support.ts';

const entry = { concurrency: 1, timeoutSeconds: 30 };
// As `svc tasks emit` writes it; `file` paths under units/nowhere/ do not exist: importing them would fail.
const CATALOG: Catalog = {
  version: 1,
  tasks: [
    { name: 'reports.build', queue: 'bulk', context: 'tenant', schedule: null, overlap: null, file: 'units/nowhere/build.task.ts', ...entry,
      payloadSchema: { type: 'object', properties: { month: { type: 'string', pattern: '^[0-9]{4}-[0-9]{2}$' } }, required: ['month'], additionalProperties: false } },
  ],
  subscriptions: [
    // As tasks:emit writes it: the unit's payload as JSON Schema (the test imports the unit only to build it).
    { name: 'identity.login_notification_email', event: { type: 'identity.session_started', version: 1 }, queue: 'critical', context: 'tenant', file: 'units/identity/login-notification-email.handler.ts', payloadSchema: payloadJsonSchema(loginNotificationEmail.payload), ...entry },
    { name: 'audit.session_log', event: { type: 'identity.session_started', version: 1 }, queue: 'default', context: 'tenant', file: 'units/nowhere/session-log.handler.ts', ...entry },
    { name: 'audit.session_log_v2', event: { type: 'identity.session_started', version: 2 }, queue: 'bulk', context: 'tenant', file: 'units/nowhere/session-log-v2.handler.ts', ...entry },
  ],
};

let db: TestDatabase;
let redis: Redis;
let app: FastifyInstance;
let actor: Actor;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-dispatcher-'));

beforeAll(async () => {
  db = await freshDatabase();
  redis = await connectedRedis(await freshRedisUrl(), { name: 'catalog-dispatcher-test' });
  const member = await createTenantMember(db.sql);
  actor = memberActor(member);
  const file = path.join(tmp, 'tasks.json');
  writeCatalog(file, CATALOG);
  app = await buildApp({
    sql: db.sql,
    redis,
    resolver: new FakeSessionResolver(),
    catalog: loadCatalog(file),
    latestMigration: 'test',
    config: { corsOrigins: [], corsCredentials: false },
    logger: false,
  });
  await app.ready();
});
afterAll(async () => {
  await app?.close();
  redis?.disconnect();
  await db?.drop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const payload = { userId: '1', email: 'ana@example.com', occurredAt: '2030-01-01T00:00:00Z' };

describe('catalogDispatcher as app.dispatcher', () => {
  it('R-UNT-14 R-OBX-09 R-OBX-06 publishing identity.session_started v1 writes one queued run and outbox row per catalog subscriber', async () => {
    const runs = await inUnitOfWork(db.sql, actor, (tx) => app.dispatcher.publishEvent(tx, 'identity.session_started', 1, payload, { actor }));
    expect(runs.map((r) => r.name)).toEqual(['audit.session_log', 'identity.login_notification_email']);
    const ids = runs.map((r) => r.runId);
    expect(new Set(ids).size).toBe(2);
    const rows = await db.sql`SELECT r.name, r.status, r.trigger, o.queue, o.envelope
      FROM task_runs r JOIN outbox_messages o USING (run_id) WHERE run_id = ANY(${ids}) ORDER BY r.name`;
    expect(rows.map((r) => [r.name, r.status, r.trigger, r.queue])).toEqual([
      ['audit.session_log', 'queued', 'event', 'default'],
      ['identity.login_notification_email', 'queued', 'event', 'critical'],
    ]);
    for (const r of rows) {
      expect(r.envelope).toMatchObject({ kind: 'event', name: r.name, event: 'identity.session_started', version: 1, payload });
    }
    const [outbox] = await db.sql`SELECT count(*)::int AS n FROM outbox_messages`;
    expect(outbox!.n).toBe(2);
    // The version is part of the subscription: v2 reaches only its own subscriber.
    const v2 = await inUnitOfWork(db.sql, actor, (tx) => app.dispatcher.publishEvent(tx, 'identity.session_started', 2, payload, { actor }));
    expect(v2.map((r) => [r.name, r.queue])).toEqual([['audit.session_log_v2', 'bulk']]);
    // An event nobody subscribes to writes nothing.
    expect(await inUnitOfWork(db.sql, actor, (tx) => app.dispatcher.publishEvent(tx, 'identity.session_ended', 1, payload, { actor }))).toEqual([]);
  });

  it('R-UNT-14 a catalog task dispatches; an unknown name (or a subscriber name) is refused with UNIT_NOT_REGISTERED, writing nothing', async () => {
    const run = await inUnitOfWork(db.sql, actor, (tx) => app.dispatcher.dispatchTask(tx, 'reports.build', { month: '2030-01' }, { actor }));
    const [row] = await db.sql`SELECT name, queue, status FROM task_runs WHERE run_id = ${run.runId}`;
    expect(row).toEqual({ name: 'reports.build', queue: 'bulk', status: 'queued' });
    const [before] = await db.sql`SELECT count(*)::int AS n FROM task_runs`;
    for (const name of ['reports.missing', 'identity.login_notification_email']) {
      const error = await refusal(inUnitOfWork(db.sql, actor, (tx) => app.dispatcher.dispatchTask(tx, name, {}, { actor })));
      expect(error).toBeInstanceOf(DispatchError);
      expect((error as DispatchError).code).toBe('UNIT_NOT_REGISTERED');
    }
    const [after] = await db.sql`SELECT count(*)::int AS n FROM task_runs`;
    expect(after!.n).toBe(before!.n);
  });

  it('R-UNT-14 R-OBX-08 at the API payloads are checked at catalog level: size and context', async () => {
    const big = await refusal(inUnitOfWork(db.sql, actor, (tx) =>
      app.dispatcher.publishEvent(tx, 'identity.session_started', 1, { blob: 'x'.repeat(65_536) } /* over the documented 64 KiB */, { actor })));
    expect((big as DispatchError).code).toBe('PAYLOAD_TOO_LARGE');
    const system: Actor = { kind: 'system', label: 'test' };
    const mismatch = await refusal(inUnitOfWork(db.sql, system, (tx) => app.dispatcher.publishEvent(tx, 'identity.session_started', 1, payload, { actor: system })));
    expect((mismatch as DispatchError).code).toBe('RUN_CONTEXT_MISMATCH');
  });

  it('R-UNT-14 the API refuses a payload against the catalog payloadSchema with PAYLOAD_INVALID naming unit, field and rule, writing nothing', async () => {
    const counts = async () => {
      const [r] = await db.sql`SELECT (SELECT count(*) FROM task_runs)::int AS runs, (SELECT count(*) FROM task_run_events)::int AS events,
        (SELECT count(*) FROM outbox_messages)::int AS outbox, (SELECT count(*) FROM task_run_user_actors)::int AS actors`;
      return r;
    };
    const before = await counts();
    // One subscriber (audit.session_log) has no schema in this catalog; the other's refusal stops both.
    const bad = await refusal(inUnitOfWork(db.sql, actor, (tx) =>
      app.dispatcher.publishEvent(tx, 'identity.session_started', 1, { ...payload, email: 'not-an-email', occurredAt: undefined }, { actor })));
    expect(bad).toBeInstanceOf(DispatchError);
    expect((bad as DispatchError).code).toBe('PAYLOAD_INVALID');
    expect((bad as DispatchError).message).toContain('identity.login_notification_email');
    expect((bad as DispatchError).details).toMatchObject({ unit: 'identity.login_notification_email' });
    const issues = (bad as DispatchError).details.issues as Array<{ path: string; rule: string }>;
    expect(issues.map((i) => i.path).sort()).toEqual(['email', 'occurredAt']);
    expect(issues.find((i) => i.path === 'occurredAt')!.rule).toBe('is required');
    // The message names fields and rules, never the payload's values.
    expect((bad as DispatchError).message).not.toContain('not-an-email');
    // A task: wrong type and an unknown field.
    const task = await refusal(inUnitOfWork(db.sql, actor, (tx) => app.dispatcher.dispatchTask(tx, 'reports.build', { month: 202001, extra: true }, { actor })));
    expect((task as DispatchError).code).toBe('PAYLOAD_INVALID');
    expect(((task as DispatchError).details.issues as Array<{ path: string }>).map((i) => i.path).sort()).toEqual(['extra', 'month']);
    // Bulk through the API: all or nothing, each bad index named.
    const many = await refusal(inUnitOfWork(db.sql, actor, (tx) =>
      app.dispatcher.dispatchMany(tx, 'reports.build', [{ month: '2030-01' }, { month: 'x' }, { month: '2030-02' }, {}], { actor })));
    expect((many as DispatchError).code).toBe('PAYLOAD_INVALID');
    expect(((many as DispatchError).details.invalid as Array<{ index: number }>).map((b) => b.index)).toEqual([1, 3]);
    expect(await counts()).toEqual(before);
    // A good payload through the same path is written.
    const runs = await inUnitOfWork(db.sql, actor, (tx) => app.dispatcher.publishEvent(tx, 'identity.session_started', 1, payload, { actor }));
    expect(runs).toHaveLength(2);
  });
});
