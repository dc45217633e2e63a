// beginPipelined (src/db/pipelined-begin.ts) on real PostgreSQL: BEGIN goes out in the same write as
// the transaction's opening statement, and the transaction keeps every property of postgres.js's
// sql.begin that the delivery path relies on: one transaction, COMMIT, ROLLBACK on a throw,
// savepoints, a connection back in the pool, and a connection that died never handed out again.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../src/db/client.ts';
import { beginPipelined, deferredEndsOf, endWithNextBegin, IN_TRANSACTION_SETTING } from '../../src/db/pipelined-begin.ts';
import { passBounds, StageTimedOut, withStageBounds } from '../../src/db/stage-deadline.ts';
import { waitFor } from '../support/wait-for.ts';
import { freshDatabase, type TestDatabase } from '../support/services.ts';
import { recordingProxy as proxyTo } from '../support/recording-proxy.ts';

let db: TestDatabase;

beforeAll(async () => {
  db = await freshDatabase({ max: 2 });
  await db.sql`CREATE TABLE pb_writes (note text NOT NULL)`;
});
afterAll(async () => {
  await db?.drop();
});

/** A pool of ONE connection: a connection not given back, or given back broken, fails the next statement. */
async function withOneConnection<T>(use: (sql: Sql) => Promise<T>, url = db.url): Promise<T> {
  const sql = createSql(url, { max: 1, applicationName: 'pipelined-begin-test' });
  try {
    return await use(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** A recording proxy in front of this file's database. */
const recordingProxy = () => proxyTo(db.url);

const notes = async () => (await db.sql<{ note: string }[]>`SELECT note FROM pb_writes ORDER BY note`).map((r) => r.note);

describe('beginPipelined', () => {
  it('sends BEGIN in the same write as the opening statement (sql.begin waits for BEGIN’s answer first)', async () => {
    const proxy = await recordingProxy();
    try {
      const marker = await withOneConnection(
        (sql) =>
          beginPipelined(
            sql,
            (tx) => tx<{ m: string }[]>`SELECT 'pipelined-opening-marker'::text AS m`,
            async (_tx, [opened]) => opened!.m,
          ),
        proxy.url,
      );
      expect(marker).toBe('pipelined-opening-marker');
      const withBegin = proxy.chunks.filter((c) => c.includes('BEGIN'));
      expect(withBegin).toHaveLength(1);
      expect(withBegin[0]).toContain('pipelined-opening-marker');
    } finally {
      await proxy.close();
    }
  });

  it('markTransaction: the opening sees the transaction marked, in the same write as BEGIN; a mark made outside a transaction block is gone by the next statement', async () => {
    const proxy = await recordingProxy();
    const marked = (tx: Sql) => tx<{ on: boolean }[]>`SELECT current_setting(${IN_TRANSACTION_SETTING}, true) IS NOT DISTINCT FROM 'on' AS on`;
    try {
      const [withMark, withoutMark] = await withOneConnection(
        async (sql) => [
          await beginPipelined(sql, (tx) => marked(tx as unknown as Sql), async (_tx, [o]) => o!.on, { markTransaction: true }),
          await beginPipelined(sql, (tx) => marked(tx as unknown as Sql), async (_tx, [o]) => o!.on),
        ],
        proxy.url,
      );
      expect([withMark, withoutMark]).toEqual([true, false]);
      // The mark went out with BEGIN and the opening: still one round trip.
      const begins = proxy.chunks.filter((c) => c.includes('BEGIN'));
      expect(begins).toHaveLength(2);
      expect(begins[0]).toContain(`BEGIN; SET LOCAL ${IN_TRANSACTION_SETTING} = 'on'`);
      expect(begins[0]).toContain('IS NOT DISTINCT FROM');
    } finally {
      await proxy.close();
    }
    // A mark made as a transaction of its own (as the opening is when BEGIN failed) is gone by the next statement.
    const after = await withOneConnection(async (sql) => {
      await sql`SELECT set_config(${IN_TRANSACTION_SETTING}, 'on', true)`;
      return (await marked(sql))[0]!.on;
    });
    expect(after).toBe(false);
  });

  it('runs the opening and the work in one transaction and commits it', async () => {
    const seen = await withOneConnection((sql) =>
      beginPipelined(
        sql,
        (tx) => tx<{ xid: string; local: string }[]>`SELECT pg_current_xact_id()::text AS xid, set_config('app.process', 'pb-test', true) AS local`,
        async (tx, [opened]) => {
          const [row] = await tx<{ xid: string; process: string }[]>`
            INSERT INTO pb_writes (note) VALUES ('committed') RETURNING pg_current_xact_id()::text AS xid, current_setting('app.process') AS process`;
          return { same: row!.xid === opened!.xid, process: row!.process };
        },
      ),
    );
    expect(seen).toEqual({ same: true, process: 'pb-test' });
    expect(await notes()).toContain('committed');
  });

  it('rolls back when the work throws, rethrows its error and gives the connection back idle', async () => {
    await withOneConnection(async (sql) => {
      const failed = await beginPipelined(
        sql,
        (tx) => tx`SELECT 1`,
        async (tx) => {
          await tx`INSERT INTO pb_writes (note) VALUES ('thrown-away')`;
          throw new Error('work refused');
        },
      ).catch((error: unknown) => error as Error);
      expect(failed).toBeInstanceOf(Error);
      expect(failed.message).toBe('work refused');
      // The pool's only connection is back, outside the transaction that wrote (it had an xid).
      const [state] = await sql<{ xid: string | null }[]>`SELECT pg_current_xact_id_if_assigned()::text AS xid`;
      expect(state!.xid).toBeNull();
    });
    expect(await notes()).not.toContain('thrown-away');
  });

  it('refuses to report a commit when an unawaited statement aborted the transaction (TRANSACTION_ROLLED_BACK)', async () => {
    const failed = await withOneConnection((sql) =>
      beginPipelined(
        sql,
        (tx) => tx`SELECT 1`,
        async (tx) => {
          await tx`INSERT INTO pb_writes (note) VALUES ('before-the-failure')`;
          tx`SELECT 1 / 0`.catch(() => {}); // nobody awaits it: COMMIT is the first to learn
          return 'returned';
        },
      ).catch((error: unknown) => error as { code?: string }),
    );
    expect(failed).toMatchObject({ code: 'TRANSACTION_ROLLED_BACK' });
    expect(await notes()).not.toContain('before-the-failure');
  });

  it('sends a statement passed to beforeCommit in the same write as COMMIT, and reports its own error when it fails', async () => {
    const proxy = await recordingProxy();
    try {
      await withOneConnection(async (sql) => {
        const ok = await beginPipelined(
          sql,
          (tx) => tx`SELECT 1`,
          async (tx, _opened, beforeCommit) => {
            void beforeCommit(tx`INSERT INTO pb_writes (note) VALUES ('before-commit-marker')`.execute());
            return 'sent';
          },
        );
        expect(ok).toBe('sent');
        const failed = await beginPipelined(
          sql,
          (tx) => tx`SELECT 1`,
          async (tx, _opened, beforeCommit) => {
            await tx`INSERT INTO pb_writes (note) VALUES ('before-a-failed-finish')`;
            void beforeCommit(tx`SELECT 1 / 0`.execute());
            return 'returned';
          },
        ).catch((error: unknown) => error as { code?: string });
        // division_by_zero, not TRANSACTION_ROLLED_BACK: the statement's own error.
        expect(failed).toMatchObject({ code: '22012' });
      }, proxy.url);
      const withMarker = proxy.chunks.filter((c) => c.includes('before-commit-marker'));
      expect(withMarker).toHaveLength(1);
      expect(withMarker[0]).toContain('COMMIT');
    } finally {
      await proxy.close();
    }
    const all = await notes();
    expect(all).toContain('before-commit-marker');
    expect(all).not.toContain('before-a-failed-finish');
  });

  it('a BEGIN the session refuses fails the transaction before the work runs, and the connection is cleaned', async () => {
    await withOneConnection(async (sql) => {
      // Leave the pool's only connection inside an aborted transaction: BEGIN there fails (25P02).
      const reserved = await sql.reserve();
      await reserved.unsafe('BEGIN');
      await reserved`SELECT 1 / 0`.catch(() => {});
      reserved.release();
      let workRan = false;
      const failed = await beginPipelined(
        sql,
        (tx) => tx`SELECT 1`,
        async () => {
          workRan = true;
        },
      ).catch((error: unknown) => error as { code?: string });
      expect(failed).toMatchObject({ code: '25P02' });
      expect(workRan).toBe(false);
      // The ROLLBACK after the failure ended the stale transaction: the connection works again.
      await sql`INSERT INTO pb_writes (note) VALUES ('after-refused-begin')`;
    });
    expect(await notes()).toContain('after-refused-begin');
  });

  it('rolls a failed savepoint back alone and commits the rest (named and unnamed savepoints)', async () => {
    await withOneConnection((sql) =>
      beginPipelined(
        sql,
        (tx) => tx`SELECT 1`,
        async (tx) => {
          await tx`INSERT INTO pb_writes (note) VALUES ('outer')`;
          await tx
            .savepoint('named', async (sp) => {
              await sp`INSERT INTO pb_writes (note) VALUES ('inner-rolled-back')`;
              throw new Error('inner refused');
            })
            .catch(() => {});
          const kept = await tx.savepoint(async (sp) => {
            await sp`INSERT INTO pb_writes (note) VALUES ('inner-kept')`;
            return 'kept';
          });
          expect(kept).toBe('kept');
        },
      ),
    );
    const all = await notes();
    expect(all).toEqual(expect.arrayContaining(['outer', 'inner-kept']));
    expect(all).not.toContain('inner-rolled-back');
  });

  it('a connection that dies while the work waits fails the transaction at once, and is not given back to the pool', async () => {
    await withOneConnection(async (sql) => {
      const failed = await beginPipelined(
        sql,
        (tx) => tx<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`,
        async (tx, [opened]) => {
          await tx`INSERT INTO pb_writes (note) VALUES ('lost-with-its-connection')`;
          // Terminated from another session while this work waits on something that is not the database.
          // (The close may be seen before this statement's own answer: the transaction fails right then.)
          await db.sql`SELECT pg_terminate_backend(${opened!.pid})`;
          await new Promise<never>(() => {});
        },
      ).catch((error: unknown) => error as { code?: string });
      expect(failed).toMatchObject({ code: 'CONNECTION_CLOSED' });
      // The pool's only connection was not released while closed: postgres.js reconnects it.
      const [row] = await sql<{ ok: number }[]>`SELECT 1 AS ok`;
      expect(row!.ok).toBe(1);
    });
    expect(await notes()).not.toContain('lost-with-its-connection');
  });
});

describe('endWithNextBegin: a transaction that owes only its COMMIT', () => {
  const LOCK = 7_301_245;
  const lockHeld = async () =>
    (await db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = ${LOCK} AND granted`)[0]!.n === 1;
  /** A transaction that takes LOCK and owes its COMMIT for `waitMs` (sent alone, bounded by `aloneMs`); its backend's pid. */
  const owing = (sql: Sql, waitMs: number, aloneMs?: number) =>
    beginPipelined(
      sql,
      (tx) => tx<{ pid: number; locked: boolean }[]>`SELECT pg_backend_pid() AS pid, pg_try_advisory_xact_lock(${LOCK}) AS locked`,
      async (tx, [opened]) => {
        expect(opened!.locked).toBe(true);
        endWithNextBegin(tx, waitMs, aloneMs);
        return opened!.pid;
      },
    );

  it('holds its locks until the next BEGIN on the pool, which carries its COMMIT in the same write: no round trip of its own', async () => {
    const proxy = await recordingProxy();
    try {
      await withOneConnection(async (sql) => {
        const pid = await owing(sql, 60_000);
        expect(deferredEndsOf(sql)).toBe(1);
        expect(await lockHeld()).toBe(true);
        const next = await beginPipelined(sql, (tx) => tx<{ pid: number; m: string }[]>`SELECT pg_backend_pid() AS pid, 'next-opening-marker'::text AS m`, async (_tx, [o]) => o!);
        expect(next).toEqual({ pid, m: 'next-opening-marker' });
        expect(deferredEndsOf(sql)).toBe(0);
        expect(await lockHeld()).toBe(false);
      }, proxy.url);
      // The owed COMMIT never went out alone: it is the first thing in the next BEGIN's write.
      const commits = proxy.chunks.filter((c) => c.includes('COMMIT'));
      expect(commits.length).toBeGreaterThanOrEqual(2); // the carried one, then the next transaction's own
      expect(commits[0]).toContain('COMMIT; BEGIN');
      expect(commits[0]).toContain('next-opening-marker');
    } finally {
      await proxy.close();
    }
  });

  it('with no BEGIN within its wait, the COMMIT goes out alone: the locks are let go of and the connection is back in the pool', async () => {
    const proxy = await recordingProxy();
    try {
      await withOneConnection(async (sql) => {
        await owing(sql, 30);
        await waitFor(async () => !(await lockHeld()), 10_000, { what: 'the owed COMMIT to go out alone' });
        expect(deferredEndsOf(sql)).toBe(0);
        // The pool's only connection serves the next user, outside any transaction.
        const [state] = await sql<{ xid: string | null }[]>`SELECT pg_current_xact_id_if_assigned()::text AS xid`;
        expect(state!.xid).toBeNull();
      }, proxy.url);
      expect(proxy.chunks.some((c) => c.includes('COMMIT') && !c.includes('BEGIN'))).toBe(true);
    } finally {
      await proxy.close();
    }
  });

  it('a session that dies while it owes its COMMIT is forgotten, never handed to the next transaction', async () => {
    await withOneConnection(async (sql) => {
      const pid = await owing(sql, 60_000);
      await db.sql`SELECT pg_terminate_backend(${pid})`;
      await waitFor(() => deferredEndsOf(sql) === 0, 10_000, { what: 'the closed session to be forgotten' });
      expect(await lockHeld()).toBe(false);
      const next = await beginPipelined(sql, (tx) => tx<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`, async (_tx, [o]) => o!.pid);
      expect(next).not.toBe(pid);
    });
  });
  /** Whether the process `pid` is stopped by a signal now (its state in /proc). */
  const stoppedNow = (pid: number) => / T /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^\d+ \(.*\)/, ''));
  /**
   * `pid` frozen (SIGSTOP) while `during` runs, then resumed; `during` is told whether it is still frozen.
   * A hang must not leave a backend of the shared cluster frozen: a detached shell resumes it after 30 s
   * even if this test process dies.
   */
  const frozen = async <T>(pid: number, during: (stillFrozen: () => boolean) => Promise<T>): Promise<T> => {
    spawn('sh', ['-c', `sleep 30; kill -CONT ${pid} 2>/dev/null`], { detached: true, stdio: 'ignore' }).unref();
    process.kill(pid, 'SIGSTOP');
    try {
      return await during(() => stoppedNow(pid));
    } finally {
      process.kill(pid, 'SIGCONT');
    }
  };

  it('a delivery that takes a connection owing its COMMIT whose backend is frozen fails at its stage deadline; the pool serves the next transaction on a new backend, and the locks go when the backend wakes', async () => {
    await withOneConnection(async (sql) => {
      const pid = await owing(sql, 60_000);
      const next = await frozen(pid, async (stillFrozen) => {
        // The next BEGIN on the pool takes the owing connection, and its `COMMIT; BEGIN` meets a backend that does not answer.
        const bounds = passBounds(300, () => {});
        const taken = withStageBounds(bounds, () => beginPipelined(sql, (tx) => tx`SELECT 1 AS one`, async () => 'never'));
        await expect(taken).rejects.toBeInstanceOf(StageTimedOut);
        expect(deferredEndsOf(sql)).toBe(0);
        // The pool's only connection was ended, not handed on: the next transaction runs, on another backend, while that one is still frozen.
        const nextPid = await beginPipelined(sql, (tx) => tx<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`, async (_tx, [o]) => o!.pid);
        expect(stillFrozen()).toBe(true);
        return nextPid;
      });
      expect(next).not.toBe(pid);
      await waitFor(async () => !(await lockHeld()), 10_000, { what: 'the woken backend to see its session ended and let go of the lock' });
    });
  });

  it('a COMMIT sent alone to a frozen backend is bounded: past the bound the session is ended and the pool serves the next user on a new backend', async () => {
    await withOneConnection(async (sql) => {
      const pid = await owing(sql, 200, 500);
      const next = await frozen(pid, async (stillFrozen) => {
        // The owed COMMIT goes out alone after 200 ms and gets no answer; 500 ms later the session is ended.
        await waitFor(() => deferredEndsOf(sql) === 0, 10_000, { what: 'the owed COMMIT to go out alone' });
        const nextPid = (await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!.pid;
        expect(stillFrozen()).toBe(true);
        return nextPid;
      });
      expect(next).not.toBe(pid);
      await waitFor(async () => !(await lockHeld()), 10_000, { what: 'the woken backend to let go of the lock' });
    });
  });
});
