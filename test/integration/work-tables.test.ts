// Database rules of the ten infrastructure tables (sql/idempotency/0015_idempotency.sql, sql/work/0016_work.sql).
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../support/services.ts';
import { refusal } from '../support/refusal.ts';
import type { Sql } from '../../src/db/client.ts';
import { createTenant, createTenantMember, workDatabase, type TenantMember } from './work-tables-support.ts';

let db: TestDatabase;
let sql: Sql;
let member: TenantMember;
let otherMember: TenantMember;

beforeAll(async () => {
  db = await workDatabase();
  sql = db.sql;
  member = await createTenantMember(sql);
  otherMember = await createTenantMember(sql);
});
afterAll(async () => db?.drop());

const key32 = () => randomBytes(32);

interface RunValues {
  run_id?: string;
  tenant_id?: string;
  name?: string;
  queue?: string;
  trigger?: string;
  actor_kind?: string;
  actor_label?: string;
  status?: string;
  attempts?: number;
  progress?: number;
  outcome?: unknown;
  finished_at?: string | null;
}

/** The columns tenant and platform runs share, with defaults for a queued system run. */
function runRow(q: Sql, values: RunValues, defaults: { name: string; queue: string }) {
  return {
    run_id: values.run_id ?? randomUUID(),
    name: values.name ?? defaults.name,
    queue: values.queue ?? defaults.queue,
    trigger: values.trigger ?? 'dispatch',
    actor_kind: values.actor_kind ?? 'system',
    actor_label: values.actor_label ?? 'test',
    correlation_id: randomUUID(),
    causation_id: randomUUID(),
    status: values.status ?? 'queued',
    outcome: q.json((values.outcome ?? {}) as never),
    ...(values.finished_at !== undefined ? { finished_at: values.finished_at } : {}),
  };
}

/** Inserts a system run of the member's tenant (no actor row needed); returns its run_id. */
async function insertRun(q: Sql, values: RunValues = {}): Promise<string> {
  const row = {
    ...runRow(q, values, { name: 'demo.task', queue: 'default' }),
    tenant_id: values.tenant_id ?? member.tenantId,
    attempts: values.attempts ?? 0,
    progress: values.progress ?? 0,
  };
  await q`INSERT INTO task_runs ${q(row)}`;
  return row.run_id;
}

async function insertPlatformRun(q: Sql, values: RunValues = {}): Promise<string> {
  const row = {
    ...runRow(q, values, { name: 'maintenance.purge', queue: 'maintenance' }),
    ...(values.attempts !== undefined ? { attempts: values.attempts } : {}),
    ...(values.progress !== undefined ? { progress: values.progress } : {}),
  };
  await q`INSERT INTO platform_task_runs ${q(row)}`;
  return row.run_id;
}

async function insertEvent(q: Sql, runId: string, values: Record<string, unknown> = {}) {
  await q`INSERT INTO task_run_events ${q({
    run_id: runId,
    tenant_id: member.tenantId,
    event: 'queued',
    attempt: 0,
    queue: 'default',
    worker_instance: 'test-1',
    ...values,
  } as never)}`;
}

