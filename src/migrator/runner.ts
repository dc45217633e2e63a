// Applies the migrations listed in drizzle/meta/_journal.json, by name, each in its own transaction,
// under a session advisory lock so two migrators never interleave. Applied names are recorded in
// `mikro_orm_migrations` (the spec's name for the migration-control table).
import fs from 'node:fs';
import path from 'node:path';
import type { Sql } from '../db/client.ts';
import { MigratorError } from './migrator-error.ts';

/** Key of the advisory lock every migrator takes; any constant shared by all builds works. */
export const MIGRATOR_LOCK_KEY = 7_263_001;
export const CONTROL_TABLE = 'mikro_orm_migrations';
/** drizzle-kit separates statements with this marker. */
export const BREAKPOINT = '--> statement-breakpoint';
/** A line `-- @load sql/<file>.sql` inside a migration runs that frozen file at that point. */
export const LOAD_DIRECTIVE = /^--\s*@load\s+(\S+)\s*$/;

export interface JournalEntry {
  idx: number;
  tag: string;
  when: number;
  version?: string;
  breakpoints?: boolean;
}

export interface MigrationSource {
  /** Project root holding `drizzle/` and `sql/`. */
  root: string;
}

export function readJournal({ root }: MigrationSource): JournalEntry[] {
  const file = path.join(root, 'drizzle', 'meta', '_journal.json');
  if (!fs.existsSync(file)) return [];
  const journal = JSON.parse(fs.readFileSync(file, 'utf8')) as { entries: JournalEntry[] };
  return journal.entries;
}

/** Names of the migrations of this build, oldest first. */
export function migrationNames(src: MigrationSource): string[] {
  return readJournal(src).map((e) => e.tag);
}

/** The newest migration name of this build, or undefined when there is none. */
export function latestMigrationName(src: MigrationSource): string | undefined {
  return migrationNames(src).at(-1);
}

/** The SQL chunks of one migration, with `@load` directives replaced by the loaded file's text. */
export function migrationStatements(src: MigrationSource, name: string): string[] {
  const file = path.join(src.root, 'drizzle', `${name}.sql`);
  if (!fs.existsSync(file)) {
    throw new MigratorError('MIGRATION_FILE_MISSING', `drizzle/${name}.sql is listed in the journal but missing; restore it`);
  }
  const text = fs.readFileSync(file, 'utf8');
  const chunks: string[] = [];
  for (const part of text.split(BREAKPOINT)) {
    let buffer: string[] = [];
    for (const line of part.split('\n')) {
      const load = LOAD_DIRECTIVE.exec(line.trim());
      if (load) {
        if (buffer.join('\n').trim()) chunks.push(buffer.join('\n'));
        buffer = [];
        const loaded = path.join(src.root, load[1]!);
        if (!fs.existsSync(loaded)) {
          throw new MigratorError('FROZEN_SQL_MISSING', `${load[1]} (loaded by drizzle/${name}.sql) is missing; restore it`);
        }
        chunks.push(fs.readFileSync(loaded, 'utf8'));
      } else {
        buffer.push(line);
      }
    }
    if (buffer.join('\n').trim()) chunks.push(buffer.join('\n'));
  }
  // Comment-only chunks (a custom migration's guidance text) are not sent: nothing to run.
  return chunks.filter((c) => c.split('\n').some((line) => line.trim() && !line.trim().startsWith('--')));
}

export async function ensureControlTable(sql: Sql): Promise<void> {
  // Shaped like MikroORM's own table so the name keeps its meaning: serial id, name, executed_at.
  await sql.unsafe(`CREATE TABLE IF NOT EXISTS ${CONTROL_TABLE} (
    id serial PRIMARY KEY,
    name varchar(255) NOT NULL,
    executed_at timestamptz NOT NULL DEFAULT clock_timestamp()
  )`);
}

export interface AppliedMigration {
  name: string;
  executedAt: string;
}

export async function appliedMigrations(sql: Sql): Promise<AppliedMigration[]> {
  const exists = await sql`SELECT to_regclass(${CONTROL_TABLE}) IS NOT NULL AS ok`;
  if (!exists[0]?.ok) return [];
  const rows = await sql.unsafe(
    `SELECT name, to_char(executed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS executed_at
       FROM ${CONTROL_TABLE} ORDER BY id`,
  );
  return rows.map((r) => ({ name: r.name as string, executedAt: r.executed_at as string }));
}

/** Migrations of this build not yet recorded in the control table, oldest first. */
export async function pendingMigrations(sql: Sql, src: MigrationSource): Promise<string[]> {
  const done = new Set((await appliedMigrations(sql)).map((m) => m.name));
  return migrationNames(src).filter((name) => !done.has(name));
}

/**
 * Applies every pending migration in journal order and returns the names applied. Holds the advisory
 * lock on one reserved connection for the whole run; a second migrator waits, then finds nothing to do.
 */
export async function applyMigrations(
  sql: Sql,
  src: MigrationSource,
  log: (line: string) => void = () => {},
): Promise<string[]> {
  const conn = await sql.reserve();
  try {
    await conn`SELECT pg_advisory_lock(${MIGRATOR_LOCK_KEY})`;
    try {
      await ensureControlTable(conn);
      const done = new Set((await appliedMigrations(conn as unknown as Sql)).map((m) => m.name));
      const applied: string[] = [];
      for (const name of migrationNames(src)) {
        if (done.has(name)) continue;
        const statements = migrationStatements(src, name);
        await conn.unsafe('BEGIN');
        try {
          for (const statement of statements) await conn.unsafe(statement).simple();
          await conn.unsafe(`INSERT INTO ${CONTROL_TABLE} (name) VALUES ($1)`, [name]);
          await conn.unsafe('COMMIT');
        } catch (cause) {
          await conn.unsafe('ROLLBACK');
          // Nothing of the failed migration stays, and it is not recorded: fixing it and rerunning is safe.
          throw new MigratorError(
            'MIGRATION_FAILED',
            `migration ${name} failed and was rolled back: ${(cause as Error).message}`,
            { cause },
          );
        }
        log(`applied ${name}`);
        applied.push(name);
      }
      return applied;
    } finally {
      await conn`SELECT pg_advisory_unlock(${MIGRATOR_LOCK_KEY})`;
    }
  } finally {
    conn.release();
  }
}
