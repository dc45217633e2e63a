// Which idle connection the pool hands out (patches/postgres+3.4.9.patch). postgres.js 3.4.9 took its
// idle connections in turn, oldest idle first, so a light load (a steady trickle of transactions, the
// work bench's 200 runs/s) spread over every connection the pool had ever opened, each statement on a
// backend whose caches had gone cold. Patched, the connection used last goes first.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../src/db/client.ts';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import { freshDatabase, type TestDatabase } from '../support/services.ts';

let db: TestDatabase;
let sql: Sql;
beforeAll(async () => {
  db = await freshDatabase({ max: 1 });
  sql = createSql(db.url, { max: 4 });
});
afterAll(async () => {
  await sql?.end();
  await db?.drop();
});

async function backendPid(q: Sql): Promise<number> {
  const [row] = await q<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
  return row!.pid;
}

describe('the pool’s idle connections', () => {
  it('a statement, a reserved connection and a unit of work, one after another, all get the idle connection used last', async () => {
    // Four connections open and idle.
    const opened = await Promise.all(Array.from({ length: 4 }, () => sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid, pg_sleep(0.05)`));
    expect(new Set(opened.map((rows) => rows[0]!.pid)).size).toBe(4);

    const pids: number[] = [];
    for (let i = 0; i < 8; i++) pids.push(await backendPid(sql));
    for (let i = 0; i < 4; i++) {
      const reserved = await sql.reserve();
      try {
        pids.push(await backendPid(reserved));
      } finally {
        reserved.release();
      }
      pids.push(await inUnitOfWork(sql, { kind: 'system', label: 'test' }, async (tx) => backendPid(tx as unknown as Sql)));
    }
    // Taken in turn (the unpatched library) these would be four backends.
    expect(new Set(pids).size).toBe(1);
  });
});
