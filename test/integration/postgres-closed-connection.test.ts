// A statement handed to a pinned connection (sql.reserve(), an open transaction) after its backend died
// must reject, never end the process or wait forever. postgres.js 3.4.9 did either (its issue #1208):
// it wrote to the null socket of a closed connection from a timer (an uncaught TypeError, which took a
// worker down when PostgreSQL restarted under it) or left a statement sent between the socket's error
// and its close unsettled. patches/postgres+3.4.9.patch fixes both; this test fails without it.
// The scenario runs in a process of its own (test/fixtures/closed-connection.ts), since the failure it
// guards against ends the process.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runNodeProcess } from '../support/node-process.ts';
import { freshDatabase, type TestDatabase } from '../support/services.ts';

const FIXTURE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'closed-connection.ts');

let db: TestDatabase;
beforeAll(async () => {
  db = await freshDatabase({ max: 1 });
});
afterAll(async () => {
  await db?.drop();
});

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
});
