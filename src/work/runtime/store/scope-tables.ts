// The work tables of each run scope, named once, and the `scoped` tag that lets a statement over them
// be written once for both scopes: the tables' names (SqlText) and what only a tenant table has (the
// tenant_id column: its place in a column list, its value, its condition: tenantText, tenantOnly) go
// in as text or pieces that are empty in the platform scope, spliced into a template cached per scope.
// The statement text still differs per scope (other names, one column fewer), so each scope keeps its
// own prepared statement and plans, as when each was written out by hand, and the text sent is the
// hand-written one (the same words, unquoted names).
import type postgres from 'postgres';
import type { Sql, TxSql } from '../../../db/client.ts';
import { CodedError } from '../../../errors/coded-error.ts';

/** tenant: task_runs / task_run_events / outbox_messages / idempotency_keys; platform: the platform_* tables (platform and system tasks). */
export type RunScope = 'tenant' | 'platform';

export type Db = Sql | TxSql;
export type Fragment = postgres.Fragment;

export const RUN_TABLE = { tenant: 'task_runs', platform: 'platform_task_runs' } as const;
export const TRAIL_TABLE = { tenant: 'task_run_events', platform: 'platform_task_run_events' } as const;
export const OUTBOX_TABLE = { tenant: 'outbox_messages', platform: 'platform_outbox_messages' } as const;
export const LEDGER_TABLE = { tenant: 'idempotency_keys', platform: 'platform_idempotency_keys' } as const;

/**
 * Constant SQL text (a table's name, a column, an expression without values): spliced into the text of
 * a `scoped` statement, never sent as a value. Only ever made from constants, never from input (each
 * text is kept for the process's life: it names a cached template).
 */
export class SqlText {
  readonly text: string;
  /** Its number among the texts made (the cache key of a spliced statement names texts by it). */
  readonly id: number;
  private static count = 0;
  private static readonly made = new Map<string, SqlText>();
  private constructor(text: string) {
    this.text = text;
    this.id = SqlText.count++;
  }

  /** The one SqlText of this text. */
  static of(text: string): SqlText {
    let made = SqlText.made.get(text);
    if (!made) SqlText.made.set(text, (made = new SqlText(text)));
    return made;
  }
}

/** Constant SQL text (see SqlText). */
export function sqlText(text: string): SqlText {
  return SqlText.of(text);
}

const EMPTY = SqlText.of('');

/** No text: an optional part of a `scoped` statement left out. */
export const NO_SQL = EMPTY;
/** The `RETURNING` of a CTE that writes, read by the statement only to count (and so to order) it. */
export const RETURNING_ONE = SqlText.of('RETURNING 1');

const TABLE_TEXTS = {
  tenant: { runs: SqlText.of(RUN_TABLE.tenant), trail: SqlText.of(TRAIL_TABLE.tenant), outbox: SqlText.of(OUTBOX_TABLE.tenant), ledger: SqlText.of(LEDGER_TABLE.tenant) },
  platform: { runs: SqlText.of(RUN_TABLE.platform), trail: SqlText.of(TRAIL_TABLE.platform), outbox: SqlText.of(OUTBOX_TABLE.platform), ledger: SqlText.of(LEDGER_TABLE.platform) },
} as const;

/**
 * The scope's tables, for a `scoped` statement. Unquoted, as a hand-written statement names them: the
 * statement reads `UPDATE task_runs …`, which is what pg_stat_activity, the logs and the tests that wait
 * on a statement by its text see.
 */
export function scopeTables(scope: RunScope) {
  return TABLE_TEXTS[scope];
}

/** `text` in the tenant scope, nothing in the platform one: a tenant-only column or value without parameters (`tenant_id,`). */
export function tenantText(scope: RunScope, text: string): SqlText {
  return scope === 'tenant' ? SqlText.of(text) : EMPTY;
}

/**
 * A piece of a `scoped` statement (`piece\`…\``): its text and values are spliced into the statement
 * when it is made, where a postgres.js fragment would be a query object (a promise) of its own, which a
 * hot statement pays for per piece.
 */
export class SqlPiece {
  readonly strings: TemplateStringsArray;
  readonly values: readonly unknown[];
  constructor(strings: TemplateStringsArray, values: readonly unknown[]) {
    this.strings = strings;
    this.values = values;
  }
}

