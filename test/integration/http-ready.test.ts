// GET /ready against real PostgreSQL 18 and Redis: 503 naming the pending migration until the
// database holds this build's newest migration, 200 after; 503 when either service is unreachable.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppDeps } from '../../src/http/app.ts';
import { createSql } from '../../src/db/client.ts';
import { createRedis } from '../../src/kv/client.ts';
import { captureLogger } from '../../src/logging/logger.ts';
import { freePort } from '../../src/kv/redis-server.ts';
import { freshDatabase } from '../support/services.ts';
import { fixtureApp, httpFixture, LATEST, type HttpFixture } from './http-support.ts';

let f: HttpFixture;
beforeAll(async () => {
  f = await httpFixture();
});
afterAll(async () => {
  await f?.close();
});

function appWith(overrides: Partial<AppDeps>) {
  return fixtureApp(f, { config: { corsOrigins: [], corsCredentials: false, readinessTimeoutMs: 1_000 }, ...overrides });
}

describe('GET /ready', () => {
  it('R-HTTP-06 R-HTTP-07 R-EXE-09 503 naming the pending migration until it lands, then 200', async () => {
    await f.db.sql`DELETE FROM mikro_orm_migrations WHERE name = ${LATEST}`;
    const pending = await f.app.inject({ method: 'GET', url: '/ready' });
    expect(pending.statusCode).toBe(503);
    expect(pending.json()).toEqual({
      success: false,
      error: {
        code: 'NOT_READY',
        message: expect.stringContaining(LATEST),
        details: { database: 'ok', redis: 'ok', pendingMigration: LATEST, latestMigration: LATEST },
      },
    });
    // An expected state, not a bug: logged as a warning with its public facts, never with a stack trace.
    const logged = f.logs.lines.map((l) => JSON.parse(l) as { level: number; code?: string; err?: unknown });
    const notReady = logged.filter((l) => l.code === 'NOT_READY');
    expect(notReady.length).toBeGreaterThan(0);
    for (const line of notReady) {
      expect(line.level).toBe(40);
      expect(line.err).toBeUndefined();
    }
    const pt = await f.app.inject({ method: 'GET', url: '/ready', headers: { 'accept-language': 'pt-BR' } });
    expect(pt.json().error.message).toMatch(/não está pronto.*migra/);

    await f.db.sql`INSERT INTO mikro_orm_migrations (name) VALUES (${LATEST})`;
    const ready = await f.app.inject({ method: 'GET', url: '/ready' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({
      success: true,
      data: { status: 'ready', latestMigration: LATEST, database: 'ok', redis: 'ok' },
      meta: {},
    });
  });

  it('R-EXE-09 R-HTTP-07 the migrated template is ready for its newest migration; deleting that row makes it pending', async () => {
    const migrated = await freshDatabase();
    try {
      const [newest] = await migrated.sql`SELECT name FROM mikro_orm_migrations ORDER BY id DESC LIMIT 1`;
      expect(newest, 'the template holds at least one migration').toBeDefined();
      const name = newest!.name as string;
      const app = await appWith({ sql: migrated.sql, latestMigration: name });
      try {
        expect((await app.inject({ method: 'GET', url: '/ready' })).statusCode).toBe(200);
        await migrated.sql`DELETE FROM mikro_orm_migrations WHERE name = ${name}`;
        const res = await app.inject({ method: 'GET', url: '/ready' });
        expect(res.statusCode).toBe(503);
        expect(res.json().error.details.pendingMigration).toBe(name);
      } finally {
        await app.close();
      }
    } finally {
      await migrated.drop();
    }
  });

  it('R-HTTP-07 Redis unreachable: 503 with a public reason', async () => {
    const dead = createRedis(`redis://127.0.0.1:${await freePort()}`, { name: 'dead', autoPipelining: true });
    dead.on('error', () => {});
    const app = await appWith({ redis: dead });
    try {
      const res = await app.inject({ method: 'GET', url: '/ready' });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.details).toMatchObject({ redis: 'unreachable', database: 'ok' });
      expect(res.json().error.message).toMatch(/Redis/);
      // /health stays alive: the process is fine.
      expect((await app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
    } finally {
      await app.close();
      dead.disconnect();
    }
  });

  it('R-HTTP-07 database unreachable: 503, never a stack or a connection string', async () => {
    const url = `postgres://svc_user:pw-SECRET@127.0.0.1:${await freePort()}/nowhere`;
    const sql = createSql(url, { max: 1 });
    const app = await appWith({ sql });
    try {
      const res = await app.inject({ method: 'GET', url: '/ready' });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.details).toMatchObject({ database: 'unreachable', redis: 'ok', latestMigration: LATEST });
      expect(res.body).not.toMatch(/pw-SECRET|postgres:\/\/|127\.0\.0\.1|ECONNREFUSED|\bat \w+ \(/);
    } finally {
      await app.close();
      await sql.end({ timeout: 1 });
    }
  });

  it('R-HTTP-07 credentials the database refuses: /ready says the database is unreachable (no pending migration) and the log names the code, once, never the password', async () => {
    // The test cluster trusts local connections, so a wrong password alone would pass: an unknown role is refused (28000) as a wrong password is (28P01).
    const wrong = new URL(f.db.url);
    wrong.username = 'no_such_role';
    wrong.password = 'pw-WRONG-secret';
    const sql = createSql(wrong.toString(), { max: 1 });
    const logs = captureLogger('info');
    const app = await appWith({ sql, logger: logs.logger });
    try {
      for (let i = 0; i < 3; i++) {
        const res = await app.inject({ method: 'GET', url: '/ready' });
        expect(res.statusCode).toBe(503);
        // The schema is unknown while the database does not answer: no migration is named.
        expect(res.json().error.details).toEqual({ database: 'unreachable', redis: 'ok', pendingMigration: null, latestMigration: LATEST });
        expect(res.json().error.message).not.toContain(LATEST);
      }
      const why = logs.lines.map((l) => JSON.parse(l) as { msg?: string; code?: string; level: number }).filter((l) => /database unreachable/.test(l.msg ?? ''));
      // Class 28 (invalid authorization): the reason, logged when it starts, not on every probe.
      expect(why).toHaveLength(1);
      expect(why[0]!.code).toMatch(/^28/);
      expect(why[0]!.level).toBe(40);
      expect(logs.text()).not.toMatch(/pw-WRONG-secret|postgres:\/\//);
    } finally {
      await app.close();
      await sql.end({ timeout: 1 });
    }
  });
});
