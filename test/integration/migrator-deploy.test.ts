// `svc migrator deploy | apply | status | db-seed` as real processes against empty databases, on copies
// of the `migrated` fixture root (3 migrations; seeders WidgetSeeder by default, DevSeeder by name).
import { afterEach, describe, expect, it } from 'vitest';
import { emptyDatabase, type TestDatabase } from '../support/services.ts';
import { copyFixture, runSvc, type FixtureRoot } from '../fixtures/migrations/fixture-root.ts';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(): Promise<{ db: TestDatabase; r: FixtureRoot; svc: (...args: string[]) => ReturnType<typeof runSvc> }> {
  const r = copyFixture('migrated');
  cleanups.push(() => r.remove());
  const db = await emptyDatabase();
  cleanups.push(() => db.drop());
  const svc = (...args: string[]) => runSvc(['migrator', ...args], { DATABASE_URL: db.url, SVC_MIGRATIONS_ROOT: r.root });
  return { db, r, svc };
}

/** Appends a hand-written migration to the copy's journal (the runner needs nothing else). */
function addMigration(r: FixtureRoot, tag: string, text: string): void {
  r.write(`drizzle/${tag}.sql`, text);
  const journal = JSON.parse(r.read('drizzle/meta/_journal.json')) as { entries: unknown[] };
  journal.entries.push({ idx: journal.entries.length, version: '7', when: Date.now(), tag, breakpoints: true });
  r.write('drizzle/meta/_journal.json', JSON.stringify(journal, null, 2));
}

const MIGRATIONS = ['0001_widgets', '0002_bank-gadgets', '0003_jobs'];

