// `svc migrations check` and `pin` through the real CLI, each failure kind on its own copy of the
// consistent `migrated` fixture (3 migrations, 3 frozen SQL files).
import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT, copyFixture, runSvc, type CliResult, type FixtureRoot } from '../fixtures/migrations/fixture-root.ts';

async function onMigrated(
  mutate: (r: FixtureRoot) => void | Promise<void>,
  assert: (res: CliResult, r: FixtureRoot) => void,
): Promise<void> {
  const r = copyFixture('migrated');
  try {
    await mutate(r);
    assert(await runSvc(['migrations', 'check'], { SVC_MIGRATIONS_ROOT: r.root }), r);
  } finally {
    r.remove();
  }
}

const json = (r: FixtureRoot, rel: string) => JSON.parse(r.read(rel)) as Record<string, string>;
const writeJson = (r: FixtureRoot, rel: string, v: unknown) => r.write(rel, `${JSON.stringify(v, null, 2)}\n`);

/** The check failed with exactly these `FAIL <kind> <file>` lines. */
function failedWith(res: CliResult, lines: string[]): void {
  expect(res.code).toBe(1);
  const fails = res.stderr
    .split('\n')
    .filter((l) => l.startsWith('FAIL '))
    .map((l) => l.slice(0, l.indexOf(':')));
  expect(fails.sort()).toEqual(lines.map((l) => `FAIL ${l}`).sort());
  expect(res.stderr).toContain(`migrations check: ${lines.length} problem(s)`);
}

