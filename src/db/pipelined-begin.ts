// Transactions whose BEGIN costs no round trip of its own. postgres.js's `sql.begin` waits
// for BEGIN's answer before it runs its scope, so every transaction paid one more wait than it has
// statements. Here BEGIN goes out in the same write as the statements behind it, on a connection
// reserved from the pool, and COMMIT or ROLLBACK ends it. Two forms:
//
// - beginPipelined (the relay's pass, a run's effect transaction): BEGIN and one opening statement,
//   whose rows the work reads before it sends anything else. If BEGIN itself failed (a cancel that hit
//   it, a session left in an aborted transaction), the opening ran on its own, autocommitted, so the
//   caller picks one that is harmless outside a transaction: transaction-local settings (set_config(…,
//   true) is then a no-op), transaction-scoped locks (then held for that statement only), a SELECT …
//   FOR UPDATE. Every other statement waits for nothing more: BEGIN's answer arrives before the opening's.
// - inPipelinedTransaction (every unit of work, src/db/unit-of-work.ts): BEGIN, a guard, the actor
//   context and the work's first statements, whatever they are, in one write. The guard is what makes
//   that safe: if BEGIN failed and left the session outside a transaction, it ends the session before
//   any statement behind it can run and commit on its own (OUTSIDE_TRANSACTION_GUARD).
import type postgres from 'postgres';
import { CodedError } from '../errors/coded-error.ts';
import type { Sql, TxSql } from './client.ts';
import { boundStage, isStageTimeout, passBounds, stageBounds } from './stage-deadline.ts';

/** COMMIT found the transaction aborted (a statement failed that nobody awaited) and rolled it back. */
export class TransactionRolledBack extends CodedError<'TRANSACTION_ROLLED_BACK'> {
  constructor() {
    super('TRANSACTION_ROLLED_BACK', 'the transaction was rolled back at COMMIT: one of its statements had failed, so nothing of it was committed');
    this.name = 'TransactionRolledBack';
  }
}

// The connection is gone (closed, or the server is terminating the session): postgres.js has already
// taken it back (its pool reconnects it for the next user), so it is neither rolled back nor released.
const CONNECTION_LOST = new Set(['CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', '57P01', '57P02', '57P03']);

function lostConnection(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && CONNECTION_LOST.has(code);
}

type Scope<T> = (tx: TxSql) => T | Promise<T>;

/**
 * The transaction-local setting `markTransaction` sets in BEGIN's own simple query (`BEGIN; SET LOCAL
 * …`, a utility statement: nothing to plan, unlike a SELECT set_config): an opening that must do
 * something only inside the transaction (a group's fresh claims) tests it with
 * `current_setting(IN_TRANSACTION_SETTING, true) = 'on'`, and so does OUTSIDE_TRANSACTION_GUARD. If BEGIN fails, the rest
 * of its query string is skipped, so the opening, running on its own, finds it unset. (Comparing
 * statement_timestamp() with transaction_timestamp() does not tell: under the extended protocol an
 * autocommitted statement's Bind and Execute reset the first after its Parse began the transaction.)
 */
export const IN_TRANSACTION_SETTING = 'svc.in_transaction_block';

/** The reserved connection as a transaction: postgres.js's API plus `savepoint` (as `sql.begin`'s, without the uncaught-statement record). */
function asTransaction(reserved: postgres.ReservedSql): { tx: TxSql; atTopLevel: () => boolean } {
  let savepoints = 0;
  let depth = 0;
  const tx = reserved as unknown as TxSql;
  async function savepoint(nameOrScope: string | Scope<unknown>, maybeScope?: Scope<unknown>): Promise<unknown> {
    const scope = (typeof nameOrScope === 'function' ? nameOrScope : maybeScope) as Scope<unknown>;
    const name = `s${savepoints++}${typeof nameOrScope === 'string' ? `_${nameOrScope}` : ''}`;
    await reserved`SAVEPOINT ${reserved(name)}`;
    depth += 1;
    try {
      const x = scope(tx);
      return await (Array.isArray(x) ? Promise.all(x) : x);
    } catch (error) {
      await reserved`ROLLBACK TO SAVEPOINT ${reserved(name)}`;
      throw error;
    } finally {
      depth -= 1;
    }
  }
  Object.defineProperty(reserved, 'savepoint', { value: savepoint, configurable: true });
  return { tx, atTopLevel: () => depth === 0 };
}

