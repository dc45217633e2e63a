// Runs in order per key (`serialKey` in defineTask): whether a delivery's run may execute now, decided in
// the opening statement of its effect transaction (execution.ts), before anything is registered.
//
// Two questions, both answered by the database across every workers process:
// - is another run of the key executing? Each execution holds a transaction-level advisory lock of its
//   key (unit, scope and tenant, and the key's value) for as long as its effect transaction is open,
//   taken here with pg_try_advisory_xact_lock: a held lock means yes, without waiting on it;
// - is an earlier run of the key not final yet (queued, running or retrying: not sent, waiting for a
//   receive, or between attempts)? Dispatch order is the order of the runs' `queued` events (their
//   identity ids, taken in insertion order, also within one bulk statement), found through the partial
//   indexes of sql/work/0024_serial-runs.sql.
// Either way the run waits its turn: its effect transaction rolls back (nothing of it was written), and
// it waits without spending a receive (the consumer's port.waitTurn):
// - near the front of its key's line (SERIAL_WAIT_HERE_AHEAD earlier runs active at most), in the
//   workers process, holding its message but not its unit's slot, until as many runs of the key have
//   passed their turn: a run that succeeds sends NOTIFY svc_serial_turn with its turn's id when it
//   commits (serialTurnNotice), and each process's one LISTEN connection hands it to its waiters
//   (SerialTurns). A notice is a hint; the opening statement decides again. Notices lost (a failed run,
//   the listener reconnecting) cost at most SERIAL_WAIT_HERE_MS before the waiter looks anyway;
// - further back, or when the process holds as many waiters as it may, back in the queue as a copy that
//   keeps its receives, for a second per two earlier runs still active (1 to SERIAL_WAIT_MAX_SECONDS).
// So a run starts within milliseconds of its predecessor's end, and a line of N costs a few looks a
// second, not one per waiting run. A run whose earlier run of the key is stuck waits with it until that
// run is final (the rescuer sends a lost one again).
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { Sql, TxSql } from '../../../db/client.ts';
import { listenOn } from '../../../db/channel-listener.ts';
import { serialKeyOf, type WorkUnit } from '../../define/unit.ts';
import { CodedError } from '../../../errors/coded-error.ts';
import { RUN_TABLE, TRAIL_TABLE, type RunScope } from '../store/scope-tables.ts';

/** The longest a run waiting for its key's earlier runs stays back in the queue, seconds. */
export const SERIAL_WAIT_MAX_SECONDS = 30;
/** A run with at most this many earlier runs of its key active waits in the workers process. */
export const SERIAL_WAIT_HERE_AHEAD = 4;
/** The longest a run waiting in the process goes without looking again, ms (a notice may be lost). */
export const SERIAL_WAIT_HERE_MS = 1_000;
/** Waits in the process one delivery makes at most before it goes back to the queue. */
export const SERIAL_WAITS_HERE_MAX = 30;
/** The channel of turn notices; the payload is the turn's id (serialTurnId). */
export const SERIAL_TURN_CHANNEL = 'svc_serial_turn';

/** The run's turn has not come: an earlier run of its serial key is executing or not final yet. */
export class SerialTurnNotYet extends CodedError<'SERIAL_TURN_NOT_YET'> {
  /** Earlier runs of the key still active (1 when none is but the key's lock is held), at most SERIAL_WAIT_MAX_SECONDS. */
  readonly ahead: number;

  constructor(ahead: number) {
    super('SERIAL_TURN_NOT_YET', 'an earlier run of the same serial key is executing or not final yet: this run waits its turn');
    this.name = 'SerialTurnNotYet';
    this.ahead = ahead;
  }

  /** How long the run waits in the queue before it looks again, seconds: one per two runs ahead. */
  get queueSeconds(): number {
    return Math.min(SERIAL_WAIT_MAX_SECONDS, Math.max(1, Math.ceil(this.ahead / 2)));
  }
}

export interface SerialTurn {
  scope: RunScope;
  /** Numeric tenant id, null for a platform run. */
  tenantId: string | null;
  unit: string;
  runId: string;
  key: string;
}

/** The serial turn a delivery must wait for, or null when its unit has no serial key or its payload no value for it. */
export function serialTurnOf(unit: WorkUnit | undefined, scope: RunScope, tenantId: string | null, runId: string, payload: unknown): SerialTurn | null {
  if (!unit || unit.kind !== 'task' || !unit.serialKey) return null;
  const serial = serialKeyOf(unit.serialKey, payload);
  if (!('key' in serial) || serial.key === undefined) return null;
  return { scope, tenantId, unit: unit.name, runId, key: serial.key };
}

/** The id of a key's turn in notices: its scope, tenant, unit and value, hashed to a fixed length. */
export function serialTurnId(turn: SerialTurn): string {
  return createHash('sha256').update(JSON.stringify([turn.scope, turn.tenantId, turn.unit, turn.key])).digest('base64url');
}

