import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { latestMigrationName, migrationNames, migrationStatements } from '../../src/migrator/runner.ts';

const root = path.resolve(import.meta.dirname, '..', 'fixtures', 'migrations', 'migrated');

describe('migration statements', () => {
  it('R-MIG-09 reads migration names in journal order', () => {
    expect(migrationNames({ root })).toEqual(['0001_widgets', '0002_bank-gadgets', '0003_jobs']);
    expect(latestMigrationName({ root })).toBe('0003_jobs');
  });

  it('R-MIG-12 splits on statement breakpoints and runs @load files in place; comment-only chunks are skipped', () => {
    const first = migrationStatements({ root }, '0001_widgets');
    expect(first).toHaveLength(2);
    expect(first[0]).toContain('CREATE TABLE "widgets"');
    expect(first[1]).toContain('CREATE UNIQUE INDEX "widgets_name_key"');
    // 0003_jobs is a custom migration: guidance comments, then `-- @load sql/jobs/jobs.sql`.
    const custom = migrationStatements({ root }, '0003_jobs');
    expect(custom).toHaveLength(1);
    expect(custom[0]).toContain('CREATE TABLE jobs');
  });

  it('a journal entry without its file is a clear error', () => {
    expect(() => migrationStatements({ root }, '0009_missing')).toThrow(/drizzle\/0009_missing\.sql/);
  });
});
