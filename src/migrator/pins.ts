// Pin files: the SHA-256 of every migration (drizzle/meta/migration-hashes.json) and of every frozen
// SQL file a migration loads (sql/frozen-sql.json). A merged file never changes, so a differing hash
// means someone edited history; `migrations check` reports it, `migrations pin` records new files.
import fs from 'node:fs';
import {
  DRIZZLE_DIR,
  FROZEN_SQL_FILE,
  MIGRATION_HASHES_FILE,
  abs,
  migrationFiles,
  readJson,
  sha256File,
  sortedRecord,
  writeJson,
} from './project-layout.ts';
import { LOAD_DIRECTIVE } from './runner.ts';
import { MigratorError } from './migrator-error.ts';

export type Pins = Record<string, string>;

/** Which migrations are merged (merged.ts mergedMigrations). */
export interface MergedMigrations {
  /** Where the answer came from: a git ref, or 'pins' when no base branch is available. */
  source: string;
  has(migration: string): boolean;
}

export function readMigrationPins(root: string): Pins {
  return readJson<Pins>(abs(root, MIGRATION_HASHES_FILE), {});
}

export function readFrozenPins(root: string): Pins {
  return readJson<Pins>(abs(root, FROZEN_SQL_FILE), {});
}

export function writeMigrationPins(root: string, pins: Pins): void {
  writeJson(abs(root, MIGRATION_HASHES_FILE), sortedRecord(pins));
}

export function writeFrozenPins(root: string, pins: Pins): void {
  writeJson(abs(root, FROZEN_SQL_FILE), sortedRecord(pins));
}

export interface LoadDirective {
  /** The migration file name, e.g. `0001_parties.sql`. */
  migration: string;
  /** The loaded file relative to the root, e.g. `sql/parties/constraints.sql`. */
  target: string;
}

/** Every `-- @load <file>` line of every migration file in drizzle/. */
export function loadDirectives(root: string): LoadDirective[] {
  const out: LoadDirective[] = [];
  for (const migration of migrationFiles(root)) {
    const text = fs.readFileSync(abs(root, `${DRIZZLE_DIR}/${migration}`), 'utf8');
    for (const line of text.split('\n')) {
      const m = LOAD_DIRECTIVE.exec(line.trim());
      if (m) out.push({ migration, target: m[1]! });
    }
  }
  return out;
}

/**
 * Rewrites both pin files from the files as they are now (authors run it before merging). A merged
 * migration, and a frozen SQL file a merged migration loads, keep their pins: when one of them changed
 * (or vanished) nothing is written and PIN_REFUSED names every such file.
 */
export function pinAll(root: string, merged: MergedMigrations): { migrations: number; frozen: number } {
  const oldMigrationPins = readMigrationPins(root);
  const oldFrozenPins = readFrozenPins(root);
  const refused: string[] = [];
  const migrationPins: Pins = {};
  for (const name of migrationFiles(root)) migrationPins[name] = sha256File(abs(root, `${DRIZZLE_DIR}/${name}`));
  for (const [name, hash] of Object.entries(oldMigrationPins)) {
    if (merged.has(name) && migrationPins[name] !== hash) refused.push(`${DRIZZLE_DIR}/${name} (a merged migration)`);
  }
  const frozenPins: Pins = {};
  const loadedByMerged = new Map<string, string>();
  for (const { migration, target } of loadDirectives(root)) {
    const file = abs(root, target);
    if (fs.existsSync(file)) frozenPins[target] = sha256File(file);
    if (merged.has(migration) && !loadedByMerged.has(target)) loadedByMerged.set(target, migration);
  }
  for (const [target, migration] of loadedByMerged) {
    const pinned = oldFrozenPins[target];
    if (pinned !== undefined && frozenPins[target] !== pinned) refused.push(`${target} (loaded by the merged migration ${DRIZZLE_DIR}/${migration})`);
  }
  if (refused.length > 0) {
    throw new MigratorError(
      'PIN_REFUSED',
      `refusing to change the pin of merged files (merged = present in ${merged.source}): ${refused.join(', ')}; ` +
        'a merged migration and the SQL it loads are never edited: revert them and put the change in a new file loaded by a new migration',
    );
  }
  writeMigrationPins(root, migrationPins);
  writeFrozenPins(root, frozenPins);
  return { migrations: Object.keys(migrationPins).length, frozen: Object.keys(frozenPins).length };
}
