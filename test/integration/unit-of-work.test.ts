// inUnitOfWork (src/db/unit-of-work.ts) on real PostgreSQL: BEGIN and the actor context go out without
// waiting for their answers, in the same write as the work's first statement. The work still sees the
// context from its first statement on, a context that fails takes the whole unit of work with it, and a
// BEGIN that fails lets nothing the work sent behind it commit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql } from '../../src/db/client.ts';
import { deferToCommit } from '../../src/db/pipelined-begin.ts';
import { inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
import { beginBrokenOnTheWire, commitStatementName, recordingProxy } from '../support/recording-proxy.ts';
import { within } from '../support/wait-for.ts';
import { freshDatabase, type TestDatabase } from '../support/services.ts';

let db: TestDatabase;

beforeAll(async () => {
  db = await freshDatabase({ max: 2 });
  await db.sql`CREATE TABLE uow_writes (note text NOT NULL, process text, tenant text)`;
});
afterAll(async () => {
  await db?.drop();
});

describe('unit of work', () => {
  it('R-EXE-11 the work’s first statement already runs under the actor context, in the same transaction', async () => {
    const actor: Actor = { kind: 'system', tenantId: '42', label: 'uow-test' };
    const seen = await inUnitOfWork(db.sql, actor, async (tx) => {
      const [row] = await tx<{ process: string; tenant: string; xid: string }[]>`
        INSERT INTO uow_writes (note, process, tenant)
        VALUES ('first', current_setting('app.process', true), current_setting('app.tenant_id', true))
        RETURNING process, tenant, pg_current_xact_id()::text AS xid`;
      const [again] = await tx<{ xid: string }[]>`SELECT pg_current_xact_id()::text AS xid`;
      return { ...row!, same: row!.xid === again!.xid };
    });
    expect(seen).toMatchObject({ process: 'uow-test', tenant: '42', same: true });
    // Transaction-local: nothing leaks to the next user of the connection.
    const [after] = await db.sql<{ process: string | null }[]>`SELECT nullif(current_setting('app.process', true), '') AS process`;
    expect(after!.process).toBeNull();
  });

  it('R-EXE-11 a context that cannot be applied aborts the unit of work: nothing commits and its own error is reported', async () => {
    // A NUL byte is refused by PostgreSQL as text: the set_config statement fails.
    const actor: Actor = { kind: 'system', label: 'bad\u0000label' };
    let workRan = false;
    const failed = await inUnitOfWork(db.sql, actor, async (tx) => {
      workRan = true;
      await tx`INSERT INTO uow_writes (note) VALUES ('must not commit')`;
      return 'committed';
    }).catch((error: unknown) => error as { code?: string });
    expect(workRan).toBe(true);
    // invalid byte sequence (22021), not the work's "current transaction is aborted" (25P02).
    expect(failed).toMatchObject({ code: '22021' });
    expect(await db.sql`SELECT note FROM uow_writes WHERE note = 'must not commit'`).toEqual([]);
  });

  it('R-EXE-11 BEGIN, the actor context and the work’s first statement go out in one write', async () => {
    const proxy = await recordingProxy(db.url);
    const sql = createSql(proxy.url, { max: 1, applicationName: 'uow-test' });
    try {
      const actor: Actor = { kind: 'system', tenantId: '7', label: 'uow-one-write' };
      const write = (note: string) =>
        inUnitOfWork(sql, actor, async (tx) => {
          await tx`INSERT INTO uow_writes (note, process) VALUES (${note}, current_setting('app.process', true))`;
        });
      // The first use of a statement on a connection waits for its description (postgres.js prepares it);
      // from then on the connection knows it.
      await write('one-write-warm-up');
      proxy.chunks.length = 0;
      await write('one-write-marker');
      const withBegin = proxy.chunks.filter((c) => c.includes('BEGIN'));
      expect(withBegin).toHaveLength(1);
      expect(withBegin[0]).toContain('uow-one-write');
      expect(withBegin[0]).toContain('one-write-marker');
      // The guard is a prepared statement: its text went out once, with the first unit of work.
      expect(withBegin[0]).not.toContain('pg_terminate_backend');
    } finally {
      await sql.end({ timeout: 5 });
      await proxy.close();
    }
    expect(await db.sql`SELECT process FROM uow_writes WHERE note = 'one-write-marker'`).toEqual([{ process: 'uow-one-write' }]);
  });

  it('R-EXE-11 a BEGIN that fails and leaves the session outside a transaction lets nothing the work sent behind it commit', async () => {
    // The fault, on the wire: the first BEGIN reaches the server as BEGIX (a syntax error), so the
    // session stays outside any transaction while the context and the work's writes are already on
    // their way behind it. Each of them would commit on its own if it ran.
    const proxy = await beginBrokenOnTheWire(db.url);
    const sql = createSql(proxy.url, { max: 1, applicationName: 'uow-test' });
    try {
      const actor: Actor = { kind: 'system', tenantId: '7', label: 'uow-refused-begin' };
      let workRan = false;
      const failed = await inUnitOfWork(sql, actor, async (tx) => {
        workRan = true;
        await tx`INSERT INTO uow_writes (note) VALUES ('behind-a-failed-begin-1')`;
        await tx`INSERT INTO uow_writes (note) VALUES ('behind-a-failed-begin-2')`;
        return 'committed';
      }).catch((error: unknown) => error as { code?: string });
      expect(proxy.broken()).toBe(true);
      expect(workRan).toBe(true);
      // BEGIN's own error (syntax error), not the work's.
      expect(failed).toMatchObject({ code: '42601' });
      expect(await db.sql`SELECT note FROM uow_writes WHERE note LIKE 'behind-a-failed-begin-%'`).toEqual([]);
      // The pool's only connection is usable again (postgres.js reconnects the one the guard ended).
      await inUnitOfWork(sql, actor, async (tx) => {
        await tx`INSERT INTO uow_writes (note) VALUES ('after-a-failed-begin')`;
      });
    } finally {
      await sql.end({ timeout: 5 });
      await proxy.close();
    }
    expect(await db.sql`SELECT note FROM uow_writes WHERE note = 'after-a-failed-begin'`).toEqual([{ note: 'after-a-failed-begin' }]);
  });

  it('R-EXE-11 a unit of work that defers its last statement to COMMIT is one write: BEGIN, the context, the statement and COMMIT', async () => {
    const proxy = await recordingProxy(db.url);
    const sql = createSql(proxy.url, { max: 1, applicationName: 'uow-test' });
    try {
      const actor: Actor = { kind: 'system', tenantId: '7', label: 'uow-deferred' };
      const write = (note: string) =>
        inUnitOfWork(sql, actor, async (tx) => {
          const deferred = deferToCommit(tx, tx`INSERT INTO uow_writes (note, process) VALUES (${note}, current_setting('app.process', true))`.execute());
          return deferred;
        });
      expect(await write('deferred-warm-up')).toBe(true);
      // Every answer is held back until COMMIT is on the wire: a unit of work that waited for one
      // before its COMMIT would never send it.
      proxy.holdAnswersUntil(commitStatementName(proxy.chunks));
      expect(await within(write('deferred-marker'), 10_000, 'COMMIT went out before any answer')).toBe(true);
    } finally {
      await sql.end({ timeout: 5 });
      await proxy.close();
    }
    expect(await db.sql`SELECT process FROM uow_writes WHERE note = 'deferred-marker'`).toEqual([{ process: 'uow-deferred' }]);
  });

  it('R-EXE-11 a deferred statement that fails fails the unit of work with its own error, and nothing of it commits', async () => {
    const actor: Actor = { kind: 'system', tenantId: '7', label: 'uow-deferred-fails' };
    const failed = await inUnitOfWork(db.sql, actor, async (tx) => {
      await tx`INSERT INTO uow_writes (note) VALUES ('before-a-failed-deferral')`;
      deferToCommit(tx, tx`SELECT 1 / 0`.execute());
      return 'returned';
    }).catch((error: unknown) => error as { code?: string });
    // division_by_zero, not TRANSACTION_ROLLED_BACK.
    expect(failed).toMatchObject({ code: '22012' });
    expect(await db.sql`SELECT note FROM uow_writes WHERE note = 'before-a-failed-deferral'`).toEqual([]);
  });

  it('R-EXE-11 behind a context that fails, a deferred statement reports the context’s error, not its own refusal', async () => {
    const actor: Actor = { kind: 'system', label: 'bad\u0000label' };
    const failed = await inUnitOfWork(db.sql, actor, async (tx) => {
      deferToCommit(tx, tx`INSERT INTO uow_writes (note) VALUES ('deferred-behind-a-bad-context')`.execute());
    }).catch((error: unknown) => error as { code?: string });
    // invalid byte sequence (22021), not the deferred insert's "current transaction is aborted" (25P02).
    expect(failed).toMatchObject({ code: '22021' });
    expect(await db.sql`SELECT note FROM uow_writes WHERE note = 'deferred-behind-a-bad-context'`).toEqual([]);
  });

  it('R-EXE-11 a BEGIN that fails lets nothing commit that the work deferred, though it waited for no answer', async () => {
    const proxy = await beginBrokenOnTheWire(db.url);
    const sql = createSql(proxy.url, { max: 1, applicationName: 'uow-test' });
    try {
      const actor: Actor = { kind: 'system', tenantId: '7', label: 'uow-deferred-refused-begin' };
      const failed = await inUnitOfWork(sql, actor, async (tx) => {
        deferToCommit(tx, tx`INSERT INTO uow_writes (note) VALUES ('deferred-behind-a-failed-begin')`.execute());
      }).catch((error: unknown) => error as { code?: string });
      expect(proxy.broken()).toBe(true);
      // BEGIN's own error (syntax error); the guard ended the session before the insert and COMMIT ran.
      expect(failed).toMatchObject({ code: '42601' });
      await inUnitOfWork(sql, actor, async (tx) => {
        await tx`INSERT INTO uow_writes (note) VALUES ('after-a-failed-begin-with-deferral')`;
      });
    } finally {
      await sql.end({ timeout: 5 });
      await proxy.close();
    }
    expect(await db.sql`SELECT note FROM uow_writes WHERE note = 'deferred-behind-a-failed-begin'`).toEqual([]);
    expect(await db.sql`SELECT note FROM uow_writes WHERE note = 'after-a-failed-begin-with-deferral'`).toHaveLength(1);
  });

  it('R-EXE-11 inside a savepoint nothing is deferred: the savepoint sees its own statement fail and rolls back alone', async () => {
    const actor: Actor = { kind: 'system', tenantId: '7', label: 'uow-savepoint' };
    const outcome = await inUnitOfWork(db.sql, actor, async (tx) => {
      let deferred: boolean | undefined;
      const inner = await tx
        .savepoint(async (sp) => {
          const failing = sp`SELECT 1 / 0`.execute();
          deferred = deferToCommit(sp, failing);
          await failing;
        })
        .catch((error: { code?: string }) => error.code);
      await tx`INSERT INTO uow_writes (note) VALUES ('after-a-failed-savepoint')`;
      return { deferred, inner };
    });
    expect(outcome).toEqual({ deferred: false, inner: '22012' });
    expect(await db.sql`SELECT note FROM uow_writes WHERE note = 'after-a-failed-savepoint'`).toHaveLength(1);
  });
});