/** The transactions of inPipelinedTransaction, with what defers a statement's answer to their COMMIT. */
const deferrals = new WeakMap<object, (statement: Promise<unknown>) => boolean>();

/**
 * Hands `statement` (already sent) to the COMMIT of `tx` instead of waiting for its answer: the work may
 * return at once, and COMMIT goes out in the same write right behind it, so a unit of work that ends with
 * statements nobody reads (a dispatch's inserts) costs one round trip, not two. If the statement fails,
 * nothing of the transaction commits and its error is the one the unit of work throws. False, and the
 * caller must await the statement itself, outside a unit of work (inUnitOfWork) or inside a savepoint,
 * whose scope must see its own failures (a handler's, whose failure rolls back that handler only).
 */
export function deferToCommit(tx: TxSql, statement: Promise<unknown>): boolean {
  const defer = deferrals.get(tx);
  return defer !== undefined && defer(statement);
}

/** The connection a statement ran on, as postgres.js hands it to a query's `onexecute` (what its own `sql.begin` uses). */
interface PoolConnection {
  onclose: ((error: unknown) => void) | null;
  /** Ends the session (postgres.js connection.js): its pending queries fail, the pool reconnects it for its next user. */
  terminate?: () => void;
}

/**
 * How long a transaction marked endWithNextBegin stays open waiting for the pool's next BEGIN to carry
 * its COMMIT, ms. Past it the COMMIT goes out alone. Long enough for a busy worker's next delivery to
 * come by (at 2 ms only a fifth of them rode; at 10 ms four in five), short enough that the locks it
 * holds are let go of soon on a quiet one (bench/results/deferred-commit-and-linger-2026-11-29.md).
 */
export const DEFERRED_END_MS = 10;
/** Bound of a deferred COMMIT sent alone: past it the session is ended, which lets go of its locks as surely. */
const DEFERRED_END_ALONE_MS = 10_000;

/** Transactions whose end may ride with the next BEGIN on their pool (endWithNextBegin): how long it may wait, and the bound of a COMMIT then sent alone. */
const endingWithNextBegin = new WeakMap<object, { waitMs: number; aloneMs: number }>();

/**
 * The transaction `tx` holds nothing that must commit (a delivery whose finish committed with others'
 * in another transaction, finish-coalescer.ts, keeps only its locks), and the statements it sent have
 * answered: its COMMIT need not cost a round trip of its own. Once its work returns, the connection stays
 * reserved, the transaction open, and the next transaction begun on the same pool within DEFERRED_END_MS
 * takes that connection and sends `COMMIT; BEGIN …` in its first write; with none, the COMMIT goes out
 * alone. The locks are held that much longer, never less. A session that dies meanwhile is forgotten
 * (postgres.js reconnects it for its next user), and the server has rolled it back.
 */
export function endWithNextBegin(tx: TxSql, waitMs = DEFERRED_END_MS, aloneMs = DEFERRED_END_ALONE_MS): void {
  endingWithNextBegin.set(tx, { waitMs, aloneMs });
}

/** How many connections of `sql` owe a COMMIT to its next BEGIN now. */
export function deferredEndsOf(sql: Sql): number {
  return deferredEnds.get(sql)?.length ?? 0;
}

/** A connection left in a transaction that only its COMMIT is owed (endWithNextBegin). */
interface Deferred {
  reserved: postgres.ReservedSql;
  connection: PoolConnection;
  timer: NodeJS.Timeout | undefined;
  /** Bound of its COMMIT sent alone, ms. */
  aloneMs: number;
}

/** Per pool, the connections whose COMMIT waits for the next BEGIN, newest last. */
const deferredEnds = new WeakMap<Sql, Deferred[]>();

function forget(sql: Sql, d: Deferred): boolean {
  const list = deferredEnds.get(sql);
  const at = list?.indexOf(d) ?? -1;
  if (at < 0) return false;
  list!.splice(at, 1);
  clearTimeout(d.timer);
  d.connection.onclose = null;
  return true;
}

/** The connection whose COMMIT waits longest is not taken first: the newest, whose backend is warmest (as postgres.js's patched pool). */
function takeDeferred(sql: Sql): Deferred | undefined {
  const d = deferredEnds.get(sql)?.at(-1);
  if (d) forget(sql, d);
  return d;
}