describe('infrastructure figures', () => {
  // Only figures the spec gives or implies for these ten tables; the whole-database counts (92 CHECK,
  // 87 UNIQUE, ...) are pinned in schema-counts.test.ts, the spec does not split them per table group.
  const tables = [
    'idempotency_keys', 'platform_idempotency_keys', 'outbox_messages', 'platform_outbox_messages', 'task_runs',
    'task_run_user_actors', 'task_run_events', 'platform_task_runs', 'platform_task_run_schedule_origins',
    'platform_task_run_events',
  ];

  it('R-DB-02 R-DB-03 the ten infrastructure tables hold 175 - 166 = 9 foreign keys, plain, and none of the 4 EXCLUDE', async () => {
    const [c] = await sql`
      SELECT count(*) FILTER (WHERE contype = 'f')::int AS fks,
             count(*) FILTER (WHERE contype = 'x')::int AS excludes,
             count(*) FILTER (WHERE contype = 'f' AND (condeferrable OR confdeltype <> 'a' OR confupdtype <> 'a'))::int AS odd_fks
        FROM pg_constraint WHERE conrelid::regclass::text = ANY(${tables})`;
    // 175 foreign keys of which 166 on domain tables (R-DB-02); the 4 EXCLUDE are the domain ones (R-EXC-02..05).
    expect(c).toEqual({ fks: 175 - 166, excludes: 0, odd_fks: 0 });
  });

  it('R-DB-03 R-RUN-12 R-RUN-18 the 2 deferred constraint triggers are the run actor and schedule origin checks', async () => {
    const rows = await sql`
      SELECT tgrelid::regclass::text AS table_name FROM pg_trigger
       WHERE NOT tgisinternal AND tgconstraint <> 0 AND tgdeferrable AND tginitdeferred ORDER BY 1`;
    expect(rows.map((r) => r.table_name)).toEqual(['platform_task_runs', 'task_runs']);
  });

  it('R-DB-09 R-DB-11 R-IDM-01 R-OBX-01 R-TRL-01 R-TRL-07 ledgers, outboxes and trails have identity ids; run tables a uuid run_id', async () => {
    const identity = await sql`
      SELECT table_name FROM information_schema.columns
       WHERE table_schema = 'public' AND table_name = ANY(${tables}) AND is_identity = 'YES' AND identity_generation = 'ALWAYS'
         AND column_name = 'id' AND data_type = 'bigint' ORDER BY 1`;
    expect(identity.map((r) => r.table_name)).toEqual([
      'idempotency_keys', 'outbox_messages', 'platform_idempotency_keys', 'platform_outbox_messages',
      'platform_task_run_events', 'task_run_events',
    ]);
    const runKeys = await sql`
      SELECT c.relname AS table_name, a.attname AS column_name, format_type(a.atttypid, a.atttypmod) AS type
        FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
       WHERE i.indisprimary AND c.relname IN ('task_runs', 'platform_task_runs') ORDER BY 1`;
    expect(runKeys.map((r) => [r.table_name, r.column_name, r.type])).toEqual([
      ['platform_task_runs', 'run_id', 'uuid'],
      ['task_runs', 'run_id', 'uuid'],
    ]);
  });

  it('R-DB-06 every instant with a default uses clock_timestamp(), the spec-named ones included', async () => {
    const rows = await sql`
      SELECT table_name || '.' || column_name AS col, column_default FROM information_schema.columns
       WHERE table_schema = 'public' AND data_type = 'timestamp with time zone' AND column_default IS NOT NULL
         AND table_name = ANY(${tables})`;
    for (const r of rows) expect(r.column_default, r.col).toBe('clock_timestamp()');
    expect(rows.map((r) => r.col)).toEqual(expect.arrayContaining([
      'idempotency_keys.created_at', 'idempotency_keys.updated_at', // R-IDM-06
      'platform_idempotency_keys.created_at', 'platform_idempotency_keys.updated_at',
      'outbox_messages.created_at', 'platform_outbox_messages.created_at', // R-OBX-04
      'task_runs.queued_at', 'task_runs.updated_at', // R-RUN-10
      'platform_task_runs.queued_at', 'platform_task_runs.updated_at', // R-RUN-16
      'task_run_events.occurred_at', 'platform_task_run_events.occurred_at', // R-TRL-05, R-TRL-07
    ]));
  });

  // PostgreSQL prepares a table's CHECK constraints from their stored form once per writing statement:
  // a list written as ARRAY['a'::text, ...] is a node per value, read back and folded into one array
  // each time (sql/work/0027_check-literals.sql). Every list is one array constant, validated.
  it('R-IDM-04 R-OBX-02 R-RUN-04 R-RUN-05 R-RUN-07 R-RUN-10 R-RUN-16 R-TRL-03 R-TRL-07 the work tables check their value lists against one array constant', async () => {
    const rows = await sql<{ name: string; def: string; validated: boolean }[]>`
      SELECT conname AS name, pg_get_constraintdef(oid) AS def, convalidated AS validated FROM pg_constraint
       WHERE contype = 'c' AND conrelid = ANY(${tables}::regclass[]) AND pg_get_constraintdef(oid) LIKE '%= ANY%' ORDER BY conname`;
    const queues = "'{critical,default,bulk,maintenance}'::text[]";
    const statuses = "'{queued,running,retrying,succeeded,failed,skipped}'::text[]";
    const events = "'{queued,sent,received,started,progress,retry_scheduled,succeeded,failed,skipped,dead_lettered,released_on_shutdown,redriven}'::text[]";
    const ledger = "'{processing,completed,failed_retryable,failed_permanent}'::text[]";
    const finished = `CHECK (((status = ANY ('{succeeded,failed,skipped}'::text[])) = (finished_at IS NOT NULL)))`;
    expect(Object.fromEntries(rows.map((r) => [r.name, r.validated ? r.def : `NOT VALIDATED ${r.def}`]))).toEqual({
      idempotency_keys_status_known: `CHECK ((status = ANY (${ledger})))`,
      outbox_messages_queue_known: `CHECK ((queue = ANY (${queues})))`,
      platform_idempotency_keys_status_known: `CHECK ((status = ANY (${ledger})))`,
      platform_outbox_messages_queue_known: `CHECK ((queue = ANY (${queues})))`,
      platform_task_run_events_event_known: `CHECK ((event = ANY (${events})))`,
      platform_task_runs_actor_kind_known: "CHECK ((actor_kind = ANY ('{system,scheduler}'::text[])))",
      platform_task_runs_finished_at_iff_final: finished,
      platform_task_runs_queue_known: `CHECK ((queue = ANY (${queues})))`,
      platform_task_runs_status_known: `CHECK ((status = ANY (${statuses})))`,
      platform_task_runs_trigger_known: "CHECK ((trigger = ANY ('{dispatch,event,redrive,schedule}'::text[])))",
      task_run_events_event_known: `CHECK ((event = ANY (${events})))`,
      task_runs_actor_kind_known: "CHECK ((actor_kind = ANY ('{user,system}'::text[])))",
      task_runs_finished_at_iff_final: finished,
      task_runs_queue_known: `CHECK ((queue = ANY (${queues})))`,
      task_runs_status_known: `CHECK ((status = ANY (${statuses})))`,
      task_runs_trigger_known: "CHECK ((trigger = ANY ('{dispatch,event,redrive}'::text[])))",
    });
  });
});

