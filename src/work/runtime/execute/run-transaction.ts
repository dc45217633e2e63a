// The effect transaction as a handler sees it (`run.transaction`), closed the moment its attempt ends.
//
// postgres.js keeps a `sql.begin` scope's `tx` usable after the scope has ended: a late statement goes
// to the same connection, which is back in the pool by then, so it autocommits or runs inside
// whatever transaction holds that connection now (another run's, under its tenant settings). A handler
// that ignores run.signal (a sleep, an HTTP call) and writes after its timeout would commit a second
// effect. The guard refuses every use once the attempt ended (commit, rollback, timeout, release,
// cancellation); the refused statement never reaches the database.
import type { TxSql } from '../../../db/client.ts';
import { CodedError } from '../../../errors/coded-error.ts';

export class RunTransactionClosed extends CodedError<'RUN_TRANSACTION_CLOSED'> {
  constructor() {
    super(
      'RUN_TRANSACTION_CLOSED',
      "the run's attempt has ended (committed, rolled back, timed out or released): its transaction takes no more statements; honour run.signal",
    );
    this.name = 'RunTransactionClosed';
  }
}

export interface RunTransactionGuard {
  /** What the handler gets as `run.transaction`. */
  readonly tx: TxSql;
  readonly open: boolean;
  /** Ends the handler's use of the transaction; idempotent. */
  close(): void;
}

/**
 * A query-shaped object that rejects with RunTransactionClosed when awaited: lazy like a postgres.js
 * query, so a refused call the handler never awaits raises no unhandled rejection.
 */
function refusedQuery(): PromiseLike<never> & { catch: Promise<never>['catch']; finally: Promise<never>['finally'] } {
  const rejected = () => Promise.reject(new RunTransactionClosed());
  return {
    then: (onFulfilled, onRejected) => rejected().then(onFulfilled, onRejected),
    catch: (onRejected) => rejected().catch(onRejected),
    finally: (onFinally) => rejected().finally(onFinally),
  };
}

function isTemplateCall(args: unknown[]): boolean {
  const first = args[0] as { raw?: unknown } | undefined;
  return Array.isArray(first) && Array.isArray(first.raw);
}

/** Members of a postgres.js transaction that send a statement (the rest build values and identifiers). */
const SENDING = new Set<PropertyKey>(['unsafe', 'file', 'savepoint', 'notify', 'prepare', 'begin', 'reserve']);

function guard(tx: TxSql, isOpen: () => boolean, sending: () => void): TxSql {
  return new Proxy(tx, {
    apply(target, thisArg, args: unknown[]) {
      // tx`...` is a statement; tx('name') or tx(rows, ...columns) only builds a fragment.
      if (isTemplateCall(args)) {
        if (!isOpen()) return refusedQuery();
        sending();
      }
      return Reflect.apply(target as unknown as (...a: unknown[]) => unknown, thisArg, args);
    },
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function' || !SENDING.has(property)) return value;
      const member = value as (...a: unknown[]) => unknown;
      return (...args: unknown[]) => {
        if (!isOpen()) return refusedQuery();
        sending();
        if (property === 'savepoint') {
          // The savepoint's own `sql` is guarded by the same flag.
          const fnAt = typeof args[0] === 'function' ? 0 : 1;
          const fn = args[fnAt] as ((sp: TxSql) => unknown) | undefined;
          if (typeof fn === 'function') args[fnAt] = (sp: TxSql) => fn(guard(sp, isOpen, sending));
        }
        return member.apply(target, args);
      };
    },
  });
}

/**
 * `beforeFirstStatement` runs once, synchronously, just before the handler's first statement is built:
 * a group member opens its savepoint there (group-execution.ts), so a handler that sends nothing pays
 * for none. Statements on one connection run in the order they are sent, so the savepoint comes first.
 */
export function guardRunTransaction(tx: TxSql, beforeFirstStatement?: () => void): RunTransactionGuard {
  let open = true;
  let sent = false;
  const isOpen = () => open;
  const sending = () => {
    if (sent) return;
    sent = true;
    beforeFirstStatement?.();
  };
  return {
    tx: guard(tx, isOpen, sending),
    get open() {
      return open;
    },
    close() {
      open = false;
    },
  };
}
