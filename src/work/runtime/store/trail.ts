// The run trail's one writer: every insert into task_run_events / platform_task_run_events is built
// here. A caller appends events in its own statement (appendTrailEvent(s), insertTrailEvents), or puts
// trail rows into a statement of its own as a CTE (insertTrailRows), so a transition and its trail
// event stay one statement, one round trip, where they were. Also reads a run's trail back.
import type postgres from 'postgres';
import type { Sql, TxSql } from '../../../db/client.ts';
import {
  NO_SQL, checkTenant, composedTemplate, piece, RUN_TABLE, scoped, scopeTables, SqlPiece, sqlText, SqlText, tenantOnly, tenantText, TRAIL_TABLE, type Db, type Fragment, type RunScope,
} from './scope-tables.ts';

export type TrailEventName =
  | 'queued' | 'sent' | 'received' | 'started' | 'progress' | 'retry_scheduled' | 'succeeded' | 'failed'
  | 'skipped' | 'dead_lettered' | 'released_on_shutdown' | 'redriven';

export interface TrailEventInput {
  runId: string;
  /** Required for scope tenant, absent/null for platform. */
  tenantId?: string | null;
  event: TrailEventName;
  /** The run's attempt this event belongs to (0 before the first start). */
  attempt: number;
  /** The queue's receive count of the delivery, 0 when not from a delivery. */
  receiveCount?: number;
  queue: string;
  /** 1..128 characters naming the process, e.g. `workers@host:1234`. */
  workerInstance: string;
  errorCode?: string;
  errorType?: string;
  /** JSON object, at most 2048 bytes serialized. */
  detail?: Record<string, unknown>;
  /**
   * When the event happened, if not now: `run_finished` takes the run's finished_at (the final event
   * of a run carries the instant its status became final), a timestamptz text an earlier instant (the
   * `started` of a rolled-back attempt, recorded again at the instant it happened). Default: now.
   */
  occurredAt?: 'run_finished' | string;
}

/**
 * The SQL expression of each column of a trail row, for insertTrailRows: constant text (sqlText: a
 * column of the caller's statement, a literal), a fragment, or a value (sent as a parameter, as in any
 * `sql` template: no fragment is made for it, which a hot statement would pay for). A column left
 * out takes its default (receive_count 0, error_code/error_type NULL, detail `{}`, occurred_at now).
 * `tenantId` is the tenant_id's expression, used in the tenant scope only (a platform trail has no such
 * column).
 */
export interface TrailRowSql {
  runId: TrailSql;
  tenantId: TrailSql;
  event: TrailSql;
  attempt: TrailSql;
  receiveCount?: TrailSql;
  queue: TrailSql;
  workerInstance: TrailSql;
  errorCode?: TrailSql;
  errorType?: TrailSql;
  detail?: TrailSql;
  occurredAt?: TrailSql;
}

type TrailSql = SqlText | SqlPiece | Fragment | postgres.Parameter | string | number | null;

/** The trail's columns in the order every insert lists them. */
const TRAIL_COLUMNS: ReadonlyArray<readonly [keyof TrailRowSql, string]> = [
  ['runId', 'run_id'], ['tenantId', 'tenant_id'], ['event', 'event'], ['attempt', 'attempt'], ['receiveCount', 'receive_count'],
  ['queue', 'queue'], ['workerInstance', 'worker_instance'], ['errorCode', 'error_code'], ['errorType', 'error_type'],
  ['detail', 'detail'], ['occurredAt', 'occurred_at'],
];

/**
 * `INSERT INTO <the scope's trail> (<the columns given>) SELECT <their expressions> <source>`, or with
 * `VALUES (<expressions>)` when there is no source: a statement of its own, or a CTE of the caller's
 * statement (`ev AS (${insertTrailRows(...)})`), with `source` its `FROM … [WHERE …] [ORDER BY …]`
 * (the order ids are taken in) and the caller's `RETURNING` if it needs one. Its text is made once per
 * shape (scope-tables.ts `scoped`).
 */
export function insertTrailRows(sql: Db, scope: RunScope, row: TrailRowSql, source?: TrailSql, returning?: TrailSql): Fragment {
  return statementOf(sql, trailRows(scope, row, source, returning));
}

/** A piece run as a whole statement of its own (its text made once, as every `scoped` shape's). */
function statementOf(sql: Db, p: SqlPiece): Fragment {
  return scoped(sql)(composedTemplate('one', () => ['', '']), p);
}

/** insertTrailRows as a piece of the caller's `scoped` statement (a CTE): spliced into its text. */
export function trailRows(scope: RunScope, row: TrailRowSql, source?: TrailSql, returning?: TrailSql): SqlPiece {
  const values: unknown[] = [scopeTables(scope).trail, NO_SQL];
  let mask = 0;
  for (let i = 0; i < TRAIL_COLUMNS.length; i++) {
    const field = TRAIL_COLUMNS[i]![0];
    if (row[field] === undefined || (field === 'tenantId' && scope !== 'tenant')) continue;
    mask |= 1 << i;
    values.push(row[field]);
  }
  values[1] = columnList(mask);
  values.push(source ?? NO_SQL, returning ?? NO_SQL);
  const form = source === undefined ? ') VALUES (' : ') SELECT ';
  const count = values.length - 5; // separators: one fewer than the columns
  const template = composedTemplate(`${form}${count}`, () => ['INSERT INTO ', ' (', form, ...Array<string>(count).fill(', '), source === undefined ? ') ' : ' ', ' ', '']);
  return new SqlPiece(template, values);
}

const columnLists = new Map<number, SqlText>();