describe('idempotency ledgers', () => {
  const ledger = (tenantId: string | null, values: Record<string, unknown> = {}) => ({
    ...(tenantId === null ? {} : { tenant_id: tenantId }),
    idempotency_key: key32(),
    request_fingerprint: key32(),
    expires_at: new Date(Date.now() + 60_000),
    ...values,
  });
  async function insertLedger(table: 'idempotency_keys' | 'platform_idempotency_keys', values: Record<string, unknown> = {}) {
    const row = ledger(table === 'idempotency_keys' ? member.tenantId : null, values);
    return sql`INSERT INTO ${sql(table)} ${sql(row as never)} RETURNING *`;
  }

  for (const table of ['idempotency_keys', 'platform_idempotency_keys'] as const) {
    it(`R-IDM-01 ${table} has a database-generated identity id and refuses a supplied one`, async () => {
      const [a] = await insertLedger(table);
      const [b] = await insertLedger(table);
      expect(BigInt(b!.id)).toBeGreaterThan(BigInt(a!.id));
      const e = await refusal(insertLedger(table, { id: 999 }));
      expect(e.code).toBe('428C9');
    });

    it(`R-IDM-03 ${table} key and fingerprint are exactly 32 bytes`, async () => {
      for (const n of [0, 31, 33, 64]) {
        expect((await refusal(insertLedger(table, { idempotency_key: randomBytes(n) }))).constraint_name).toBe(
          `${table}_key_is_32_bytes`,
        );
        expect((await refusal(insertLedger(table, { request_fingerprint: randomBytes(n) }))).constraint_name).toBe(
          `${table}_fingerprint_is_32_bytes`,
        );
      }
    });

    it(`R-IDM-04 ${table} status defaults to processing, attempt to 1, and both are checked`, async () => {
      const [row] = await insertLedger(table);
      expect(row!.status).toBe('processing');
      expect(row!.attempt).toBe(1);
      for (const status of ['completed', 'failed_retryable', 'failed_permanent']) {
        await insertLedger(table, { status });
      }
      expect((await refusal(insertLedger(table, { status: 'done' }))).constraint_name).toBe(`${table}_status_known`);
      expect((await refusal(insertLedger(table, { attempt: 0 }))).constraint_name).toBe(`${table}_attempt_positive`);
    });

    it(`R-IDM-05 ${table} outcome is an object of at most 4096 bytes and empty while processing`, async () => {
      const big = (n: number) => ({ s: 'x'.repeat(n - 9) }); // {"s": "..."} is 9 bytes of framing
      expect(JSON.stringify(big(4096)).length + 1).toBe(4096); // jsonb text adds a space after the colon
      await insertLedger(table, { status: 'completed', outcome: sql.json(big(4096)) });
      expect(
        (await refusal(insertLedger(table, { status: 'completed', outcome: sql.json(big(4097)) }))).constraint_name,
      ).toBe(`${table}_outcome_object_max_4096_bytes`);
      for (const bad of [[1], 'text', 3, null]) {
        const e = await refusal(insertLedger(table, { status: 'completed', outcome: sql.json(bad) }));
        expect(e.code === '23514' || e.code === '23502').toBe(true);
      }
      expect(
        (await refusal(insertLedger(table, { outcome: sql.json({ a: 1 }) }))).constraint_name,
      ).toBe(`${table}_outcome_empty_while_processing`);
      const [row] = await insertLedger(table);
      const e = await refusal(sql`UPDATE ${sql(table)} SET outcome = '{"a":1}' WHERE id = ${row!.id}`);
      expect(e.constraint_name).toBe(`${table}_outcome_empty_while_processing`);
      await sql`UPDATE ${sql(table)} SET status = 'completed', outcome = '{"a":1}' WHERE id = ${row!.id}`;
    });

    it(`R-IDM-06 ${table} created_at/updated_at come from the database clock and expires_at is required`, async () => {
      const rows = await sql.begin(async (tx) => {
        await tx`SELECT pg_sleep(0.01)`;
        const r1 = await tx`INSERT INTO ${tx(table)} ${tx(
          ledger(table === 'idempotency_keys' ? member.tenantId : null, { expires_at: new Date(Date.now() + 60_000) }) as never,
        )} RETURNING created_at, updated_at, now() AS tx_start, clock_timestamp() AS after`;
        return r1;
      });
      // clock_timestamp(), not the transaction start (the transaction slept 10 ms before the insert).
      const [r] = rows;
      for (const column of ['created_at', 'updated_at'] as const) {
        expect(r![column], column).toBeInstanceOf(Date);
        expect(r![column].getTime(), column).toBeGreaterThanOrEqual(r!.tx_start.getTime() + 10);
        expect(r![column].getTime(), column).toBeLessThanOrEqual(r!.after.getTime());
      }
      const e = await refusal(insertLedger(table, { expires_at: null }));
      expect(e.code).toBe('23502');
    });
  }

  it('R-IDM-02 tenant_id exists only in idempotency_keys, references tenants and accepts no sentinel tenant 0', async () => {
    const cols = await sql`SELECT table_name FROM information_schema.columns
      WHERE column_name = 'tenant_id' AND table_name IN ('idempotency_keys', 'platform_idempotency_keys')`;
    expect(cols.map((c) => c.table_name)).toEqual(['idempotency_keys']);
    const e = await refusal(sql`INSERT INTO idempotency_keys (tenant_id, idempotency_key, request_fingerprint, expires_at)
      VALUES (0, ${key32()}, ${key32()}, clock_timestamp())`);
    expect(e.constraint_name).toBe('idempotency_keys_tenant_fk');
    const n = await refusal(sql`INSERT INTO idempotency_keys (idempotency_key, request_fingerprint, expires_at)
      VALUES (${key32()}, ${key32()}, clock_timestamp())`);
    expect(n.code).toBe('23502');
  });

  it('R-IDM-07 R-IDM-08 uniqueness is per tenant in idempotency_keys and global in platform_idempotency_keys', async () => {
    const k = key32();
    const claim = (tenantId: string) => sql`INSERT INTO idempotency_keys (tenant_id, idempotency_key, request_fingerprint, expires_at)
      VALUES (${tenantId}, ${k}, ${key32()}, clock_timestamp()) ON CONFLICT DO NOTHING RETURNING id`;
    expect((await claim(member.tenantId)).length).toBe(1);
    expect((await claim(member.tenantId)).length).toBe(0);
    expect((await claim(otherMember.tenantId)).length).toBe(1);
    const p = key32();
    await sql`INSERT INTO platform_idempotency_keys (idempotency_key, request_fingerprint, expires_at) VALUES (${p}, ${key32()}, clock_timestamp())`;
    const e = await refusal(sql`INSERT INTO platform_idempotency_keys (idempotency_key, request_fingerprint, expires_at)
      VALUES (${p}, ${key32()}, clock_timestamp())`);
    expect(e.constraint_name).toBe('platform_idempotency_keys_key_unique');
  });
});