/** The COMMIT alone, bounded; a session that does not answer in time is ended and not given back. */
async function endAlone(d: Deferred): Promise<void> {
  let lost = false;
  d.connection.onclose = () => {
    lost = true;
  };
  try {
    await boundStage('deferred commit', d.reserved`COMMIT`.execute(), undefined, passBounds(d.aloneMs, () => {}));
  } catch {
    // Lost, late, or a session that refused COMMIT: in a state nobody should inherit, so it is ended.
    if (!lost) d.connection.terminate?.();
    lost = true;
  } finally {
    d.connection.onclose = null;
    if (!lost) d.reserved.release();
  }
}

function deferEnd(sql: Sql, reserved: postgres.ReservedSql, connection: PoolConnection, waitMs: number, aloneMs: number): void {
  const d: Deferred = { reserved, connection, timer: undefined, aloneMs };
  let list = deferredEnds.get(sql);
  if (!list) deferredEnds.set(sql, (list = []));
  list.push(d);
  // Closed meanwhile: the server rolled it back, and postgres.js has the connection again.
  connection.onclose = () => void forget(sql, d);
  d.timer = setTimeout(() => {
    if (forget(sql, d)) void endAlone(d);
  }, waitMs);
}

/**
 * The statement a transaction whose work goes out before BEGIN's answer sends right behind BEGIN (and
 * its mark, markTransaction). With BEGIN begun, it does nothing. If BEGIN failed and the session is not
 * in a transaction block (a stray cancel that hit BEGIN itself), it ends its own session: the statements
 * already written behind it would otherwise run one by one, each committed on its own. The session ends
 * within this statement (the Result node checks for interrupts on its next call, before the next
 * message is read), so none of them runs; the caller sees BEGIN's error and the connection closed. No
 * parameters, so it cannot fail before it runs, as a statement with a bad parameter would.
 */
export const OUTSIDE_TRANSACTION_GUARD = `SELECT CASE WHEN current_setting('${IN_TRANSACTION_SETTING}', true) IS DISTINCT FROM 'on' THEN pg_terminate_backend(pg_backend_pid()) END AS outside`;

/**
 * The transaction both forms below run: BEGIN (with its mark when `mark`) and the statements `ahead`
 * builds go out in one write, on a connection reserved from the pool; `body` gets `ready`, which
 * settles with their answers (BEGIN's error first, then the first failed statement's), and decides
 * when to wait for it. COMMIT follows the body; a COMMIT that finds the transaction aborted throws
 * TransactionRolledBack. If the body throws, the transaction is rolled back and the error rethrown.
 *
 * The body may send its last statements without awaiting them, through `beforeCommit`, so COMMIT goes
 * out in the same write right behind them (one round trip, not two). If one of them fails, it aborted
 * the transaction and COMMIT only reports a rollback: its own error is the one thrown. If the connection
 * closes, the transaction fails at once with the connection's error, as postgres.js's `sql.begin` does,
 * even while the body is waiting on something else.
 */
