// Cancels the statement an effect transaction is running, from another connection: a release on
// shutdown or an operator's cancel must not wait behind a handler's statement (pg_sleep, a lock wait),
// or the ROLLBACK would queue past the stop budget. Shared by a delivery alone and a group, through
// the attempt that decides when (attempt.ts).
import type { Logger } from 'pino';
import type { Sql } from '../../../db/client.ts';

export interface EffectBackend {
  pid: number;
  /** now() of the effect transaction in epoch microseconds: the cancel hits only that transaction, never a later user of the connection. */
  xactStart: string;
}

/**
 * Cancels the current statement of the effect transaction (on another connection; no-op once it ended).
 * Not awaited by its callers (a release or a cancel goes on regardless): a failure is logged, as the
 * statement of `what` (a released run, a cancelled run, a released group).
 */
export function cancelStatement(sql: Sql, backend: EffectBackend, log: Pick<Logger, 'warn'>, what: string): void {
  sql`SELECT pg_cancel_backend(pid) FROM pg_stat_activity
       WHERE pid = ${backend.pid} AND (extract(epoch FROM xact_start) * 1000000)::int8 = ${backend.xactStart}::text::int8`.then(
    () => {},
    (error: unknown) => log.warn({ err: error }, `could not cancel the statement of ${what}`),
  );
}

/**
 * The effect transaction's backend while it is open (one per transaction: a delivery alone's, or a
 * group's, shared by its members): `cancel` before `open` and after `close` sends nothing, since there
 * is no statement of this transaction to cancel then.
 */
export class EffectStatement {
  readonly #sql: Sql;
  readonly #log: Pick<Logger, 'warn'>;
  #backend: EffectBackend | null = null;

  constructor(sql: Sql, log: Pick<Logger, 'warn'>) {
    this.#sql = sql;
    this.#log = log;
  }

  open(backend: EffectBackend): void {
    this.#backend = backend;
  }

  close(): void {
    this.#backend = null;
  }

  /** Cancels the transaction's current statement, if it is open; `what` names it in the log line of a failure. */
  cancel(what: string): void {
    if (this.#backend) cancelStatement(this.#sql, this.#backend, this.#log, what);
  }
}