describe('outboxes', () => {
  for (const table of ['outbox_messages', 'platform_outbox_messages'] as const) {
    const row = (values: Record<string, unknown> = {}) => ({
      ...(table === 'outbox_messages' ? { tenant_id: member.tenantId } : {}),
      run_id: randomUUID(),
      queue: 'default',
      envelope: sql.json({ run_id: 'x' }),
      ...values,
    });

    it(`R-OBX-01 ${table} has a database-generated identity id`, async () => {
      const [a] = await sql`INSERT INTO ${sql(table)} ${sql(row() as never)} RETURNING id`;
      expect(Number(a!.id)).toBeGreaterThan(0);
      const e = await refusal(sql`INSERT INTO ${sql(table)} ${sql(row({ id: 77 }) as never)}`);
      expect(e.code).toBe('428C9');
    });

    it(`R-OBX-02 ${table} run_id is unique, queue one of the four, envelope an object`, async () => {
      const runId = randomUUID();
      await sql`INSERT INTO ${sql(table)} ${sql(row({ run_id: runId }) as never)}`;
      expect((await refusal(sql`INSERT INTO ${sql(table)} ${sql(row({ run_id: runId }) as never)}`)).constraint_name).toBe(
        `${table}_run_unique`,
      );
      for (const queue of ['critical', 'default', 'bulk', 'maintenance']) {
        await sql`INSERT INTO ${sql(table)} ${sql(row({ queue }) as never)}`;
      }
      expect((await refusal(sql`INSERT INTO ${sql(table)} ${sql(row({ queue: 'urgent' }) as never)}`)).constraint_name).toBe(
        `${table}_queue_known`,
      );
      for (const bad of [[1], 'x', 2]) {
        expect(
          (await refusal(sql`INSERT INTO ${sql(table)} ${sql(row({ envelope: sql.json(bad as never) }) as never)}`)).constraint_name,
        ).toBe(`${table}_envelope_object`);
      }
    });

    it(`R-OBX-03 R-OBX-04 ${table} available_at defaults to the clock, sent_at is nullable, attempts >= 0`, async () => {
      const [r] = await sql.begin(async (tx) => {
        await tx`SELECT pg_sleep(0.01)`;
        return tx`INSERT INTO ${tx(table)} ${tx(row() as never)} RETURNING *, now() AS tx_start, clock_timestamp() AS after`;
      });
      expect(r!.sent_at).toBeNull();
      expect(r!.attempts).toBe(0);
      // created_at is the database clock at insert, not the transaction start.
      expect(r!.created_at).toBeInstanceOf(Date);
      expect(r!.created_at.getTime()).toBeGreaterThanOrEqual(r!.tx_start.getTime() + 10);
      expect(r!.created_at.getTime()).toBeLessThanOrEqual(r!.after.getTime());
      const types = await sql`SELECT column_name, data_type, is_nullable FROM information_schema.columns
        WHERE table_name = ${table} AND column_name IN ('available_at', 'sent_at') ORDER BY 1`;
      expect(types.map((c) => [c.column_name, c.data_type, c.is_nullable])).toEqual([
        ['available_at', 'timestamp with time zone', 'NO'],
        ['sent_at', 'timestamp with time zone', 'YES'],
      ]);
      expect((await refusal(sql`INSERT INTO ${sql(table)} ${sql(row({ attempts: -1 }) as never)}`)).constraint_name).toBe(
        `${table}_attempts_not_negative`,
      );
    });
  }

  it('R-OBX-01 outbox_messages.tenant_id references tenants; the platform outbox has no tenant_id', async () => {
    const e = await refusal(sql`INSERT INTO outbox_messages (tenant_id, run_id, queue, envelope)
      VALUES (0, ${randomUUID()}, 'default', '{}')`);
    expect(e.constraint_name).toBe('outbox_messages_tenant_fk');
    const [c] = await sql`SELECT count(*)::int AS n FROM information_schema.columns
      WHERE table_name = 'platform_outbox_messages' AND column_name = 'tenant_id'`;
    expect(c!.n).toBe(0);
  });
});

