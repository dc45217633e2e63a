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
// its message goes back to the queue for SERIAL_WAIT_SECONDS keeping its receives (the consumer's
// port.waitTurn), so a long queue of one key spends no receive on waiting. A run whose earlier run of
// the key is stuck waits with it until that run is final (the rescuer sends a lost one again).
import type { TxSql } from '../../../db/client.ts';
import { serialKeyOf, type WorkUnit } from '../../define/unit.ts';
import { CodedError } from '../../../errors/coded-error.ts';
import { RUN_TABLE, TRAIL_TABLE, type RunScope } from '../store/scope-tables.ts';

/** How long a run waiting for its key's earlier runs stays back in the queue, seconds. */
export const SERIAL_WAIT_SECONDS = 1;

/** The run's turn has not come: an earlier run of its serial key is executing or not final yet. */
export class SerialTurnNotYet extends CodedError<'SERIAL_TURN_NOT_YET'> {
  constructor() {
    super('SERIAL_TURN_NOT_YET', 'an earlier run of the same serial key is executing or not final yet: this run waits its turn');
    this.name = 'SerialTurnNotYet';
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

/**
 * The opening statement's column `serial_turn`: true when the run may execute now (its key's lock taken
 * for this transaction, no earlier run of the key active). A lock taken by a run that then waits is
 * released by its transaction's rollback at once.
 */
export function serialTurnColumn(tx: TxSql, turn: SerialTurn) {
  const trail = tx(TRAIL_TABLE[turn.scope]);
  const runs = tx(RUN_TABLE[turn.scope]);
  const tenant = (alias: string) => (turn.tenantId === null ? tx`` : tx`AND ${tx(alias)}.tenant_id = ${turn.tenantId}::bigint`);
  const space = JSON.stringify(['svc.serial-key', turn.scope, turn.tenantId, turn.unit]);
  return tx`(NOT EXISTS (
      SELECT 1 FROM ${trail} e JOIN ${runs} r ON r.run_id = e.run_id
       WHERE e.event = 'queued' AND e.detail ? 'serial_key' AND (e.detail ->> 'serial_key') = ${turn.key} ${tenant('e')}
         AND e.id < (SELECT m.id FROM ${trail} m
                      WHERE m.run_id = ${turn.runId}::uuid AND m.event = 'queued' AND m.detail ? 'serial_key' ${tenant('m')}
                      ORDER BY m.id LIMIT 1)
         AND r.name = ${turn.unit} AND r.status IN ('queued', 'running', 'retrying'))
    AND pg_try_advisory_xact_lock(hashtext(${space}), hashtext(${turn.key}))) AS serial_turn`;
}
