// A statement handed to a pinned connection (sql.reserve(), an open transaction) after its backend died
// must reject, never end the process or wait forever. postgres.js 3.4.9 did either (its issue #1208):
// it wrote to the null socket of a closed connection from a timer (an uncaught TypeError, which took a
// worker down when PostgreSQL restarted under it) or left a statement sent between the socket's error
// and its close unsettled. patches/postgres+3.4.9.patch fixes both; this test fails without it.
// The scenario runs in a process of its own (test/fixtures/closed-connection.ts), since the failure it
// guards against ends the process.
//
// A backend terminated while it ran a statement sends its FATAL error, then closes. postgres.js kept that
// error and rejected the first statement of the NEXT connection with it (its issue #1223): after any
// backend kill, one innocent statement failed with `57P01`. The patch hands the error to the statement it
// interrupted; the second test fails without it.
//
// A reserved connection (every transaction of this project, src/db/pipelined-begin.ts) holds back the
// statements handed to it while it is busy, and sent them once it was free; if it closed first, they
// waited for ever (a unit of work whose context went out behind a statement being described hung, its
// delivery with it). Patched, they reject with `CONNECTION_CLOSED`; the third test fails without it.
//
// A new connection first reads the server's array types, and postgres.js started that read without
// waiting on it: a connection that died during it (a database restart) left a rejection nobody handled,
// which ends a Node process. And a connection that closed while it started up kept the backend's error:
// its successor failed its first statement with it and never read the types, so arrays came back as text
// on it. Patched, the read's failure is left to the connection's error handling and the successor starts
// clean; the fourth test fails without it (the process ends; the statement fails; `{a,b}` for an array).
//
// When a reserved connection (or one of postgres.js's own transactions) closes, the pool reconnects that
// same connection for its next user, while the code that held it may still be running (a handler that
// has not noticed, the rest of a transaction's scope). Its later statements then ran on the next user's
// session, inside that user's transaction (a COMMIT of the dead transaction committed someone else's),
// and its release handed the connection out a second time. Patched, a reservation or transaction whose
// connection closed refuses every later statement with `CONNECTION_CLOSED` and its release does nothing;
// the fifth test fails without it.
//
// A reserve waiting for the pool when a connection closed was taken off the pool's queue and handed to
// the reconnecting connection as its first query, then dropped while that connection read the array
// types: the caller's sql.reserve() never settled (every transaction here starts with one). Patched, the
// reserve stays in the queue until the connection is up; the sixth test fails without it.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql } from '../../src/db/client.ts';
import { runNodeProcess } from '../support/node-process.ts';
import { freshDatabase, type TestDatabase } from '../support/services.ts';

const FIXTURE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'closed-connection.ts');
const TYPE_FETCH_FIXTURE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'type-fetch-drop.ts');

let db: TestDatabase;
beforeAll(async () => {
  db = await freshDatabase({ max: 1 });
});
afterAll(async () => {
  await db?.drop();
});

