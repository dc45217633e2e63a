// `migrations check` (also run in CI): every way the committed migration sources can be wrong, each
// reported with the file to look at. Offline: reads files only.
import fs from 'node:fs';
import { parseTag } from './naming.ts';
import { mergedMigrations, type MergedMigrations } from './merged.ts';
import { loadDirectives, readFrozenPins, readMigrationPins } from './pins.ts';
import {
  DRIZZLE_DIR,
  FROZEN_SQL_FILE,
  JOURNAL_FILE,
  MIGRATION_HASHES_FILE,
  abs,
  migrationFiles,
  readJson,
  sha256File,
  snapshotFile,
  snapshotNumbers,
} from './project-layout.ts';
import { readJournalFile } from './create.ts';
import { compareSnapshots, currentSnapshot, describeChanges, diffStatements, emptySnapshot, latestSnapshot } from './schema-snapshot.ts';
import type { Snapshot } from './schema-snapshot.ts';

export interface CheckFailure {
  /** Stable kind, e.g. SCHEMA_DIVERGED, MIGRATION_EDITED, FROZEN_SQL_UNPINNED. */
  kind: string;
  /** The file to look at, relative to the root. */
  file: string;
  message: string;
}

export interface CheckResult {
  failures: CheckFailure[];
  migrations: number;
  frozenFiles: number;
}

/** Loaded files must be plain relative paths to .sql files under sql/. */
const FROZEN_PATH = /^sql\/(?:[A-Za-z0-9_-][A-Za-z0-9._-]*\/)*[A-Za-z0-9_-][A-Za-z0-9._-]*\.sql$/;

const MAX_LISTED = 40;
const MAX_STATEMENTS = 5;

const FIX_PIN = 'if this is a new, unmerged change run `npm run migrations:pin`; a merged file is never edited';

async function checkSchema(root: string, failures: CheckFailure[]): Promise<void> {
  const latest = latestSnapshot(root);
  const prev = latest?.snapshot ?? emptySnapshot();
  const file = latest?.file ?? 'drizzle/meta (no snapshot yet)';
  const cur = await currentSnapshot(root, prev.id);
  const { changes, renameQuestions } = compareSnapshots(prev, cur);
  if (changes.length === 0) return;
  // Name every changed object; show the first few statements (the full list can be thousands of lines).
  let detail = describeChanges(changes.slice(0, MAX_LISTED)) + (changes.length > MAX_LISTED ? `; … ${changes.length - MAX_LISTED} more` : '');
  if (renameQuestions.length === 0) {
    const statements = await diffStatements(prev, cur, { interactive: false });
    const shown = statements.slice(0, MAX_STATEMENTS).map((s) => {
      const one = s.replace(/\s+/g, ' ').trim();
      return one.length > 240 ? `${one.slice(0, 240)}…` : one;
    });
    detail += `; pending SQL: ${shown.join(' ')}${statements.length > MAX_STATEMENTS ? ` … ${statements.length - MAX_STATEMENTS} more statements` : ''}`;
  }
  failures.push({
    kind: 'SCHEMA_DIVERGED',
    file,
    message: `src/db/schema/*.ts differ from the latest snapshot (${detail}); generate a migration with \`npm run migrations:create -- <domain>-<change>\``,
  });
}

function checkJournal(root: string, failures: CheckFailure[]): void {
  const entries = readJournalFile(root).entries;
  const files = new Set(migrationFiles(root));
  const snapshots = new Set(snapshotNumbers(root));
  const tags = new Set<string>();
  let lastNumber = 0;
  let prevId: string | undefined;
  entries.forEach((entry, i) => {
    const parsed = parseTag(entry.tag);
    if (tags.has(entry.tag)) {
      failures.push({ kind: 'JOURNAL_DUPLICATE', file: JOURNAL_FILE, message: `entry ${entry.tag} appears twice` });
    }
    tags.add(entry.tag);
    if (!parsed || parsed.number !== lastNumber + 1) {
      failures.push({
        kind: 'JOURNAL_NUMBERING',
        file: JOURNAL_FILE,
        message: `entry ${i} (${entry.tag}) should be numbered ${String(lastNumber + 1).padStart(4, '0')}: migrations are numbered 0001, 0002, … in journal order`,
      });
    }
    if (parsed) lastNumber = parsed.number;
    if (!files.has(`${entry.tag}.sql`)) {
      failures.push({
        kind: 'JOURNAL_FILE_MISSING',
        file: `${DRIZZLE_DIR}/${entry.tag}.sql`,
        message: `listed in ${JOURNAL_FILE} but the file does not exist; restore it (merged migrations are never deleted)`,
      });
    }
    if (parsed) {
      const snap = snapshotFile(parsed.number);
      if (!snapshots.has(parsed.number)) {
        failures.push({ kind: 'SNAPSHOT_MISSING', file: snap, message: `snapshot of ${entry.tag} does not exist; restore it` });
      } else {
        const s = readJson<Snapshot>(abs(root, snap), emptySnapshot());
        if (prevId !== undefined && s.prevId !== prevId) {
          failures.push({
            kind: 'SNAPSHOT_CHAIN',
            file: snap,
            message: `prevId ${s.prevId} does not match the id ${prevId} of the previous snapshot; snapshots are written by migrations:create only`,
          });
        }
        prevId = s.id;
      }
    }
  });
  for (const file of files) {
    if (!tags.has(file.replace(/\.sql$/, ''))) {
      failures.push({
        kind: 'JOURNAL_ENTRY_MISSING',
        file: `${DRIZZLE_DIR}/${file}`,
        message: `not listed in ${JOURNAL_FILE}, so it would never run; create migrations with \`npm run migrations:create\``,
      });
    }
  }
  for (const n of snapshots) {
    if (!entries.some((e) => parseTag(e.tag)?.number === n)) {
      failures.push({ kind: 'SNAPSHOT_ORPHAN', file: snapshotFile(n), message: `no journal entry has number ${String(n).padStart(4, '0')}` });
    }
  }
}

