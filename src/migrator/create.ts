// `migrations create <name> [--custom]`: numbers and names the next migration, generates its SQL and
// snapshot offline from the schema modules (drizzle-kit's API over the latest snapshot file, never a
// live database), appends it to the journal and pins what it wrote.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { MigratorError } from './migrator-error.ts';
import { checkNewName, formatTag, parseTag } from './naming.ts';
import { readFrozenPins, readMigrationPins, writeFrozenPins, writeMigrationPins } from './pins.ts';
import {
  DRIZZLE_DIR,
  JOURNAL_FILE,
  abs,
  listDomains,
  migrationFiles,
  readJson,
  sha256File,
  snapshotNumbers,
  writeJson,
} from './project-layout.ts';
import { BREAKPOINT, type JournalEntry } from './runner.ts';
import {
  compareSnapshots,
  describeChanges,
  diffStatements,
  domainSnapshot,
  emptySnapshot,
  latestSnapshot,
  writeSnapshot,
} from './schema-snapshot.ts';

export interface Journal {
  version: string;
  dialect: string;
  entries: JournalEntry[];
}

export interface CreateOptions {
  /** Hand-written migration: no generated SQL; the author adds `-- @load` lines. */
  custom?: boolean;
  /** True on a terminal, where drizzle-kit may ask whether a change is a rename. Default false. */
  interactive?: boolean;
}

export interface CreatedMigration {
  tag: string;
  domain: string;
  first: boolean;
  statements: number;
  /** Files written or changed, relative to the root. */
  files: string[];
}

export function readJournalFile(root: string): Journal {
  return readJson<Journal>(abs(root, JOURNAL_FILE), { version: '7', dialect: 'postgresql', entries: [] });
}

/** Names already used, without numbers: from the journal and from any .sql file in drizzle/. */
export function usedMigrationNames(root: string): string[] {
  const names: string[] = [];
  const add = (tag: string) => {
    const name = parseTag(tag)?.name ?? tag;
    if (!names.includes(name)) names.push(name);
  };
  for (const e of readJournalFile(root).entries) add(e.tag);
  for (const file of migrationFiles(root)) add(file.replace(/\.sql$/, ''));
  return names;
}

function nextNumber(root: string): number {
  const numbers = [
    ...readJournalFile(root).entries.map((e) => parseTag(e.tag)?.number ?? 0),
    ...migrationFiles(root).map((f) => parseTag(f.replace(/\.sql$/, ''))?.number ?? 0),
    ...snapshotNumbers(root),
  ];
  return Math.max(0, ...numbers) + 1;
}

export function constraintsFile(domain: string): string {
  return `sql/${domain}/constraints.sql`;
}

function constraintsTemplate(domain: string, file: string, tag: string): string {
  return [
    `-- FROZEN once merged: ${file}, loaded by drizzle/${tag}.sql — never edit; put changes in a new file loaded by a new migration.`,
    `-- Hand-written SQL of the ${domain} domain that drizzle-kit cannot express: EXCLUDE constraints with GiST,`,
    `-- composite foreign keys reusing columns of another key, foreign keys to later domains, functions and`,
    `-- triggers. It runs right after the generated statements of ${tag}. It may stay empty; it is pinned in`,
    `-- sql/frozen-sql.json either way: after editing it (before merging) run \`npm run migrations:pin\`.`,
    '',
  ].join('\n');
}

function customTemplate(tag: string): string {
  return [
    `-- Custom migration ${tag}: hand written, no generated SQL (the schema snapshot is unchanged).`,
    `-- Add one line per frozen SQL file to run, in order, written exactly like this (without the leading "-- "):`,
    `--   -- @load sql/<domain>/<file>.sql`,
    `-- Each loaded file starts with a comment line saying it is frozen (for example`,
    `-- "-- FROZEN once merged: never edit; put changes in a new file loaded by a new migration.") and is`,
    `-- pinned in sql/frozen-sql.json: run \`npm run migrations:pin\` before merging, then never edit it.`,
    '',
  ].join('\n');
}

export async function createMigration(root: string, name: string, options: CreateOptions = {}): Promise<CreatedMigration> {
  const owner = checkNewName(name, listDomains(root), usedMigrationNames(root));
  const number = nextNumber(root);
  const tag = formatTag(number, name);
  const prev = latestSnapshot(root)?.snapshot ?? emptySnapshot();
  const files: string[] = [];

  let text: string;
  let statements = 0;
  let snapshot;
  let loaded: string | undefined;
  if (options.custom) {
    // Hand-written SQL changes nothing drizzle-kit models: the snapshot carries over, re-chained.
    snapshot = { ...prev, id: randomUUID(), prevId: prev.id };
    text = customTemplate(tag);
  } else {
    const { target, full } = await domainSnapshot(root, owner.domain, prev);
    snapshot = target;
    const sql = await diffStatements(prev, snapshot, { interactive: options.interactive ?? false });
    if (sql.length === 0) {
      const elsewhere = compareSnapshots(prev, full).changes;
      throw new MigratorError(
        'MIGRATION_NO_CHANGES',
        elsewhere.length
          ? `no schema changes in src/db/schema/${owner.domain}.ts; the pending changes belong to other domains ` +
            `(${describeChanges(elsewhere.slice(0, 10))}${elsewhere.length > 10 ? '; …' : ''}): name the migration after their domain, or use --custom for a hand-written one`
          : `no schema changes: src/db/schema/*.ts match the latest snapshot; use --custom for a hand-written migration`,
      );
    }
    statements = sql.length;
    const parts = [...sql];
    if (owner.first) {
      loaded = constraintsFile(owner.domain);
      parts.push(`-- @load ${loaded}\n`);
    }
    text = parts.join(`\n${BREAKPOINT}\n`);
    if (!text.endsWith('\n')) text += '\n';
  }

  if (loaded && !fs.existsSync(abs(root, loaded))) {
    fs.mkdirSync(path.dirname(abs(root, loaded)), { recursive: true });
    fs.writeFileSync(abs(root, loaded), constraintsTemplate(owner.domain, loaded, tag));
    files.push(loaded);
  }
  const sqlFile = `${DRIZZLE_DIR}/${tag}.sql`;
  fs.mkdirSync(abs(root, DRIZZLE_DIR), { recursive: true });
  fs.writeFileSync(abs(root, sqlFile), text);
  files.push(sqlFile);
  files.push(writeSnapshot(root, number, snapshot));

  const journal = readJournalFile(root);
  journal.entries.push({ idx: journal.entries.length, version: '7', when: Date.now(), tag, breakpoints: true });
  writeJson(abs(root, JOURNAL_FILE), journal);
  files.push(JOURNAL_FILE);

  const migrationPins = readMigrationPins(root);
  migrationPins[`${tag}.sql`] = sha256File(abs(root, sqlFile));
  writeMigrationPins(root, migrationPins);
  files.push('drizzle/meta/migration-hashes.json');
  if (loaded) {
    const frozen = readFrozenPins(root);
    if (!frozen[loaded]) {
      frozen[loaded] = sha256File(abs(root, loaded));
      writeFrozenPins(root, frozen);
      files.push('sql/frozen-sql.json');
    }
  }
  return { tag, domain: owner.domain, first: owner.first, statements, files };
}