export function piece(strings: TemplateStringsArray, ...values: unknown[]): SqlPiece {
  return new SqlPiece(strings, values);
}

/**
 * `part` in the tenant scope, nothing in the platform one: a tenant-only piece (`${tenantId}::bigint,`,
 * `AND tenant_id = ${tenantId}`) of a `scoped` statement.
 */
export function tenantOnly(scope: RunScope, part: SqlPiece | SqlText): SqlPiece | SqlText {
  return scope === 'tenant' ? part : EMPTY;
}

type Strings = TemplateStringsArray;

/** Spliced strings per template (a call site's, or a composed one) and per shape of the values spliced into it. */
const spliced = new WeakMap<Strings, Map<string, Strings>>();
const pieceIds = new WeakMap<Strings, number>();
let pieceCount = 0;

function asTemplate(parts: string[]): Strings {
  return Object.freeze(Object.assign(parts, { raw: Object.freeze([...parts]) }));
}

/** What of `values` is spliced: texts by their id, pieces by their template and theirs. */
function shapeOf(values: readonly unknown[]): string {
  let key = '';
  for (const value of values) {
    if (value instanceof SqlText) key += `${value.id},`;
    else if (value instanceof SqlPiece) {
      let id = pieceIds.get(value.strings);
      if (id === undefined) pieceIds.set(value.strings, (id = pieceCount++));
      key += `(${id}:${shapeOf(value.values)}),`;
    } else key += ',';
  }
  return key;
}

function spliceInto(parts: string[], strings: Strings, values: readonly unknown[]): void {
  parts[parts.length - 1] += strings[0]!;
  values.forEach((value, i) => {
    if (value instanceof SqlText) parts[parts.length - 1] += value.text;
    else if (value instanceof SqlPiece) spliceInto(parts, value.strings, value.values);
    else parts.push('');
    parts[parts.length - 1] += strings[i + 1]!;
  });
}

/** The values that stay parameters or fragments, in order. */
function argsOf(values: readonly unknown[], args: unknown[]): unknown[] {
  for (const value of values) {
    if (value instanceof SqlPiece) argsOf(value.values, args);
    else if (!(value instanceof SqlText)) args.push(value);
  }
  return args;
}

/**
 * `sql` as a tag for a statement written once for both scopes: each SqlText value (scopeTables,
 * tenantText) and SqlPiece (piece, tenantOnly) is spliced into the statement's text, every other value
 * stays a parameter or a fragment. The spliced strings are made once per template and shape, so a call
 * costs what a hand-written statement's does (one query object), and postgres.js sees one template per
 * scope: one prepared statement per scope and connection, as before.
 */
export function scoped(sql: Db) {
  return <T extends readonly object[] = postgres.Row[]>(strings: Strings, ...values: unknown[]): postgres.PendingQuery<T> => {
    const key = shapeOf(values);
    let byShape = spliced.get(strings);
    if (!byShape) spliced.set(strings, (byShape = new Map()));
    let text = byShape.get(key);
    if (!text) {
      const parts = [''];
      spliceInto(parts, strings, values);
      byShape.set(key, (text = asTemplate(parts)));
    }
    return (sql as Sql)<T>(text, ...(argsOf(values, []) as never[]));
  };
}

const composed = new Map<string, Strings>();

/**
 * The template with these strings between its values, for a statement composed at run time (trail.ts):
 * one per shape (`key`), so `scoped` caches its spliced text as it does a call site's.
 */
export function composedTemplate(key: string, pieces: () => string[]): Strings {
  let template = composed.get(key);
  if (!template) composed.set(key, (template = asTemplate(pieces())));
  return template;
}

export class RunScopeError extends CodedError<'RUN_SCOPE_INVALID'> {
  constructor(message: string) {
    super('RUN_SCOPE_INVALID', message);
    this.name = 'RunScopeError';
  }
}

/** Tenant rows need a tenant id, platform rows must not have one: a programming error otherwise. */
export function checkTenant(scope: RunScope, tenantId: string | null | undefined): string | null {
  if (scope === 'tenant') {
    if (!tenantId) throw new RunScopeError('a tenant run needs tenantId');
    return tenantId;
  }
  if (tenantId) throw new RunScopeError('a platform run has no tenantId');
  return null;
}