describe('svc migrator', () => {
  it('R-EXE-04 R-MIG-17 R-MIG-09 R-SEED-01 deploy applies the migrations then the default seeders; a second deploy changes nothing', async () => {
    const { db, svc } = await setup();
    const first = await svc('deploy');
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const lines = first.stdout.trim().split('\n');
    // One line per step, migrations before seeders.
    expect(lines.indexOf('migrator: applied 0003_jobs')).toBeLessThan(lines.indexOf('migrator: seeding WidgetSeeder'));
    expect(first.stdout).not.toContain(db.url);

    const control = () => db.sql`SELECT id, name, executed_at::text AS at FROM mikro_orm_migrations ORDER BY id`;
    const before = await control();
    expect(before.map((r) => r.name)).toEqual(MIGRATIONS);
    const widgets = await db.sql`SELECT id, name FROM widgets ORDER BY id`;
    expect(widgets.map((w) => w.name)).toEqual(['default']);
    // The frozen SQL loaded by 0003_jobs ran.
    expect((await db.sql`SELECT to_regclass('jobs') IS NOT NULL AS ok`)[0]!.ok).toBe(true);

    const second = await svc('deploy');
    expect(second.code).toBe(0);
    expect(second.stdout).toContain('migrator: no pending migrations; schema at 0003_jobs');
    expect(await control()).toEqual(before);
    expect(await db.sql`SELECT id, name FROM widgets ORDER BY id`).toEqual(widgets);
  });

  it('R-MIG-18 status lists every migration as pending or applied with its instant, and unknown applied names', async () => {
    const { db, svc } = await setup();
    const pending = await svc('status');
    expect(pending.code).toBe(0);
    for (const name of MIGRATIONS) expect(pending.stdout).toMatch(new RegExp(`^${name}\\s+pending\\s+-$`, 'm'));
    expect(pending.stdout).toContain('0 applied, 3 pending, 0 unknown to this build');

    expect((await svc('apply')).code).toBe(0);
    await db.sql`INSERT INTO mikro_orm_migrations (name) VALUES ('0099_from-a-newer-build')`;
    const status = await svc('status');
    expect(status.code).toBe(0);
    for (const name of MIGRATIONS) {
      expect(status.stdout).toMatch(new RegExp(`^${name}\\s+applied\\s+\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z$`, 'm'));
    }
    expect(status.stdout).toContain('applied but unknown to this build:');
    expect(status.stdout).toMatch(/^0099_from-a-newer-build\s+applied\s+\S+Z$/m);
    expect(status.stdout).toContain('3 applied, 0 pending, 1 unknown to this build');
  });

  it('R-MIG-18 apply runs migrations only; db-seed runs the default seeders or one named seeder', async () => {
    const { db, svc } = await setup();
    const applied = await svc('apply');
    expect(applied.code).toBe(0);
    expect(applied.stdout).not.toContain('seeding');
    expect(await db.sql`SELECT name FROM widgets`).toEqual([]);

    const seeded = await svc('db-seed');
    expect(seeded.code).toBe(0);
    expect(seeded.stdout).not.toContain('applied');
    expect((await db.sql`SELECT name FROM widgets ORDER BY name`).map((w) => w.name)).toEqual(['default']);

    const dev = await svc('db-seed', '--class', 'DevSeeder');
    expect(dev.code).toBe(0);
    expect(dev.stdout).toContain('migrator: seeding DevSeeder');
    expect(dev.stdout).not.toContain('WidgetSeeder');
    expect((await db.sql`SELECT name FROM widgets ORDER BY name`).map((w) => w.name)).toEqual(['default', 'dev']);

    const unknown = await svc('db-seed', '--class', 'NoSuchSeeder');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('SEEDER_UNKNOWN');
    expect(unknown.stderr).toContain('DevSeeder, WidgetSeeder');
  });

  it('deploy checks SVC_PERMISSIONS_REGISTRY before applying any migration: a missing or invalid registry leaves the database untouched', async () => {
    const { db, r } = await setup();
    r.write('dist/permissions.json', '{"version": 1, "permissions": [{"code": "not a code"}]}');
    for (const file of [`${r.root}/dist/no-such-permissions.json`, `${r.root}/dist/permissions.json`]) {
      const res = await runSvc(['migrator', 'deploy'], { DATABASE_URL: db.url, SVC_MIGRATIONS_ROOT: r.root, SVC_PERMISSIONS_REGISTRY: file });
      expect(res.code, file).toBe(1);
      expect(res.stderr).toMatch(/^svc: PERMISSION_REGISTRY_FILE_INVALID: /);
      expect(res.stdout).not.toContain('applied');
      expect((await db.sql`SELECT to_regclass('mikro_orm_migrations') IS NULL AS untouched`)[0]!.untouched, file).toBe(true);
    }
  });

  it('R-SEED-01 db-seed refuses a database that lacks migrations of this build, naming the first pending', async () => {
    const { db, svc } = await setup();
    const res = await svc('db-seed');
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('SCHEMA_NOT_CURRENT');
    expect(res.stderr).toContain('0001_widgets');
    expect((await db.sql`SELECT to_regclass('widgets') IS NULL AS missing`)[0]!.missing).toBe(true);
  });

  it('R-SEED-01 the seeders run in one transaction: a failing seeder leaves no seeder effect', async () => {
    const { db, r, svc } = await setup();
    r.write(
      'seeders/index.ts',
      `export const defaultSeeders = [
  { name: 'FirstSeeder', async run(tx) { await tx\`INSERT INTO widgets (name) VALUES ('first')\`; } },
  { name: 'BrokenSeeder', async run(tx) { await tx\`INSERT INTO no_such_table VALUES (1)\`; } },
];
export const namedSeeders = {};
`,
    );
    const res = await svc('deploy');
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('SEEDER_FAILED');
    expect(res.stderr).toContain('BrokenSeeder');
    expect(await db.sql`SELECT name FROM widgets`).toEqual([]);
    // The migrations themselves were committed before seeding started.
    expect((await db.sql`SELECT count(*)::int AS n FROM mikro_orm_migrations`)[0]!.n).toBe(3);
  });

  it('R-MIG-09 two migrators started at once both succeed and record each migration exactly once', async () => {
    const { db, r, svc } = await setup();
    // A slow migration keeps the first migrator inside the lock while the second arrives.
    r.write('sql/jobs/slow.sql', '-- FROZEN once merged: test only.\nSELECT pg_sleep(1);\n');
    addMigration(r, '0004_jobs-slow', '-- @load sql/jobs/slow.sql\n');
    const [a, b] = await Promise.all([svc('apply'), svc('apply')]);
    expect([a.code, b.code, a.stderr, b.stderr]).toEqual([0, 0, '', '']);
    const rows = await db.sql`SELECT name, count(*)::int AS n FROM mikro_orm_migrations GROUP BY name ORDER BY name`;
    expect(rows).toEqual([...MIGRATIONS, '0004_jobs-slow'].map((name) => ({ name, n: 1 })));
    // Exactly one of them applied the migrations; the other waited for the lock and found nothing to do.
    const appliers = [a, b].filter((res) => res.stdout.includes('applied 4 migration(s)'));
    const waiters = [a, b].filter((res) => res.stdout.includes('no pending migrations'));
    expect([appliers.length, waiters.length]).toEqual([1, 1]);
  });

  it('R-MIG-09 a failing migration is rolled back and not recorded; a fixed one applies on the next run', async () => {
    const { db, r, svc } = await setup();
    addMigration(
      r,
      '0004_widgets-broken',
      'CREATE TABLE broken_half (id int);\n--> statement-breakpoint\nSELECT 1 / 0;\n',
    );
    const failed = await svc('apply');
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('MIGRATION_FAILED');
    expect(failed.stderr).toContain('0004_widgets-broken');
    expect((await db.sql`SELECT to_regclass('broken_half') IS NULL AS gone`)[0]!.gone).toBe(true);
    expect((await db.sql`SELECT name FROM mikro_orm_migrations ORDER BY id`).map((x) => x.name)).toEqual(MIGRATIONS);

    r.write('drizzle/0004_widgets-broken.sql', 'CREATE TABLE broken_half (id int);\n');
    const fixed = await svc('apply');
    expect(fixed.code).toBe(0);
    expect((await db.sql`SELECT count(*)::int AS n FROM mikro_orm_migrations`)[0]!.n).toBe(4);
  });
});
