// inUnitOfWork (src/db/unit-of-work.ts) on real PostgreSQL: the actor context goes out without waiting
// for its answer, in the same write as the work's first statement. The work still sees the context
// from its first statement on, and a context that fails takes the whole unit of work with it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inUnitOfWork, type Actor } from '../../src/db/unit-of-work.ts';
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
});
