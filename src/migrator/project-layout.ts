// Where migration sources live under a project root, and the small file facts the create, check and
// pin commands share (hashes, domain list). Paths in pin files are relative to the root with '/'.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { NAME_PATTERN } from './naming.ts';

export const DRIZZLE_DIR = 'drizzle';
export const META_DIR = 'drizzle/meta';
export const JOURNAL_FILE = 'drizzle/meta/_journal.json';
export const MIGRATION_HASHES_FILE = 'drizzle/meta/migration-hashes.json';
export const SQL_DIR = 'sql';
export const FROZEN_SQL_FILE = 'sql/frozen-sql.json';
export const SCHEMA_DIR = 'src/db/schema';
/** Typed-query-only tables (created by hand-written SQL): never part of generation. */
export const HANDWRITTEN_SCHEMA_DIR = 'src/db/schema/handwritten';
/** A module re-exporting the others is not a domain. */
const NOT_DOMAINS = new Set(['index']);

export function abs(root: string, rel: string): string {
  return path.join(root, ...rel.split('/'));
}

export function sha256File(file: string): string {
  return createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** Top-level schema modules (`src/db/schema/<domain>.ts`), sorted; `handwritten/` is not among them. */
export function schemaModuleFiles(root: string): string[] {
  const dir = abs(root, SCHEMA_DIR);
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') && !e.name.endsWith('.test.ts'))
    .map((e) => `${SCHEMA_DIR}/${e.name}`)
    .sort();
}

/** Every .ts module under `src/db/schema/handwritten/`, recursively. */
export function handwrittenModuleFiles(root: string): string[] {
  const dir = abs(root, HANDWRITTEN_SCHEMA_DIR);
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
    .map((e) => path.relative(root, path.join(e.parentPath, e.name)).split(path.sep).join('/'))
    .sort();
}

/** Domains: names of top-level schema modules plus folders under `sql/` (e.g. sql/work). */
export function listDomains(root: string): string[] {
  const domains = new Set<string>();
  for (const file of schemaModuleFiles(root)) {
    const name = path.basename(file, '.ts');
    if (!NOT_DOMAINS.has(name) && NAME_PATTERN.test(name)) domains.add(name);
  }
  const sqlDir = abs(root, SQL_DIR);
  if (fs.existsSync(sqlDir)) {
    for (const e of fs.readdirSync(sqlDir, { withFileTypes: true })) {
      if (e.isDirectory() && NAME_PATTERN.test(e.name)) domains.add(e.name);
    }
  }
  return [...domains].sort();
}

/** Migration SQL files present in drizzle/ (`NNNN_name.sql`), sorted. */
export function migrationFiles(root: string): string[] {
  const dir = abs(root, DRIZZLE_DIR);
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.sql'))
    .map((e) => e.name)
    .sort();
}

export function snapshotFile(number: number): string {
  return `${META_DIR}/${String(number).padStart(4, '0')}_snapshot.json`;
}

/** Snapshot files present (`drizzle/meta/NNNN_snapshot.json`), by number, sorted. */
export function snapshotNumbers(root: string): number[] {
  const dir = abs(root, META_DIR);
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .map((n) => /^(\d{4})_snapshot\.json$/.exec(n))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}

export function readJson<T>(file: string, fallback: T): T {
  if (!fs.existsSync(file)) return fallback;
  return JSON.parse(fs.readFileSync(file, 'utf8')) as T;
}

/** JSON as committed: two-space indent, keys of pin maps sorted, trailing newline. */
export function writeJson(file: string, value: unknown): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
}

export function sortedRecord(record: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
