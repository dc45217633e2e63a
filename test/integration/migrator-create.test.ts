// `svc migrations create` through the real CLI on private copies of fixture roots (offline: no database).
import { afterEach, describe, expect, it } from 'vitest';
import { copyFixture, runSvc, type FixtureRoot } from '../fixtures/migrations/fixture-root.ts';

const roots: FixtureRoot[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) r.remove();
});

function fresh(): FixtureRoot {
  const r = copyFixture('fresh');
  roots.push(r);
  return r;
}

const create = (r: FixtureRoot, ...args: string[]) =>
  runSvc(['migrations', 'create', ...args], { SVC_MIGRATIONS_ROOT: r.root });

interface Journal {
  entries: Array<{ idx: number; tag: string; version: string; breakpoints: boolean; when: number }>;
}

// Each case spawns the CLI (about 1.5 s each, more on a loaded machine).
describe('svc migrations create', { timeout: 120_000 }, () => {
  it('R-MIG-08 R-MIG-07 R-MIG-03 R-MIG-01 numbers from 0001, generates per domain, chains snapshots, loads and pins the first constraints file', async () => {
    const r = fresh();
    const first = await create(r, 'widgets');
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(first.stdout).toContain('created 0001_widgets');
    const sql1 = r.read('drizzle/0001_widgets.sql');
    expect(sql1).toContain('CREATE TABLE "widgets"');
    expect(sql1).toContain('--> statement-breakpoint');
    // Generation is per domain: bank-gadgets.ts is pending but belongs to its own migration.
    expect(sql1).not.toContain('bank_gadgets');
    // Tables declared under src/db/schema/handwritten/ are created by frozen SQL, never generated.
    expect(sql1).not.toContain('"jobs"');
    expect(sql1.trimEnd().split('\n').at(-1)).toBe('-- @load sql/widgets/constraints.sql');
    const constraints = r.read('sql/widgets/constraints.sql');
    expect(constraints.split('\n')[0]).toMatch(/^-- FROZEN once merged: .* never edit; put changes in a new file loaded by a new migration\.$/);

    const elsewhere = await create(r, 'widgets-nothing');
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toContain('MIGRATION_NO_CHANGES');
    expect(elsewhere.stderr).toContain('table public.bank_gadgets added');

    const second = await create(r, 'bank-gadgets');
    expect(second.code).toBe(0);
    expect(r.read('drizzle/0002_bank-gadgets.sql')).toContain('CREATE TABLE "bank_gadgets"');
    expect(r.read('drizzle/0002_bank-gadgets.sql')).not.toContain('CREATE TABLE "widgets"');

    r.write(
      'src/db/schema/widgets.ts',
      r.read('src/db/schema/widgets.ts').replace("name: text('name').notNull(),", "name: text('name').notNull(),\n    color: text('color'),"),
    );
    const third = await create(r, 'widgets-color');
    expect(third.code).toBe(0);
    const sql3 = r.read('drizzle/0003_widgets-color.sql');
    expect(sql3).toContain('ALTER TABLE "widgets" ADD COLUMN "color" text');
    expect(sql3).not.toContain('@load');

    const fourth = await create(r, 'jobs', '--custom');
    expect(fourth.code).toBe(0);
    expect(r.read('drizzle/0004_jobs.sql')).toContain('-- @load sql/<domain>/<file>.sql');

    const journal = JSON.parse(r.read('drizzle/meta/_journal.json')) as Journal;
    expect(journal.entries.map((e) => e.tag)).toEqual(['0001_widgets', '0002_bank-gadgets', '0003_widgets-color', '0004_jobs']);
    expect(journal.entries.map((e) => e.idx)).toEqual([0, 1, 2, 3]);
    const snaps = [1, 2, 3, 4].map((n) => JSON.parse(r.read(`drizzle/meta/000${n}_snapshot.json`)) as Record<string, unknown>);
    expect(snaps[0]!.prevId).toBe('00000000-0000-0000-0000-000000000000');
    for (let i = 1; i < 4; i++) expect(snaps[i]!.prevId).toBe(snaps[i - 1]!.id);
    expect(new Set(snaps.map((s) => s.id)).size).toBe(4);
    // A custom migration changes nothing drizzle models: same tables as before it.
    expect(snaps[3]!.tables).toEqual(snaps[2]!.tables);

    const hashes = JSON.parse(r.read('drizzle/meta/migration-hashes.json')) as Record<string, string>;
    expect(Object.keys(hashes).sort()).toEqual(['0001_widgets.sql', '0002_bank-gadgets.sql', '0003_widgets-color.sql', '0004_jobs.sql']);
    const frozen = JSON.parse(r.read('sql/frozen-sql.json')) as Record<string, string>;
    expect(Object.keys(frozen).sort()).toEqual(['sql/bank-gadgets/constraints.sql', 'sql/widgets/constraints.sql']);

    // What create wrote passes the check as is.
    const check = await runSvc(['migrations', 'check'], { SVC_MIGRATIONS_ROOT: r.root });
    expect(check.stderr).toBe('');
    expect(check.code).toBe(0);
  });

  it('R-MIG-03 a generated create with no schema change is refused (use --custom)', async () => {
    const r = copyFixture('migrated');
    roots.push(r);
    const res = await create(r, 'widgets-nothing');
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('MIGRATION_NO_CHANGES');
    expect(res.stderr).toContain('--custom');
    expect(r.exists('drizzle/0004_widgets-nothing.sql')).toBe(false);
  });

  const refusals: Array<[string, string, string]> = [
    ['R-MIG-08 refuses a name already used', 'bank-gadgets-extra', 'MIGRATION_NAME_USED'],
    ['R-MIG-07 refuses the plain domain name after the domain first migration', 'widgets', 'MIGRATION_DOMAIN_NOT_FIRST'],
    ['R-MIG-07 refuses <domain>-<change> before the domain first migration', 'orders-archive', 'MIGRATION_DOMAIN_NO_FIRST'],
    ['R-MIG-07 refuses a name of no known domain', 'billing-invoices', 'MIGRATION_DOMAIN_UNKNOWN'],
    ['R-MIG-07 refuses a badly formed name', 'Widgets_Color', 'MIGRATION_NAME_INVALID'],
  ];
  for (const [title, name, code] of refusals) {
    it.concurrent(title, async () => {
      // Own cleanup: concurrent tests must not share the afterEach list.
      const r = copyFixture('migrated');
      try {
      // A migration named bank-gadgets-extra exists; a domain `orders` exists with no migration yet.
      r.write('drizzle/0004_bank-gadgets-extra.sql', '-- placeholder\n');
      r.write('sql/orders/.keep', '');
      const journalBefore = r.read('drizzle/meta/_journal.json');
      const res = await create(r, name, '--custom');
      expect(res.code).toBe(1);
      expect(res.stderr).toContain(code);
      expect(r.read('drizzle/meta/_journal.json')).toBe(journalBefore);
      expect(r.exists('drizzle/0005_' + name + '.sql')).toBe(false);
      } finally {
        r.remove();
      }
    });
  }
});