// Each case spawns the CLI (about 1.5 s each, more on a loaded machine).
describe('svc migrations check', { timeout: 120_000 }, () => {
  it.concurrent('R-MIG-04 passes on consistent sources with a one-line summary', async () => {
    await onMigrated(
      () => {},
      (res) => {
        expect(res.stderr).toBe('');
        expect(res.code).toBe(0);
        expect(res.stdout.trim().split('\n')).toEqual([
          'migrations check: ok (3 migrations pinned, 3 frozen SQL files pinned, schema matches the latest snapshot)',
        ]);
      },
    );
  });

  it.concurrent('R-MIG-04 R-MIG-03 fails while the schema modules diverge from the latest snapshot', async () => {
    await onMigrated(
      (r) =>
        r.write(
          'src/db/schema/widgets.ts',
          r.read('src/db/schema/widgets.ts').replace("name: text('name').notNull(),", "name: text('name').notNull(),\n    color: text('color'),"),
        ),
      (res) => {
        failedWith(res, ['SCHEMA_DIVERGED drizzle/meta/0003_snapshot.json']);
        expect(res.stderr).toContain('table public.widgets changed');
        expect(res.stderr).toContain('ALTER TABLE "widgets" ADD COLUMN "color" text');
      },
    );
  });

  it.concurrent('R-MIG-05 fails when a merged migration was edited', async () => {
    await onMigrated(
      (r) => r.write('drizzle/0001_widgets.sql', r.read('drizzle/0001_widgets.sql').replace('"name" text NOT NULL', '"name" text')),
      (res) => failedWith(res, ['MIGRATION_EDITED drizzle/0001_widgets.sql']),
    );
  });

  it.concurrent('R-MIG-05 fails on an unpinned migration and on a pin of a missing migration', async () => {
    await onMigrated(
      (r) => {
        const pins = json(r, 'drizzle/meta/migration-hashes.json');
        delete pins['0002_bank-gadgets.sql'];
        pins['0009_ghost.sql'] = 'a'.repeat(64);
        writeJson(r, 'drizzle/meta/migration-hashes.json', pins);
      },
      (res) =>
        failedWith(res, ['MIGRATION_UNPINNED drizzle/0002_bank-gadgets.sql', 'MIGRATION_PIN_STALE drizzle/meta/migration-hashes.json']),
    );
  });

  it.concurrent('R-MIG-05 fails when journal entries and migration files do not match', async () => {
    await onMigrated(
      (r) => {
        const journal = JSON.parse(r.read('drizzle/meta/_journal.json')) as { entries: Array<{ tag: string }> };
        journal.entries[2]!.tag = '0003_jobs-renamed';
        writeJson(r, 'drizzle/meta/_journal.json', journal);
      },
      (res) =>
        failedWith(res, ['JOURNAL_FILE_MISSING drizzle/0003_jobs-renamed.sql', 'JOURNAL_ENTRY_MISSING drizzle/0003_jobs.sql']),
    );
  });

  it.concurrent('R-MIG-15 R-MIG-12 fails when a frozen SQL file was edited', async () => {
    await onMigrated(
      (r) => r.write('sql/jobs/jobs.sql', `${r.read('sql/jobs/jobs.sql')}ALTER TABLE jobs ADD COLUMN note text;\n`),
      (res) => {
        failedWith(res, ['FROZEN_SQL_EDITED sql/jobs/jobs.sql']);
        expect(res.stderr).toContain('new file loaded by a new migration');
      },
    );
  });

  it.concurrent('R-MIG-15 R-MIG-16 fails on a loaded file without a pin', async () => {
    await onMigrated(
      (r) => {
        const pins = json(r, 'sql/frozen-sql.json');
        delete pins['sql/widgets/constraints.sql'];
        writeJson(r, 'sql/frozen-sql.json', pins);
      },
      (res) => failedWith(res, ['FROZEN_SQL_UNPINNED sql/widgets/constraints.sql']),
    );
  });

  it.concurrent('R-MIG-15 fails on a pin no migration loads (stale) and on a loaded file that is missing', async () => {
    await onMigrated(
      (r) => {
        const pins = json(r, 'sql/frozen-sql.json');
        pins['sql/jobs/old.sql'] = 'b'.repeat(64);
        writeJson(r, 'sql/frozen-sql.json', pins);
        // Deleting a loaded file (its pin stays): a missing loaded file.
        r.unlink('sql/bank-gadgets/constraints.sql');
      },
      (res) => failedWith(res, ['FROZEN_SQL_STALE sql/frozen-sql.json', 'FROZEN_SQL_MISSING sql/bank-gadgets/constraints.sql']),
    );
  });

  it.concurrent('R-MIG-13 R-MIG-16 a new frozen file needs the frozen header; pin records new files', async () => {
    await onMigrated(
      async (r) => {
        const created = await runSvc(['migrations', 'create', 'jobs-priority', '--custom'], { SVC_MIGRATIONS_ROOT: r.root });
        expect(created.code).toBe(0);
        r.write('sql/jobs/priority.sql', 'ALTER TABLE jobs ADD COLUMN priority int;\n');
        r.write('drizzle/0004_jobs-priority.sql', `${r.read('drizzle/0004_jobs-priority.sql')}-- @load sql/jobs/priority.sql\n`);
        const pinned = await runSvc(['migrations', 'pin'], { SVC_MIGRATIONS_ROOT: r.root });
        expect(pinned.stdout).toContain('pinned 4 migrations and 4 frozen SQL files');
        expect(Object.keys(json(r, 'sql/frozen-sql.json'))).toContain('sql/jobs/priority.sql');
        expect(Object.keys(json(r, 'drizzle/meta/migration-hashes.json'))).toContain('0004_jobs-priority.sql');
      },
      (res) => failedWith(res, ['FROZEN_SQL_HEADER sql/jobs/priority.sql']),
    );
  });

  it.concurrent('R-MIG-04 R-MIG-10 R-MIG-11 R-MIG-14 the project passes its own check: 17 migrations, the 16 frozen files pinned', async () => {
    const res = await runSvc(['migrations', 'check'], {});
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    const journal = JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'drizzle/meta/_journal.json'), 'utf8')) as {
      entries: Array<{ tag: string }>;
    };
    // The baseline is the first 17; corrections after it are new migrations (DESIGN.md), each pinned too.
    expect(journal.entries.slice(0, 17).map((e) => e.tag)).toEqual([
      '0001_parties', '0002_identity', '0003_tenants', '0004_institutions', '0005_credentials', '0006_brokers',
      '0007_authorization', '0008_memberships', '0009_teams', '0010_invitations', '0011_bank-users',
      '0012_authorization-scope-ceiling', '0013_authorization-permission-scope-guard', '0014_identity-platform-logins',
      '0015_idempotency', '0016_work', '0017_authorization-scope-ceiling-locks',
    ]);
    const pinned = Object.keys(JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'sql/frozen-sql.json'), 'utf8')) as object);
    expect(res.stdout).toContain(`${journal.entries.length} migrations pinned, ${pinned.length} frozen SQL files pinned`);
    expect(journal.entries.length).toBeGreaterThanOrEqual(17);
    const baselineFiles = ['0015_idempotency.sql', '0016_work.sql', 'permission-scope-guard.sql', 'scope-ceiling-locks.sql', 'scope-ceiling.sql'];
    const domains = ['parties', 'identity', 'tenants', 'institutions', 'credentials', 'brokers', 'authorization', 'memberships', 'teams', 'invitations', 'bank-users'];
    expect(pinned.filter((f) => f.endsWith('/constraints.sql')).sort()).toEqual(domains.map((d) => `sql/${d}/constraints.sql`).sort());
    expect(pinned.filter((f) => !f.endsWith('/constraints.sql')).map((f) => path.basename(f))).toEqual(expect.arrayContaining(baselineFiles));
  });
});