async function transact<T>(
  sql: Sql,
  mark: boolean,
  ahead: (tx: TxSql) => ReadonlyArray<postgres.PendingQuery<postgres.Row[]>>,
  body: (tx: TxSql, ready: Promise<postgres.Row[][]>, beforeCommit: <S>(statement: Promise<S>) => Promise<S>) => Promise<T>,
  deferrable = false,
  /** The body makes only short database waits (a unit of work): bounded by a delivery's stage deadline as a whole. */
  boundBody = false,
): Promise<T> {
  // Inside a delivery every wait below has the delivery's stage deadline (src/db/stage-deadline.ts):
  // a connection that arrives after it goes straight back to the pool.
  const bounds = stageBounds();
  // A connection whose COMMIT is owed (endWithNextBegin) carries it in this transaction's first write.
  const owed = takeDeferred(sql);
  const reserved = owed?.reserved ?? (await boundStage('reserve', sql.reserve(), (late) => late.release(), bounds));
  const { tx, atTopLevel } = asTransaction(reserved);
  let connection: PoolConnection | undefined;
  let lost = false;
  // A wait on the connection outlived the deadline: its session is ended, so whatever it still holds
  // (a BEGIN answered late, a transaction open behind a stalled socket) is rolled back by the server,
  // unless the COMMIT itself had reached it (a wait on COMMIT): then it may still commit, and the next
  // delivery's ledger replays it, never redoes it. The pool reconnects it for its next user. Nothing
  // more is awaited on it.
  let abandoned = false;
  // Its COMMIT is owed to the next BEGIN on the pool (endWithNextBegin): the connection is not released here.
  let deferred = false;
  const bounded = <W>(stage: string, wait: Promise<W>): Promise<W> => {
    if (!bounds) return wait;
    return boundStage(stage, wait, undefined, bounds).catch((error: unknown) => {
      if (isStageTimeout(error) && !abandoned) {
        abandoned = true;
        lost = true;
        connection?.terminate?.();
      }
      throw error;
    });
  };
  let closed!: (error: unknown) => void;
  const closing = new Promise<never>((_, reject) => (closed = reject));
  closing.catch(() => {}); // raced below
  const sentBeforeCommit: Promise<unknown>[] = [];
  const beforeCommit = <S>(statement: Promise<S>): Promise<S> => {
    statement.catch(() => {}); // its failure is reported below, or awaited by `work`'s caller
    sentBeforeCommit.push(statement);
    return statement;
  };
  if (deferrable) {
    deferrals.set(tx, (statement) => {
      if (!atTopLevel()) return false;
      void beforeCommit(statement); // held until COMMIT, which reports its failure
      return true;
    });
  }
  let ready: Promise<postgres.Row[][]> | undefined;
  // `ready` under the deadline of BEGIN (the same promise when nothing bounds this transaction).
  let readyInTime: Promise<postgres.Row[][]> | undefined;
  try {
    // One write: each query is handed to the connection a microtask after it is executed, in order.
    // BEGIN's `onexecute` is how postgres.js's own sql.begin learns its connection and watches it
    // close; returning true lets the next statement follow on the same write.
    // The mark rides in BEGIN's own simple query: if BEGIN fails, it is skipped with it.
    // The owed COMMIT goes first in the same simple query: if it fails, BEGIN is skipped and this
    // transaction fails as after any failed BEGIN (nothing of it runs inside a transaction it thinks it has).
    const begin = `${owed ? 'COMMIT; ' : ''}${mark ? `BEGIN; SET LOCAL ${IN_TRANSACTION_SETTING} = 'on'` : 'BEGIN'}`;
    const begun = reserved
      .unsafe(begin, [], {
        onexecute: (c: PoolConnection) => {
          connection = c;
          c.onclose = (error) => {
            lost = true;
            closed(error);
          };
          return true;
        },
      } as postgres.UnsafeQueryOptions)
      .execute();
    const sent = ahead(tx).map((q) => q.execute());
    ready = Promise.allSettled([begun, ...sent]).then((settled) => {
      for (const s of settled) if (s.status === 'rejected') throw s.reason;
      return settled.slice(1).map((s) => (s as PromiseFulfilledResult<postgres.Row[]>).value);
    });
    ready.catch(() => {}); // awaited by the body, and below
    // BEGIN (and what went out with it) is bounded wherever the body waits for it.
    readyInTime = bounded('begin', ready);
    readyInTime.catch(() => {});
    const working = body(tx, readyInTime, beforeCommit);
    const result = await Promise.race([boundBody && bounds ? bounded('transaction', working) : working, closing]);
    deferrals.delete(tx);
    const endWait = endingWithNextBegin.get(tx);
    if (endWait !== undefined && sentBeforeCommit.length === 0) {
      // Only once BEGIN and the opening have answered (the body read them; a failure takes the rollback path).
      await readyInTime;
      if (connection && !lost) {
        deferEnd(sql, reserved, connection, endWait.waitMs, endWait.aloneMs);
        deferred = true;
        return result;
      }
    }
    // COMMIT goes out now, whether or not BEGIN and the statements ahead have answered (a body that
    // deferred all it sent, deferToCommit, waited for none of them): if BEGIN failed, the guard ends the
    // session before COMMIT runs; if a statement ahead failed, COMMIT only rolls back. Either way their
    // error is the one thrown (below).
    const committing = reserved`COMMIT`.execute();
    committing.catch(() => {}); // awaited below, after `ready`
    const ended = await bounded('commit', readyInTime.then(() => committing));
    if (ended.command !== 'COMMIT') throw new TransactionRolledBack();
    return result;
  } catch (thrown) {
    deferrals.delete(tx);
    // A failed BEGIN or statement ahead is the cause of whatever followed it (statements refused in an
    // aborted transaction, a session the guard ended, a deferred statement refused as aborted).
    // An abandoned connection is awaited no more: its BEGIN or statements may never answer.
    if (abandoned) throw thrown;
    const ahead = readyInTime ? await readyInTime.then(() => null, (aheadError: unknown) => ({ aheadError })) : null;
    if (abandoned) throw thrown;
    const error = ahead ? ahead.aheadError : thrown;
    lost ||= lostConnection(error) || lostConnection(thrown);
    // Also after a failed BEGIN or COMMIT: ROLLBACK outside a transaction only warns, and the
    // connection goes back to the pool idle whatever state the session was left in.
    if (!lost) {
      try {
        await bounded('rollback', reserved`ROLLBACK`.execute());
      } catch (rollbackError) {
        if (abandoned) throw error;
        // A live session that refuses ROLLBACK is in a state nobody should inherit: keep it out of the pool.
        lost = true;
        if (!lostConnection(rollbackError)) throw new CodedError('TRANSACTION_ROLLBACK_FAILED', 'the transaction failed and could not be rolled back; its connection is not reused', { cause: error });
      }
    }
    if (ahead) throw error;
    throw await bounded('commit', Promise.all(sentBeforeCommit)).then(
      () => error,
      (statementError: unknown) => statementError,
    );
  } finally {
    // The mark is this transaction's: a later one on the same connection (the same reserved object) starts without it.
    endingWithNextBegin.delete(tx);
    // A connection whose COMMIT is owed stays reserved, watched by deferEnd.
    if (!deferred) {
      if (connection) connection.onclose = null;
      // A closed connection is already back in postgres.js's hands (it reconnects it for its next user).
      if (!lost) reserved.release();
    }
  }
}