describe('task_runs', () => {
  it('R-RUN-02 R-RUN-03 run_id is the uuid primary key; tenant_id references tenants and is unique with run_id', async () => {
    const runId = await insertRun(sql);
    expect((await refusal(insertRun(sql, { run_id: runId }))).constraint_name).toBe('task_runs_pkey');
    expect((await refusal(insertRun(sql, { tenant_id: '0' }))).constraint_name).toBe('task_runs_tenant_fk');
    const [u] = await sql`SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'task_runs_run_tenant_unique'`;
    expect(u!.def).toBe('UNIQUE (run_id, tenant_id)');
  });

  it('R-RUN-04 name format, queue and trigger are checked', async () => {
    for (const name of ['a.b', 'maintenance.purge', 'x-y_z.1', 'a'.repeat(64)]) await insertRun(sql, { name });
    for (const name of ['A.b', '1abc', 'a', 'a'.repeat(65), 'a b', 'a/b']) {
      expect((await refusal(insertRun(sql, { name }))).constraint_name).toBe('task_runs_name_format');
    }
    expect((await refusal(insertRun(sql, { queue: 'urgent' }))).constraint_name).toBe('task_runs_queue_known');
    for (const trigger of ['dispatch', 'event', 'redrive']) await insertRun(sql, { trigger });
    expect((await refusal(insertRun(sql, { trigger: 'schedule' }))).constraint_name).toBe('task_runs_trigger_known');
  });

  it('R-RUN-05 actor_kind is user or system only (no platform operator) and actor_label is 1..128 long', async () => {
    for (const kind of ['platform_operator', 'scheduler', 'operator']) {
      expect((await refusal(insertRun(sql, { actor_kind: kind }))).constraint_name).toBe('task_runs_actor_kind_known');
    }
    await insertRun(sql, { actor_label: 'x'.repeat(128) });
    for (const label of ['', 'x'.repeat(129)]) {
      expect((await refusal(insertRun(sql, { actor_label: label }))).constraint_name).toBe('task_runs_actor_label_length');
    }
  });

  it('R-RUN-06 correlation_id and causation_id are non-null uuids', async () => {
    const cols = await sql`SELECT column_name, data_type, is_nullable FROM information_schema.columns
      WHERE table_name = 'task_runs' AND column_name IN ('correlation_id', 'causation_id') ORDER BY 1`;
    expect(cols.map((c) => [c.column_name, c.data_type, c.is_nullable])).toEqual([
      ['causation_id', 'uuid', 'NO'],
      ['correlation_id', 'uuid', 'NO'],
    ]);
  });

  it('R-RUN-07 R-RUN-08 R-RUN-09 status, attempts, progress and outcome are checked; defaults hold', async () => {
    const runId = await insertRun(sql);
    const [r] = await sql`SELECT status, attempts, progress, outcome FROM task_runs WHERE run_id = ${runId}`;
    expect(r).toEqual({ status: 'queued', attempts: 0, progress: 0, outcome: {} });
    for (const status of ['queued', 'running', 'retrying']) await insertRun(sql, { status });
    expect((await refusal(insertRun(sql, { status: 'done' }))).constraint_name).toBe('task_runs_status_known');
    expect((await refusal(insertRun(sql, { attempts: -1 }))).constraint_name).toBe('task_runs_attempts_not_negative');
    await insertRun(sql, { progress: 100 });
    for (const progress of [-1, 101]) {
      expect((await refusal(insertRun(sql, { progress }))).constraint_name).toBe('task_runs_progress_percent');
    }
    const big = (n: number) => ({ s: 'x'.repeat(n - 9) }); // jsonb text: {"s": "..."}
    await insertRun(sql, { outcome: big(2048) });
    for (const outcome of [big(2049), [1], 'x']) {
      expect((await refusal(insertRun(sql, { outcome }))).constraint_name).toBe('task_runs_outcome_object_max_2048_bytes');
    }
  });

  it('R-RUN-10 queued_at/updated_at come from the database clock; finished_at is set iff the run is final', async () => {
    const [r] = await sql.begin(async (tx) => {
      await tx`SELECT pg_sleep(0.01)`;
      const runId = await insertRun(tx as unknown as Sql);
      return tx`SELECT queued_at > now() AS after_tx_start, updated_at IS NOT NULL AS u, started_at FROM task_runs WHERE run_id = ${runId}`;
    });
    expect(r).toEqual({ after_tx_start: true, u: true, started_at: null });
    for (const status of ['succeeded', 'failed', 'skipped']) {
      await insertRun(sql, { status, finished_at: new Date().toISOString() });
      expect((await refusal(insertRun(sql, { status }))).constraint_name).toBe('task_runs_finished_at_iff_final');
    }
    for (const status of ['queued', 'running', 'retrying']) {
      expect((await refusal(insertRun(sql, { status, finished_at: new Date().toISOString() }))).constraint_name).toBe(
        'task_runs_finished_at_iff_final',
      );
    }
  });

  it('R-RUN-11 only status, attempts, progress, outcome, started_at, finished_at and updated_at may change', async () => {
    const runId = await insertRun(sql);
    await sql`UPDATE task_runs SET status = 'running', attempts = 1, progress = 50, outcome = '{"a":1}',
      started_at = clock_timestamp(), updated_at = clock_timestamp() WHERE run_id = ${runId}`;
    await sql`UPDATE task_runs SET status = 'succeeded', finished_at = clock_timestamp() WHERE run_id = ${runId}`;
    const changes: Array<[string, unknown]> = [
      ['name', 'other.name'], ['queue', 'bulk'], ['trigger', 'event'], ['actor_label', 'x'],
      ['correlation_id', randomUUID()], ['causation_id', randomUUID()], ['queued_at', new Date(0).toISOString()],
      ['tenant_id', otherMember.tenantId], ['run_id', randomUUID()],
    ];
    for (const [column, value] of changes) {
      const e = await refusal(sql`UPDATE task_runs SET ${sql(column)} = ${value as never} WHERE run_id = ${runId}`);
      expect(e.message).toContain('task_runs');
      expect(e.message).toContain(column);
      expect(e.message).toContain('append-only');
    }
    // A no-op assignment of a fixed column is not a change.
    await sql`UPDATE task_runs SET name = name, progress = 99 WHERE run_id = ${runId}`;
  });

  // The guard's trigger lists the fixed columns in its column list and its WHEN condition
  // (sql/work/0019_run-guard-when.sql, sql/work/0026_run-guard-columns.sql): every column of both run
  // tables outside the progress set, read from the catalog, must be refused, so a column added later
  // without its place in those lists fails here.
  for (const table of ['task_runs', 'platform_task_runs'] as const) {
    it(`R-RUN-11 R-RUN-16 the column guard of ${table} fires only for an update naming a fixed column`, async () => {
      // A column trigger is skipped on its column list before its WHEN condition is read: the condition
      // is prepared from its stored text once per updating statement, which every runtime update paid.
      const [guard] = await sql<{ fixed: string[]; listed: string[] }[]>`
        SELECT array(SELECT a.attname::text FROM pg_attribute a
                      WHERE a.attrelid = t.tgrelid AND a.attnum > 0 AND NOT a.attisdropped
                        AND NOT (a.attname = ANY(${['status', 'attempts', 'progress', 'outcome', 'started_at', 'finished_at', 'updated_at']}))
                      ORDER BY a.attname) AS fixed,
               array(SELECT a.attname::text FROM pg_attribute a
                      WHERE a.attrelid = t.tgrelid AND a.attnum = ANY(t.tgattr::int2[]) ORDER BY a.attname) AS listed
          FROM pg_trigger t WHERE t.tgrelid = ${table}::regclass AND t.tgname = ${`${table}_only_progress_columns_change`}`;
      expect(guard!.fixed.length).toBe(table === 'task_runs' ? 10 : 9);
      expect(guard!.listed).toEqual(guard!.fixed);
      // An upsert names its DO UPDATE columns: a fixed one changed that way is refused as well.
      const runId = table === 'task_runs' ? await insertRun(sql) : await insertPlatformRun(sql);
      const e = await refusal(
        sql.unsafe(`INSERT INTO ${table} SELECT * FROM ${table} WHERE run_id = $1 ON CONFLICT (run_id) DO UPDATE SET name = 'other.name'`, [runId]),
      );
      expect([e.code, e.message]).toEqual(['23001', expect.stringMatching(new RegExp(`^${table} is an append-only trail of runs: column\\(s\\) name cannot change`))]);
    });

    it(`R-RUN-11 R-RUN-16 every column of ${table} outside the progress columns, read from the catalog, is refused`, async () => {
      const progress = ['status', 'attempts', 'progress', 'outcome', 'started_at', 'finished_at', 'updated_at'];
      const columns = await sql<{ column_name: string; data_type: string }[]>`
        SELECT column_name, data_type FROM information_schema.columns
         WHERE table_schema = 'public' AND table_name = ${table} AND NOT (column_name = ANY(${progress}))
         ORDER BY ordinal_position`;
      expect(columns.length).toBe(table === 'task_runs' ? 10 : 9);
      // A different value of each type; the BEFORE trigger refuses before any CHECK or foreign key is looked at.
      const changed: Record<string, string> = {
        uuid: 'gen_random_uuid()',
        text: '|| \'x\'',
        bigint: '+ 1',
        'timestamp with time zone': "+ interval '1 second'",
      };
      const runId = table === 'task_runs' ? await insertRun(sql) : await insertPlatformRun(sql);
      for (const { column_name: column, data_type: type } of columns) {
        const change = changed[type];
        expect(change, `${table}.${column} has type ${type}: add a changed value for it`).toBeDefined();
        const value = change!.startsWith('gen_') ? change! : `"${column}" ${change!}`;
        const e = await refusal(sql.unsafe(`UPDATE ${table} SET "${column}" = ${value} WHERE run_id = $1`, [runId]));
        expect([e.code, e.message], column).toEqual(['23001', expect.stringMatching(new RegExp(`^${table} is an append-only trail of runs: column\\(s\\) ${column} cannot change`))]);
      }
      // Progress columns still change, together or alone.
      const [after] = await sql.unsafe(
        `UPDATE ${table} SET status = 'running', attempts = attempts + 1, progress = 5, updated_at = clock_timestamp(),
           started_at = clock_timestamp() WHERE run_id = $1 RETURNING status`,
        [runId],
      );
      expect(after!.status).toBe('running');
    });
  }

  it('R-RUN-01 R-RUN-22 DELETE and TRUNCATE on task_runs are refused by a trigger naming the table', async () => {
    const runId = await insertRun(sql);
    for (const stmt of [sql`DELETE FROM task_runs WHERE run_id = ${runId}`, sql`DELETE FROM task_runs WHERE false`, sql`TRUNCATE task_runs CASCADE`]) {
      const e = await refusal(stmt);
      expect(e.message).toMatch(/^task_runs is an append-only trail/);
    }
    const [c] = await sql`SELECT count(*)::int AS n FROM task_runs WHERE run_id = ${runId}`;
    expect(c!.n).toBe(1);
  });

  it('R-RUN-12 a user run without its task_run_user_actors row fails at COMMIT', async () => {
    let afterInsert = false;
    const e = await refusal(
      sql.begin(async (tx) => {
        await insertRun(tx as unknown as Sql, { actor_kind: 'user' });
        afterInsert = true; // the insert itself succeeds: the check is deferred
      }),
    );
    expect(afterInsert).toBe(true);
    expect(e.message).toContain('task_run_user_actors');
    const ok = await sql.begin(async (tx) => {
      const runId = await insertRun(tx as unknown as Sql, { actor_kind: 'user', actor_label: 'user:1' });
      await tx`INSERT INTO task_run_user_actors ${tx({ run_id: runId, tenant_id: member.tenantId, user_id: member.userId, membership_id: member.membershipId })}`;
      return runId;
    });
    const [c] = await sql`SELECT count(*)::int AS n FROM task_run_user_actors WHERE run_id = ${ok}`;
    expect(c!.n).toBe(1);
  });

  it('R-RUN-14 the user actor references the run and the membership of the same tenant', async () => {
    const insertActor = (values: Record<string, string>) =>
      sql.begin(async (tx) => {
        const runId = await insertRun(tx as unknown as Sql, { actor_kind: 'user' });
        await tx`INSERT INTO task_run_user_actors ${tx({ run_id: runId, tenant_id: member.tenantId, user_id: member.userId, membership_id: member.membershipId, ...values })}`;
      });
    // Membership of another tenant, or another user's membership: refused by the composite reference.
    expect((await refusal(insertActor({ membership_id: otherMember.membershipId }))).constraint_name).toBe(
      'task_run_user_actors_membership_fk',
    );
    expect((await refusal(insertActor({ user_id: otherMember.userId }))).constraint_name).toBe(
      'task_run_user_actors_membership_fk',
    );
    // The run of another tenant: refused by (run_id, tenant_id).
    expect((await refusal(insertActor({ tenant_id: otherMember.tenantId, user_id: otherMember.userId, membership_id: otherMember.membershipId }))).constraint_name).toBe(
      'task_run_user_actors_run_fk',
    );
    await insertActor({});
  });

  it('R-RUN-15 R-RUN-22 UPDATE, DELETE and TRUNCATE on task_run_user_actors are refused naming the table', async () => {
    for (const stmt of [
      sql`UPDATE task_run_user_actors SET user_id = user_id`,
      sql`DELETE FROM task_run_user_actors`,
      sql`TRUNCATE task_run_user_actors`,
    ]) {
      const e = await refusal(stmt);
      expect(e.message).toMatch(/^task_run_user_actors is an append-only trail: it accepts INSERT only/);
    }
  });
});

