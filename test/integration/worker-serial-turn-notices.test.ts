// The hand-off of a serial key's turn (src/work/runtime/execute/serial-turn.ts): a run that succeeds
// sends NOTIFY svc_serial_turn with its turn's id in its effect transaction, and each workers process's
// listener hands it to the runs waiting there for that key, each once as many runs as were ahead of it
// have passed. Real PostgreSQL (LISTEN/NOTIFY).
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenForSerialTurns, serialTurnId, serialTurnNotice, type SerialTurn, type SerialTurns } from '../../src/work/runtime/execute/serial-turn.ts';
import { freshDatabase, type TestDatabase } from '../support/services.ts';
import { waitFor } from '../support/wait-for.ts';

let db: TestDatabase;
let turns: SerialTurns;
const turn: SerialTurn = { scope: 'tenant', tenantId: '7', unit: 'billing.sync_account', runId: '00000000-0000-0000-0000-000000000000', key: 'acct-1' };
const id = serialTurnId(turn);

beforeAll(async () => {
  db = await freshDatabase();
  turns = listenForSerialTurns(db.sql, pino({ level: 'silent' }));
  // The listener's connection is up once a notice reaches a waiter (of a key of its own: a notice that
  // arrives after its waiter was woken by the LISTEN itself wakes no waiter of the tests).
  const ready: SerialTurn = { ...turn, key: 'listening' };
  const never = new AbortController();
  await waitFor(
    async () => {
      const probe = turns.wait(serialTurnId(ready), 1, never.signal);
      await db.sql.begin((tx) => serialTurnNotice(tx, ready));
      return (await probe) === 'passed';
    },
    20_000,
    { what: 'the serial turn listener' },
  );
});
afterAll(async () => {
  await turns?.stop();
  await db?.drop();
});

/** One run of the key passes its turn: the notice goes out with its commit. */
const pass = () => db.sql.begin((tx) => serialTurnNotice(tx, turn));

describe('serial turn notices', () => {
  it('a waiter is handed its turn once as many runs as were ahead of it have passed, not before', async () => {
    const never = new AbortController();
    const second = turns.wait(id, 2, never.signal);
    const settled: string[] = [];
    void second.then((how) => settled.push(how));
    const probe = turns.wait(id, 1, never.signal);
    await pass();
    expect(await probe).toBe('passed'); // the first notice has arrived...
    expect(settled).toEqual([]); // ...and the waiter with two runs ahead still waits
    await pass();
    expect(await second).toBe('passed');
  });

  it('a notice of a rolled-back transaction never arrives, and of another key is not this one: the waiter looks again after a second', async () => {
    const never = new AbortController();
    const waiting = turns.wait(id, 1, never.signal);
    await db.sql
      .begin(async (tx) => {
        await serialTurnNotice(tx, turn);
        throw new Error('rolled back');
      })
      .catch(() => {});
    await db.sql.begin((tx) => serialTurnNotice(tx, { ...turn, key: 'acct-2' }));
    await db.sql.begin((tx) => serialTurnNotice(tx, { ...turn, tenantId: '8' }));
    expect(await waiting).toBe('timeout');
  });

  it('a stop or an abort ends a wait at once', async () => {
    const abort = new AbortController();
    const waiting = turns.wait(id, 3, abort.signal);
    abort.abort();
    expect(await waiting).toBe('aborted');
    const other = listenForSerialTurns(db.sql, pino({ level: 'silent' }));
    const stopping = other.wait(id, 3, new AbortController().signal);
    await other.stop();
    expect(await stopping).toBe('passed');
  });
});