/** The column list of the columns in `mask` (bits in TRAIL_COLUMNS order). */
function columnList(mask: number): SqlText {
  let list = columnLists.get(mask);
  if (!list) columnLists.set(mask, (list = sqlText(TRAIL_COLUMNS.filter((_, i) => mask & (1 << i)).map(([, column]) => column).join(', '))));
  return list;
}

/** Appends one event to the run's trail (task_run_events or platform_task_run_events). */
export async function appendTrailEvent(tx: TxSql, scope: RunScope, event: TrailEventInput): Promise<void> {
  await appendTrailEvents(tx, scope, [event]);
}

/** Appends several events: one statement (insertTrailEvents), or one per event that has its own occurred_at. */
export async function appendTrailEvents(tx: TxSql, scope: RunScope, events: readonly TrailEventInput[]): Promise<void> {
  if (events.length === 0) return;
  if (events.some((e) => e.occurredAt !== undefined)) {
    for (const e of events) await appendTrailEventAt(tx, scope, e);
    return;
  }
  await insertTrailEvents(tx, scope, events);
}

/**
 * Events that happen now (no occurred_at of their own), as ONE statement, returned unsent so a caller
 * can pipeline it (trailEventRows makes the same rows a CTE of a caller's statement: the relay's `sent`
 * events are one of its recordSent). The statement has one shape whatever the number of events (arrays unnested server-side, in order, so ids
 * follow the input): postgres.js prepares it once per connection, where a VALUES list per count would be
 * a new statement for each batch size, and a new statement costs a round trip to describe it before
 * anything can be pipelined behind it. Call with at least one event.
 */
export function insertTrailEvents(tx: TxSql, scope: RunScope, events: ReadonlyArray<Omit<TrailEventInput, 'occurredAt'>>) {
  return statementOf(tx, trailEventRows(scope, events));
}

/** insertTrailEvents as a piece of the caller's `scoped` statement (a CTE, with its `returning`). */
export function trailEventRows(scope: RunScope, events: ReadonlyArray<Omit<TrailEventInput, 'occurredAt'>>, returning?: TrailSql): SqlPiece {
  const tenants = events.map((e) => checkTenant(scope, e.tenantId));
  const runIds = events.map((e) => e.runId);
  const names = events.map((e) => e.event);
  const attempts = events.map((e) => e.attempt);
  const receives = events.map((e) => e.receiveCount ?? 0);
  const queues = events.map((e) => e.queue);
  const instances = events.map((e) => e.workerInstance);
  const codes = events.map((e) => e.errorCode ?? '');
  const types = events.map((e) => e.errorType ?? '');
  const details = events.map((e) => JSON.stringify(e.detail ?? {}));
  const column = sqlText;
  return trailRows(
    scope,
    {
      runId: column('r'), tenantId: column('t'), event: column('e'), attempt: column('a'), receiveCount: column('c'), queue: column('q'),
      workerInstance: column('w'), errorCode: column('ec'), errorType: column('et'), detail: column('d::jsonb'),
    },
    piece`FROM unnest(${runIds}::uuid[], ${tenantOnly(scope, piece`${tenants}::bigint[],`)} ${names}::text[], ${attempts}::int[], ${receives}::int[], ${queues}::text[],
                   ${instances}::text[], ${codes}::text[], ${types}::text[], ${details}::text[])
            WITH ORDINALITY AS u(r, ${tenantText(scope, 't,')} e, a, c, q, w, ec, et, d, n) ORDER BY n`,
    returning,
  );
}

/** One event with its own occurred_at (see TrailEventInput.occurredAt). */
async function appendTrailEventAt(tx: TxSql, scope: RunScope, e: TrailEventInput): Promise<void> {
  const tenantId = checkTenant(scope, e.tenantId);
  const at =
    e.occurredAt === undefined
      ? tx`clock_timestamp()`
      : e.occurredAt === 'run_finished'
        ? tx`(SELECT COALESCE(finished_at, clock_timestamp()) FROM ${tx(RUN_TABLE[scope])} WHERE run_id = ${e.runId})`
        : // Sent as text: a timestamptz parameter goes through postgres.js's Date serializer, which
          // rounds to the millisecond and could order this event before the one it follows.
          tx`${e.occurredAt}::text::timestamptz`;
  await insertTrailRows(tx, scope, {
    runId: e.runId,
    tenantId,
    event: e.event,
    attempt: e.attempt,
    receiveCount: e.receiveCount ?? 0,
    queue: e.queue,
    workerInstance: e.workerInstance,
    errorCode: e.errorCode ?? '',
    errorType: e.errorType ?? '',
    detail: tx.json((e.detail ?? {}) as never),
    occurredAt: at,
  });
}

/** One trail event as read back. */
export interface TrailEvent {
  event: TrailEventName;
  attempt: number;
  receiveCount: number;
  queue: string;
  workerInstance: string;
  errorCode: string | null;
  errorType: string | null;
  detail: Record<string, unknown>;
  occurredAt: Date;
}

/** A run's whole trail in causal order: by `occurred_at`, then by id (R-RUN trail order). */
export async function readTrail(sql: Sql | TxSql, scope: RunScope, runId: string): Promise<TrailEvent[]> {
  const rows = await sql<Record<string, unknown>[]>`
    SELECT event, attempt, receive_count, queue, worker_instance, error_code, error_type, detail, occurred_at
      FROM ${sql(TRAIL_TABLE[scope])} WHERE run_id = ${runId} ORDER BY occurred_at, id`;
  return rows.map((r) => ({
    event: r.event as TrailEventName,
    attempt: r.attempt as number,
    receiveCount: r.receive_count as number,
    queue: r.queue as string,
    workerInstance: r.worker_instance as string,
    errorCode: (r.error_code as string | null) ?? null,
    errorType: (r.error_type as string | null) ?? null,
    detail: r.detail as Record<string, unknown>,
    occurredAt: r.occurred_at as Date,
  }));
}