const FIX_REPIN = 'it is not merged yet, so record its new hash with `npm run migrations:pin`';

function checkMigrationPins(root: string, failures: CheckFailure[], merged: MergedMigrations): void {
  const pins = readMigrationPins(root);
  for (const name of migrationFiles(root)) {
    const file = `${DRIZZLE_DIR}/${name}`;
    const pinned = pins[name];
    if (!pinned) {
      failures.push({ kind: 'MIGRATION_UNPINNED', file, message: `has no hash in ${MIGRATION_HASHES_FILE}; ${FIX_PIN}` });
    } else if (pinned !== sha256File(abs(root, file)) && !merged.has(name)) {
      failures.push({ kind: 'MIGRATION_PIN_OUTDATED', file, message: `changed since it was pinned; ${FIX_REPIN}` });
    } else if (pinned !== sha256File(abs(root, file))) {
      failures.push({
        kind: 'MIGRATION_EDITED',
        file,
        message: `differs from its hash in ${MIGRATION_HASHES_FILE}: a merged migration is never edited; revert it and put the correction in a new migration`,
      });
    }
  }
  for (const name of Object.keys(pins)) {
    if (!fs.existsSync(abs(root, `${DRIZZLE_DIR}/${name}`))) {
      failures.push({
        kind: 'MIGRATION_PIN_STALE',
        file: MIGRATION_HASHES_FILE,
        message: `pins ${DRIZZLE_DIR}/${name}, which does not exist; restore the migration (or drop the pin if it never merged)`,
      });
    }
  }
}

function checkFrozenSql(root: string, failures: CheckFailure[], merged: MergedMigrations): number {
  const pins = readFrozenPins(root);
  const loaded = new Map<string, string>();
  const loadedByMerged = new Set<string>();
  for (const { migration, target } of loadDirectives(root)) {
    if (!FROZEN_PATH.test(target)) {
      failures.push({
        kind: 'FROZEN_SQL_PATH',
        file: `${DRIZZLE_DIR}/${migration}`,
        message: `loads '${target}': a loaded file is a relative path sql/…/<file>.sql`,
      });
      continue;
    }
    if (!loaded.has(target)) loaded.set(target, migration);
    if (merged.has(migration)) loadedByMerged.add(target);
  }
  for (const [target, migration] of loaded) {
    const file = abs(root, target);
    if (!fs.existsSync(file)) {
      failures.push({ kind: 'FROZEN_SQL_MISSING', file: target, message: `is loaded by ${DRIZZLE_DIR}/${migration} but does not exist` });
      continue;
    }
    const firstLine = fs.readFileSync(file, 'utf8').split('\n', 1)[0] ?? '';
    if (!/^\s*--/.test(firstLine) || !/frozen/i.test(firstLine)) {
      failures.push({
        kind: 'FROZEN_SQL_HEADER',
        file: target,
        message: `must start with a comment line saying it is frozen, e.g. "-- FROZEN once merged: never edit; put changes in a new file loaded by a new migration."`,
      });
    }
    const pinned = pins[target];
    if (!pinned) {
      failures.push({ kind: 'FROZEN_SQL_UNPINNED', file: target, message: `is loaded by ${DRIZZLE_DIR}/${migration} but has no hash in ${FROZEN_SQL_FILE}; ${FIX_PIN}` });
    } else if (pinned !== sha256File(file) && !loadedByMerged.has(target)) {
      failures.push({ kind: 'FROZEN_SQL_PIN_OUTDATED', file: target, message: `changed since it was pinned; no merged migration loads it, ${FIX_REPIN}` });
    } else if (pinned !== sha256File(file)) {
      failures.push({
        kind: 'FROZEN_SQL_EDITED',
        file: target,
        message: `differs from its hash in ${FROZEN_SQL_FILE}: frozen SQL is never edited; revert it and put the change in a new file loaded by a new migration`,
      });
    }
  }
  for (const target of Object.keys(pins)) {
    if (!loaded.has(target)) {
      failures.push({
        kind: 'FROZEN_SQL_STALE',
        file: FROZEN_SQL_FILE,
        message: `pins ${target}, which no migration loads; remove the entry (npm run migrations:pin) or load the file from a migration`,
      });
    }
  }
  return loaded.size;
}

export async function checkMigrations(root: string): Promise<CheckResult> {
  const failures: CheckFailure[] = [];
  checkJournal(root, failures);
  const merged = mergedMigrations(root);
  checkMigrationPins(root, failures, merged);
  const frozenFiles = checkFrozenSql(root, failures, merged);
  try {
    await checkSchema(root, failures);
  } catch (error) {
    const e = error as { code?: string; message?: string };
    failures.push({ kind: e.code ?? 'SCHEMA_UNREADABLE', file: 'src/db/schema', message: e.message ?? String(error) });
  }
  return { failures, migrations: migrationFiles(root).length, frozenFiles };
}
