import { afterAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { freshDatabase, freshRedisUrl, type TestDatabase } from '../support/services.ts';

describe('test services', () => {
  let db: TestDatabase | undefined;
  afterAll(async () => db?.drop());

  it('R-EXE-05 runs PostgreSQL 18 from the embedded binaries, one cloned database per file', async () => {
    db = await freshDatabase();
    const [row] = await db.sql`SELECT current_setting('server_version_num')::int AS v`;
    expect(row!.v).toBeGreaterThanOrEqual(180000);
    expect(row!.v).toBeLessThan(190000);
  });

  it('gives each file its own Redis logical database', async () => {
    const a = await freshRedisUrl();
    const b = await freshRedisUrl();
    expect(a).not.toBe(b);
    const r = new Redis(a);
    expect(await r.ping()).toBe('PONG');
    r.disconnect();
  });
});