/** The notice a run sends when it passes its turn, in its effect transaction: delivered at its commit, never if it rolls back. */
export function serialTurnNotice(tx: TxSql, turn: SerialTurn) {
  return tx`SELECT pg_notify(${SERIAL_TURN_CHANNEL}, ${serialTurnId(turn)})`;
}

/**
 * The opening statement's column `serial_wait`: 0 when the run may execute now (its key's lock taken for
 * this transaction, no earlier run of the key active), else how many earlier runs of the key are still
 * active (at most SERIAL_WAIT_MAX_SECONDS), or 1 when none is but the key's lock is held. A lock taken by
 * a run that then waits is released by its rollback at once.
 */
export function serialTurnColumn(tx: TxSql, turn: SerialTurn) {
  const trail = tx(TRAIL_TABLE[turn.scope]);
  const runs = tx(RUN_TABLE[turn.scope]);
  const tenant = (alias: string) => (turn.tenantId === null ? tx`` : tx`AND ${tx(alias)}.tenant_id = ${turn.tenantId}::bigint`);
  const space = JSON.stringify(['svc.serial-key', turn.scope, turn.tenantId, turn.unit]);
  // CASE evaluates its branches in order: the lock is tried only when no earlier run is active.
  return tx`(SELECT CASE WHEN ahead.n > 0 THEN ahead.n WHEN pg_try_advisory_xact_lock(hashtext(${space}), hashtext(${turn.key})) THEN 0 ELSE 1 END
       FROM (SELECT count(*)::int AS n FROM (
               SELECT 1 FROM ${trail} e JOIN ${runs} r ON r.run_id = e.run_id
                WHERE e.event = 'queued' AND e.detail ? 'serial_key' AND (e.detail ->> 'serial_key') = ${turn.key} ${tenant('e')}
                  AND e.id < (SELECT m.id FROM ${trail} m
                               WHERE m.run_id = ${turn.runId}::uuid AND m.event = 'queued' AND m.detail ? 'serial_key' ${tenant('m')}
                               ORDER BY m.id LIMIT 1)
                  AND r.name = ${turn.unit} AND r.status IN ('queued', 'running', 'retrying')
                LIMIT ${SERIAL_WAIT_MAX_SECONDS}) earlier) ahead) AS serial_wait`;
}

/** The process's listener of turn notices: a waiting run waits for its key's runs ahead of it to pass. */
export interface SerialTurns {
  /**
   * Resolves `passed` once `ahead` notices of the turn `id` arrived (or the listener came back, when some
   * may have been missed), `timeout` after SERIAL_WAIT_HERE_MS without them, `aborted` when `signal` aborts.
   */
  wait(id: string, ahead: number, signal: AbortSignal): Promise<'passed' | 'timeout' | 'aborted'>;
  stop(): Promise<void>;
}

interface TurnWaiter {
  /** One run of the key passed its turn. */
  passed(): void;
  /** Look again now (notices may have been missed). */
  now(): void;
}

export function listenForSerialTurns(sql: Sql, log: Logger): SerialTurns {
  const waiters = new Map<string, Set<TurnWaiter>>();
  // A (re)listen may have missed notices: every waiter looks again.
  const wakeAll = () => {
    for (const set of [...waiters.values()]) for (const waiter of [...set]) waiter.now();
  };
  const listener = listenOn(
    sql,
    SERIAL_TURN_CHANNEL,
    (id) => waiters.get(id)?.forEach((waiter) => waiter.passed()),
    wakeAll,
    (error) => log.warn({ err: error }, 'could not listen for serial turns yet: a waiting run looks again every second meanwhile'),
  );
  return {
    wait(id, ahead, signal) {
      if (signal.aborted) return Promise.resolve('aborted');
      return new Promise((resolve) => {
        let left = Math.max(1, ahead);
        const done = (value: 'passed' | 'timeout' | 'aborted') => {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          const set = waiters.get(id);
          set?.delete(waiter);
          if (set?.size === 0) waiters.delete(id);
          resolve(value);
        };
        const waiter: TurnWaiter = {
          passed: () => {
            left -= 1;
            if (left <= 0) done('passed');
          },
          now: () => done('passed'),
        };
        const onAbort = () => done('aborted');
        const timer = setTimeout(() => done('timeout'), SERIAL_WAIT_HERE_MS);
        signal.addEventListener('abort', onAbort, { once: true });
        let set = waiters.get(id);
        if (!set) waiters.set(id, (set = new Set()));
        set.add(waiter);
      });
    },
    async stop() {
      // Each waiter still waiting looks again at once (and finds the process stopping).
      wakeAll();
      waiters.clear();
      await listener.stop();
    },
  };
}