/** A pool of one connection, that connection reserved, and the pid of its backend. */
async function reservedAlone() {
  const sql = createSql(db.url, { max: 1, applicationName: 'closed-connection-test' });
  const reserved = await sql.reserve();
  const [{ pid }] = (await reserved<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
  return { sql, reserved, pid };
}

describe('a PostgreSQL connection whose backend died', () => {
  it('rejects every later statement on a reserved connection and in a transaction, keeps the process alive and the pool usable', async () => {
    const { code, stdout, stderr } = await runNodeProcess([FIXTURE, db.url]);
    expect(stdout, stderr).not.toContain('uncaught');
    expect(code, stderr).toBe(0);
    const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as {
      reserved: { first: string; second: string };
      transaction: { transaction: string; failed: string; late: string };
      poolAfterwards: string;
    };
    // The first statement may meet the socket's own error (ECONNRESET) or the closed connection.
    expect(result.reserved.first).toMatch(/^rejected (CONNECTION_CLOSED|ECONNRESET)$/);
    expect(result.reserved.second).toBe('rejected CONNECTION_CLOSED');
    expect(result.transaction.transaction).toBe('rejected CONNECTION_CLOSED');
    expect(result.transaction.failed).toMatch(/^rejected (CONNECTION_CLOSED|ECONNRESET)$/);
    expect(result.transaction.late).toBe('rejected CONNECTION_CLOSED');
    expect(result.poolAfterwards).toBe('ok');
  });

  it('gives a terminated backend’s error to the statement it interrupted, and the next connection’s first statement succeeds', async () => {
    const sql = createSql(db.url, { max: 1, applicationName: 'closed-connection-test' });
    try {
      const [{ pid }] = (await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
      const sleeping = sql`SELECT pg_sleep(30)`.then(
        () => 'returned',
        (error: { code?: string }) => `rejected ${error.code}`,
      );
      // Terminated from another session while the statement runs (waits until it does).
      await expect
        .poll(async () => (await db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ${pid} AND state = 'active'`)[0]!.n, { timeout: 10_000 })
        .toBe(1);
      await db.sql`SELECT pg_terminate_backend(${pid})`;
      expect(await sleeping).toBe('rejected 57P01');
      // The pool reconnects its only connection; its first statement is not handed the old backend's error.
      const [{ ok }] = (await sql<{ ok: number }[]>`SELECT 1 AS ok`) as unknown as [{ ok: number }];
      expect(ok).toBe(1);
    } finally {
      await sql.end({ timeout: 5 });
    }
  });

  it('rejects the statements a reserved connection held back while busy when it closes, instead of leaving them waiting', async () => {
    const { sql, reserved, pid } = await reservedAlone();
    try {
      const outcome = (q: Promise<unknown>) =>
        q.then(
          () => 'returned',
          (error: { code?: string }) => `rejected ${error.code}`,
        );
      // A statement the connection has not described yet goes out alone: the one behind it is held back.
      const sleeping = outcome(reserved`SELECT pg_sleep(${30})`);
      const behind = outcome(reserved`SELECT ${'held back'}::text AS note`);
      await expect
        .poll(async () => (await db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ${pid} AND state = 'active'`)[0]!.n, { timeout: 10_000 })
        .toBe(1);
      await db.sql`SELECT pg_terminate_backend(${pid})`;
      // Its FATAL, or on a busy machine the socket's reset read first: either way the statement failed.
      expect(await sleeping).toMatch(/^rejected (57P01|ECONNRESET)$/);
      // Bounded only so that the unpatched library fails here instead of hanging the file.
      const unsettled = new Promise<string>((resolve) => setTimeout(() => resolve('still waiting'), 10_000).unref());
      expect(await Promise.race([behind, unsettled])).toBe('rejected CONNECTION_CLOSED');
      // Not released: a reservation whose connection closed is over (postgres.js reconnects the connection).
      const [{ ok }] = (await sql<{ ok: number }[]>`SELECT 1 AS ok`) as unknown as [{ ok: number }];
      expect(ok).toBe(1);
    } finally {
      await sql.end({ timeout: 5 });
    }
  });

  it('never runs a statement of a reservation or transaction whose connection died on the session that replaced it, nor hands that connection out twice', async () => {
    const sql = createSql(db.url, { max: 1, applicationName: 'closed-connection-test' });
    const outcome = (q: Promise<unknown>) =>
      q.then(
        (rows) => `returned ${JSON.stringify(rows)}`,
        (error: { code?: string }) => `rejected ${error.code}`,
      );
    try {
      // A reservation whose backend dies: postgres.js reconnects the same connection for the next user.
      const first = await sql.reserve();
      const [{ pid }] = (await first<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
      await db.sql`SELECT pg_terminate_backend(${pid})`;
      await expect.poll(() => outcome(first`SELECT 1`), { timeout: 10_000 }).toMatch(/^rejected /);
      const second = await sql.reserve();
      const [{ pid: next }] = (await second<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
      expect(next).not.toBe(pid);
      // The first holder's late statement (a handler's, a COMMIT) must not run on the second's session.
      expect(await outcome(first`SELECT pg_backend_pid() AS pid`)).toBe('rejected CONNECTION_CLOSED');
      // Nor may its release hand the connection to a third user while the second holds it.
      first.release();
      const third = sql.reserve();
      const turn = await Promise.race([third.then(() => 'reserved'), new Promise((resolve) => setTimeout(() => resolve('waiting'), 500))]);
      expect(turn).toBe('waiting');
      second.release();
      (await third).release();

      // The same for postgres.js's own transaction: its scope goes on after the connection died.
      let scopePid = 0;
      let resume!: () => void;
      const resumed = new Promise<void>((resolve) => (resume = resolve));
      let late = 'not sent';
      const began = outcome(
        sql.begin(async (tx) => {
          [{ pid: scopePid }] = (await tx<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
          await resumed;
          late = await outcome(tx`SELECT pg_backend_pid() AS pid`);
        }),
      );
      await expect.poll(() => scopePid, { timeout: 10_000 }).not.toBe(0);
      await db.sql`SELECT pg_terminate_backend(${scopePid})`;
      expect(await began).toMatch(/^rejected (CONNECTION_CLOSED|57P01)$/);
      const other = await sql.reserve();
      await other`BEGIN`;
      await other`CREATE TEMP TABLE closed_connection_probe (x int) ON COMMIT DROP`;
      resume();
      await expect.poll(() => late, { timeout: 10_000 }).not.toBe('not sent');
      expect(late).toBe('rejected CONNECTION_CLOSED');
      // The other user's transaction is still its own: nothing committed or rolled it back.
      expect(await outcome(other`SELECT count(*)::int AS n FROM closed_connection_probe`)).toBe('returned [{"n":0}]');
      await other`ROLLBACK`;
      other.release();
    } finally {
      await sql.end({ timeout: 5 });
    }
  });

  it('answers a reserve that was waiting for the pool when a reserved connection closed', async () => {
    const { sql, pid } = await reservedAlone();
    try {
      // The pool's only connection is reserved: this one waits in the pool's queue.
      const waiting = sql.reserve();
      await db.sql`SELECT pg_terminate_backend(${pid})`;
      // Bounded only so that the unpatched library fails here instead of hanging the file.
      const unsettled = new Promise<string>((resolve) => setTimeout(() => resolve('still waiting'), 10_000).unref());
      const turn = await Promise.race([waiting.then(() => 'reserved'), unsettled]);
      expect(turn).toBe('reserved');
      const reserved = await waiting;
      const [{ ok }] = (await reserved<{ ok: number }[]>`SELECT 1 AS ok`) as unknown as [{ ok: number }];
      expect(ok).toBe(1);
      reserved.release();
    } finally {
      await sql.end({ timeout: 5 });
    }
  });

  it.each(['fatal', 'drop'])('keeps the process alive when a new connection dies while it reads the array types (%s), and the pool works after', async (mode) => {
    const { code, stdout, stderr } = await runNodeProcess([TYPE_FETCH_FIXTURE, db.url, mode]);
    expect(stdout, stderr).not.toContain('uncaught');
    expect(code, stderr).toBe(0);
    const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as { dropped: number; statement: string; list: unknown };
    expect(result.dropped).toBe(1);
    // The statement waiting for the connection never ran: it goes out on the next connection.
    expect(result.statement).toBe('ok');
    expect(result.list).toEqual(['a', 'b']);
  });
});