describe('task_run_events', () => {
  it('R-TRL-01 R-TRL-02 id is an always-generated identity; (run_id, tenant_id) references the run', async () => {
    const runId = await insertRun(sql);
    await insertEvent(sql, runId);
    expect((await refusal(insertEvent(sql, runId, { id: 5 }))).code).toBe('428C9');
    expect((await refusal(insertEvent(sql, runId, { tenant_id: otherMember.tenantId }))).constraint_name).toBe(
      'task_run_events_run_fk',
    );
    expect((await refusal(insertEvent(sql, randomUUID()))).constraint_name).toBe('task_run_events_run_fk');
  });

  it('R-TRL-03 R-TRL-04 R-TRL-05 event, attempt, receive_count, worker_instance and detail are checked', async () => {
    const runId = await insertRun(sql);
    const events = ['queued', 'sent', 'received', 'started', 'progress', 'retry_scheduled', 'succeeded', 'failed',
      'skipped', 'dead_lettered', 'released_on_shutdown', 'redriven'];
    for (const event of events) await insertEvent(sql, runId, { event });
    expect((await refusal(insertEvent(sql, runId, { event: 'done' }))).constraint_name).toBe('task_run_events_event_known');
    expect((await refusal(insertEvent(sql, runId, { attempt: -1 }))).constraint_name).toBe('task_run_events_attempt_not_negative');
    expect((await refusal(insertEvent(sql, runId, { receive_count: -1 }))).constraint_name).toBe(
      'task_run_events_receive_count_not_negative',
    );
    for (const w of ['', 'w'.repeat(129)]) {
      expect((await refusal(insertEvent(sql, runId, { worker_instance: w }))).constraint_name).toBe(
        'task_run_events_worker_instance_length',
      );
    }
    for (const detail of [{ s: 'x'.repeat(2040) }, [1], 'x']) {
      expect((await refusal(insertEvent(sql, runId, { detail: sql.json(detail as never) }))).constraint_name).toBe(
        'task_run_events_detail_object_max_2048_bytes',
      );
    }
    const [r] = await sql`SELECT receive_count, error_code, error_type, detail, occurred_at IS NOT NULL AS t
      FROM task_run_events WHERE run_id = ${runId} ORDER BY id LIMIT 1`;
    expect(r).toEqual({ receive_count: 0, error_code: '', error_type: '', detail: {}, t: true });
  });

  it('R-TRL-06 R-RUN-22 UPDATE, DELETE and TRUNCATE on task_run_events are refused naming the table', async () => {
    const runId = await insertRun(sql);
    await insertEvent(sql, runId);
    for (const stmt of [
      sql`UPDATE task_run_events SET attempt = 1 WHERE run_id = ${runId}`,
      sql`DELETE FROM task_run_events WHERE run_id = ${runId}`,
      sql`TRUNCATE task_run_events`,
    ]) {
      const e = await refusal(stmt);
      expect(e.message).toMatch(/^task_run_events is an append-only trail: it accepts INSERT only/);
    }
  });
});