/**
 * Runs `work` in one transaction. `opening` builds the transaction's first statement (harmless outside
 * a transaction, see the header); it goes out with BEGIN, and `work` gets its rows once BEGIN's answer
 * and the opening's are in. Otherwise as `transact` above (COMMIT, rollback, `beforeCommit`, a closed
 * connection).
 */
export async function beginPipelined<O, T>(
  sql: Sql,
  opening: (tx: TxSql) => postgres.PendingQuery<O & postgres.Row[]>,
  work: (tx: TxSql, opened: O & postgres.Row[], beforeCommit: <S>(statement: Promise<S>) => Promise<S>) => Promise<T>,
  options: { markTransaction?: boolean } = {},
): Promise<T> {
  return beginPipelinedAll(sql, (tx) => [opening(tx) as unknown as postgres.PendingQuery<postgres.Row[]>], (tx, [opened], beforeCommit) => work(tx, opened as O & postgres.Row[], beforeCommit), options);
}

/**
 * beginPipelined with several openings, in order, all in BEGIN's write; `work` gets the rows of each.
 * Each must be harmless outside a transaction on its own, as an opening is, and each after the first
 * may read what the ones before it left for the transaction (a setting, a lock), since it runs after
 * them: the relay's fair selections read whether the opening took their outbox's lock.
 */
export async function beginPipelinedAll<T>(
  sql: Sql,
  openings: (tx: TxSql) => ReadonlyArray<postgres.PendingQuery<postgres.Row[]>>,
  work: (tx: TxSql, opened: postgres.Row[][], beforeCommit: <S>(statement: Promise<S>) => Promise<S>) => Promise<T>,
  options: { markTransaction?: boolean } = {},
): Promise<T> {
  return transact(sql, options.markTransaction ?? false, openings, async (tx, ready, beforeCommit) => work(tx, await ready, beforeCommit));
}

/**
 * Runs `work` in one transaction whose BEGIN costs no round trip at all: BEGIN, the outside-transaction
 * guard, the statements `ahead` builds (harmless outside a transaction, as an opening) and the work's
 * first statements go out in one write. The work does not wait for BEGIN's answer, so its statements
 * may be anything: if BEGIN failed, the guard ends the session before any of them runs. If BEGIN or a
 * statement ahead fails, that error is the one thrown (the work's own then only says the transaction
 * was aborted or the connection closed), and nothing commits. The work may hand the answers of its last
 * statements to the COMMIT (deferToCommit), which then goes out in the same write. Otherwise as
 * `transact` above.
 */
export async function inPipelinedTransaction<T>(
  sql: Sql,
  ahead: (tx: TxSql) => ReadonlyArray<postgres.PendingQuery<postgres.Row[]>>,
  work: (tx: TxSql) => Promise<T>,
): Promise<T> {
  return transact(
    sql,
    true,
    // Prepared (extended protocol): parsed and planned once per connection, not once per transaction.
    (tx) => [tx.unsafe(OUTSIDE_TRANSACTION_GUARD, [], { prepare: true, simple: false } as postgres.UnsafeQueryOptions), ...ahead(tx)],
    work,
    true,
    true,
  );
}