describe('platform runs', () => {
  it('R-RUN-16 platform_task_runs has the task_runs columns without tenant_id and the same checks', async () => {
    const cols = async (t: string) =>
      (await sql`SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns
        WHERE table_name = ${t} ORDER BY column_name`).map((c) => JSON.stringify(c));
    const tenantCols = (await cols('task_runs')).filter((c) => !c.includes('"tenant_id"'));
    expect(await cols('platform_task_runs')).toEqual(tenantCols);
    await insertPlatformRun(sql, { trigger: 'event' });
    expect((await refusal(insertPlatformRun(sql, { name: 'Bad' }))).constraint_name).toBe('platform_task_runs_name_format');
    expect((await refusal(insertPlatformRun(sql, { actor_kind: 'user' }))).constraint_name).toBe(
      'platform_task_runs_actor_kind_known',
    );
    expect((await refusal(insertPlatformRun(sql, { status: 'succeeded' }))).constraint_name).toBe(
      'platform_task_runs_finished_at_iff_final',
    );
    const runId = await insertPlatformRun(sql);
    const e = await refusal(sql`UPDATE platform_task_runs SET name = 'x.y' WHERE run_id = ${runId}`);
    expect(e.message).toMatch(/^platform_task_runs is an append-only trail/);
    for (const stmt of [sql`DELETE FROM platform_task_runs`, sql`TRUNCATE platform_task_runs CASCADE`]) {
      expect((await refusal(stmt)).message).toMatch(/^platform_task_runs is an append-only trail/);
    }
  });

  it('R-RUN-16 platform_task_runs checks status, attempts, progress, outcome size, actor label and finished_at like task_runs', async () => {
    const runId = await insertPlatformRun(sql);
    const [r] = await sql`SELECT status, attempts, progress, outcome FROM platform_task_runs WHERE run_id = ${runId}`;
    expect(r).toEqual({ status: 'queued', attempts: 0, progress: 0, outcome: {} });
    for (const status of ['queued', 'running', 'retrying']) await insertPlatformRun(sql, { status });
    expect((await refusal(insertPlatformRun(sql, { status: 'done' }))).constraint_name).toBe('platform_task_runs_status_known');
    await insertPlatformRun(sql, { attempts: 7 });
    expect((await refusal(insertPlatformRun(sql, { attempts: -1 }))).constraint_name).toBe('platform_task_runs_attempts_not_negative');
    for (const progress of [0, 100]) await insertPlatformRun(sql, { progress });
    for (const progress of [-1, 101]) {
      expect((await refusal(insertPlatformRun(sql, { progress }))).constraint_name).toBe('platform_task_runs_progress_percent');
    }
    // The spec's limit: an outcome of at most 2048 bytes (jsonb text: {"s": "..."} is 9 bytes of framing).
    const big = (n: number) => ({ s: 'x'.repeat(n - 9) });
    await insertPlatformRun(sql, { outcome: big(2048) });
    for (const outcome of [big(2049), [1], 'x']) {
      expect((await refusal(insertPlatformRun(sql, { outcome }))).constraint_name).toBe('platform_task_runs_outcome_object_max_2048_bytes');
    }
    await insertPlatformRun(sql, { actor_label: 'x'.repeat(128) });
    for (const label of ['', 'x'.repeat(129)]) {
      expect((await refusal(insertPlatformRun(sql, { actor_label: label }))).constraint_name).toBe('platform_task_runs_actor_label_length');
    }
    for (const status of ['succeeded', 'failed', 'skipped']) {
      await insertPlatformRun(sql, { status, finished_at: new Date().toISOString() });
      expect((await refusal(insertPlatformRun(sql, { status }))).constraint_name).toBe('platform_task_runs_finished_at_iff_final');
    }
    expect((await refusal(insertPlatformRun(sql, { status: 'running', finished_at: new Date().toISOString() }))).constraint_name)
      .toBe('platform_task_runs_finished_at_iff_final');
    // Progress columns change; fixed ones are refused naming the table and column.
    await sql`UPDATE platform_task_runs SET status = 'running', attempts = 1, progress = 40, outcome = '{"a":1}',
      started_at = clock_timestamp(), updated_at = clock_timestamp() WHERE run_id = ${runId}`;
    await sql`UPDATE platform_task_runs SET status = 'succeeded', finished_at = clock_timestamp() WHERE run_id = ${runId}`;
    for (const [column, value] of [['queue', 'bulk'], ['actor_label', 'y'], ['correlation_id', randomUUID()]] as const) {
      const e = await refusal(sql`UPDATE platform_task_runs SET ${sql(column)} = ${value} WHERE run_id = ${runId}`);
      expect(e.message, column).toMatch(new RegExp(`^platform_task_runs is an append-only trail.*${column}`, 's'));
    }
  });

  it('R-RUN-17 actor_kind scheduler holds exactly when trigger is schedule', async () => {
    expect((await refusal(insertPlatformRun(sql, { trigger: 'schedule', actor_kind: 'system' }))).constraint_name).toBe(
      'platform_task_runs_scheduler_iff_schedule',
    );
    expect((await refusal(insertPlatformRun(sql, { trigger: 'dispatch', actor_kind: 'scheduler' }))).constraint_name).toBe(
      'platform_task_runs_scheduler_iff_schedule',
    );
  });

  it('R-RUN-18 a scheduler run without its schedule origin fails at COMMIT', async () => {
    let inserted = false;
    const e = await refusal(
      sql.begin(async (tx) => {
        await insertPlatformRun(tx as unknown as Sql, { trigger: 'schedule', actor_kind: 'scheduler' });
        inserted = true;
      }),
    );
    expect(inserted).toBe(true);
    expect(e.message).toContain('platform_task_run_schedule_origins');
  });

  it('R-RUN-19 one scheduled moment yields one run; execution_id is 1..128 long', async () => {
    const moment = '2030-01-01T00:00:00Z';
    const fire = (executionId: string, scheduledFor = moment) =>
      sql.begin(async (tx) => {
        const runId = await insertPlatformRun(tx as unknown as Sql, { trigger: 'schedule', actor_kind: 'scheduler' });
        await tx`INSERT INTO platform_task_run_schedule_origins ${tx({ run_id: runId, schedule_name: 'maintenance.purge', execution_id: executionId, scheduled_for: scheduledFor })}`;
      });
    await fire('exec-1');
    expect((await refusal(fire('exec-2'))).constraint_name).toBe('platform_task_run_schedule_origins_moment_unique');
    await fire('exec-3', '2030-01-01T01:00:00Z');
    for (const id of ['', 'e'.repeat(129)]) {
      expect((await refusal(fire(id, '2031-01-01T00:00:00Z'))).constraint_name).toBe(
        'platform_task_run_schedule_origins_execution_id_length',
      );
    }
    expect((await refusal(sql`INSERT INTO platform_task_run_schedule_origins (run_id, schedule_name, execution_id, scheduled_for)
      VALUES (${randomUUID()}, 's', 'e', clock_timestamp())`)).constraint_name).toBe('platform_task_run_schedule_origins_run_fk');
  });

  it('R-RUN-20 R-RUN-22 UPDATE, DELETE and TRUNCATE on platform_task_run_schedule_origins are refused naming the table', async () => {
    for (const stmt of [
      sql`UPDATE platform_task_run_schedule_origins SET execution_id = 'x'`,
      sql`DELETE FROM platform_task_run_schedule_origins`,
      sql`TRUNCATE platform_task_run_schedule_origins`,
    ]) {
      expect((await refusal(stmt)).message).toMatch(
        /^platform_task_run_schedule_origins is an append-only trail: it accepts INSERT only/,
      );
    }
  });

  it('R-TRL-07 R-RUN-22 platform_task_run_events has no tenant_id, references the platform run and is append-only', async () => {
    const runId = await insertPlatformRun(sql);
    const ev = (values: Record<string, unknown> = {}) =>
      sql`INSERT INTO platform_task_run_events ${sql({ run_id: runId, event: 'queued', attempt: 0, queue: 'maintenance', worker_instance: 'w', ...values } as never)}`;
    await ev();
    expect((await refusal(ev({ run_id: randomUUID() }))).constraint_name).toBe('platform_task_run_events_run_fk');
    expect((await refusal(ev({ event: 'nope' }))).constraint_name).toBe('platform_task_run_events_event_known');
    expect((await refusal(ev({ id: 1 }))).code).toBe('428C9');
    const [c] = await sql`SELECT count(*)::int AS n FROM information_schema.columns
      WHERE table_name = 'platform_task_run_events' AND column_name = 'tenant_id'`;
    expect(c!.n).toBe(0);
    for (const stmt of [
      sql`UPDATE platform_task_run_events SET attempt = 2`,
      sql`DELETE FROM platform_task_run_events`,
      sql`TRUNCATE platform_task_run_events`,
    ]) {
      expect((await refusal(stmt)).message).toMatch(/^platform_task_run_events is an append-only trail: it accepts INSERT only/);
    }
  });
});

describe('tenant fixtures', () => {
  it('creates distinct tenants', async () => {
    expect(await createTenant(sql)).not.toBe(await createTenant(sql));
  });
});
