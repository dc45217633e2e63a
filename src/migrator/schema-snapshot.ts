// The schema state drizzle-kit diffs: a snapshot built from the top-level schema modules, compared
// with the latest committed snapshot file, never with a live database (so objects made by
// hand-written SQL, like EXCLUDE constraints and triggers, are never proposed for dropping).
import fs from 'node:fs';
import { pathToFileURL } from 'node:url';
import type { DrizzleSnapshotJSON } from 'drizzle-kit/api';
import { MigratorError } from './migrator-error.ts';
import {
  SCHEMA_DIR,
  abs,
  handwrittenModuleFiles,
  readJson,
  schemaModuleFiles,
  snapshotFile,
  snapshotNumbers,
} from './project-layout.ts';

export type Snapshot = DrizzleSnapshotJSON;

// drizzle-kit's API is a large bundle: loaded only by the commands that diff, not by name checks or pins.
const drizzleKit = () => import('drizzle-kit/api');

/** drizzle-kit's id of "no previous snapshot": the first snapshot's prevId. */
export const ORIGIN_SNAPSHOT_ID = '00000000-0000-0000-0000-000000000000';

async function importModule(root: string, rel: string): Promise<Record<string, unknown>> {
  try {
    return (await import(pathToFileURL(abs(root, rel)).href)) as Record<string, unknown>;
  } catch (cause) {
    throw new MigratorError(
      'SCHEMA_MODULE_LOAD',
      `${rel} could not be loaded: ${(cause as Error).message}; fix the module and run the command again`,
      { cause },
    );
  }
}

/**
 * Exports of every top-level schema module, each object once (modules may re-export each other), minus
 * every object also exported from src/db/schema/handwritten/ (tables made by frozen SQL).
 */
export async function schemaExports(root: string, modules: string[] = schemaModuleFiles(root)): Promise<Record<string, unknown>> {
  const excluded = new Set<unknown>();
  for (const rel of handwrittenModuleFiles(root)) {
    for (const value of Object.values(await importModule(root, rel))) excluded.add(value);
  }
  const seen = new Set<unknown>();
  const out: Record<string, unknown> = {};
  for (const rel of modules) {
    for (const [name, value] of Object.entries(await importModule(root, rel))) {
      if (value === null || typeof value !== 'object' && typeof value !== 'function') continue;
      if (excluded.has(value) || seen.has(value)) continue;
      seen.add(value);
      out[`${rel}#${name}`] = value;
    }
  }
  return out;
}

/** Snapshot of the schema modules as they are now, chained after `prevId`. */
export async function currentSnapshot(root: string, prevId: string = ORIGIN_SNAPSHOT_ID): Promise<Snapshot> {
  const { generateDrizzleJson } = await drizzleKit();
  return generateDrizzleJson(await schemaExports(root), prevId);
}

/**
 * The target state of a migration of `domain`: the previous snapshot with the objects exported by
 * src/db/schema/<domain>.ts brought up to date, plus removals (objects no module exports any more).
 * Changes of other domains' modules stay out: they belong to migrations named after those domains.
 */
export async function domainSnapshot(root: string, domain: string, prev: Snapshot): Promise<{ target: Snapshot; full: Snapshot }> {
  const full = await currentSnapshot(root, prev.id);
  const moduleFile = `${SCHEMA_DIR}/${domain}.ts`;
  const own = schemaModuleFiles(root).includes(moduleFile)
    ? (await drizzleKit()).generateDrizzleJson(await schemaExports(root, [moduleFile]), prev.id)
    : emptySnapshot();
  const target = structuredClone(prev) as unknown as Record<string, Record<string, unknown>>;
  for (const kind of KINDS) {
    const from = ((full as Record<string, unknown>)[kind] ?? {}) as Record<string, unknown>;
    const mine = ((own as Record<string, unknown>)[kind] ?? {}) as Record<string, unknown>;
    const into = (target[kind] ??= {});
    for (const key of Object.keys(mine)) into[key] = from[key] ?? mine[key];
    for (const key of Object.keys(into)) if (!(key in from)) delete into[key];
  }
  const result = { ...(target as unknown as Snapshot), id: full.id, prevId: prev.id };
  return { target: result, full };
}

/** The state before the first migration: no objects, drizzle-kit's origin id. */
export function emptySnapshot(): Snapshot {
  return {
    version: '7',
    dialect: 'postgresql',
    tables: {},
    enums: {},
    schemas: {},
    sequences: {},
    roles: {},
    policies: {},
    views: {},
    _meta: { schemas: {}, tables: {}, columns: {} },
    id: ORIGIN_SNAPSHOT_ID,
    prevId: '',
  };
}

export interface LatestSnapshot {
  number: number;
  /** Path relative to the root. */
  file: string;
  snapshot: Snapshot;
}

/** The highest-numbered `drizzle/meta/NNNN_snapshot.json`, or undefined before the first migration. */
export function latestSnapshot(root: string): LatestSnapshot | undefined {
  const number = snapshotNumbers(root).at(-1);
  if (number === undefined) return undefined;
  const file = snapshotFile(number);
  return { number, file, snapshot: readJson<Snapshot>(abs(root, file), emptySnapshot()) };
}

/** JSON with object keys sorted, so two snapshots compare by content, not key order. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );
}

export interface ObjectChange {
  /** tables, enums, schemas, sequences, views, roles, policies. */
  kind: string;
  key: string;
  change: 'added' | 'removed' | 'changed';
}

export interface SchemaDiff {
  changes: ObjectChange[];
  /**
   * Places where drizzle-kit would ask whether something was renamed (objects added and removed of the
   * same kind, or columns added and removed in one table). It asks on a terminal only.
   */
  renameQuestions: string[];
}

const KINDS = ['schemas', 'enums', 'sequences', 'roles', 'policies', 'tables', 'views'] as const;

/** What differs between two snapshots, object by object, ignoring ids. */
export function compareSnapshots(prev: Snapshot, cur: Snapshot): SchemaDiff {
  const changes: ObjectChange[] = [];
  const renameQuestions: string[] = [];
  for (const kind of KINDS) {
    const a = ((prev as Record<string, unknown>)[kind] ?? {}) as Record<string, unknown>;
    const b = ((cur as Record<string, unknown>)[kind] ?? {}) as Record<string, unknown>;
    const added = Object.keys(b).filter((k) => !(k in a));
    const removed = Object.keys(a).filter((k) => !(k in b));
    for (const key of added) changes.push({ kind, key, change: 'added' });
    for (const key of removed) changes.push({ kind, key, change: 'removed' });
    if (added.length && removed.length) {
      renameQuestions.push(`${kind}: added ${added.join(', ')}; removed ${removed.join(', ')}`);
    }
    for (const key of Object.keys(b).filter((k) => k in a)) {
      if (canonical(a[key]) === canonical(b[key])) continue;
      changes.push({ kind, key, change: 'changed' });
      if (kind === 'tables') {
        for (const part of ['columns', 'policies'] as const) {
          const ca = ((a[key] as Record<string, unknown>)[part] ?? {}) as Record<string, unknown>;
          const cb = ((b[key] as Record<string, unknown>)[part] ?? {}) as Record<string, unknown>;
          const addedCols = Object.keys(cb).filter((k) => !(k in ca));
          const removedCols = Object.keys(ca).filter((k) => !(k in cb));
          if (addedCols.length && removedCols.length) {
            renameQuestions.push(
              `table ${key} ${part}: added ${addedCols.join(', ')}; removed ${removedCols.join(', ')}`,
            );
          }
        }
      }
    }
  }
  return { changes, renameQuestions };
}

export function describeChanges(changes: readonly ObjectChange[]): string {
  return changes.map((c) => `${c.kind.replace(/s$/, '')} ${c.key} ${c.change}`).join('; ');
}

/**
 * SQL statements turning `prev` into `cur`, as drizzle-kit generate writes them. When drizzle-kit would
 * ask about renames, it may only do so on a terminal; otherwise this refuses instead of hanging.
 */
export async function diffStatements(
  prev: Snapshot,
  cur: Snapshot,
  options: { interactive: boolean },
): Promise<string[]> {
  const { changes, renameQuestions } = compareSnapshots(prev, cur);
  if (changes.length === 0) return [];
  if (renameQuestions.length && !options.interactive) {
    throw new MigratorError(
      'MIGRATION_RENAME_AMBIGUOUS',
      `the schema change may be a rename (${renameQuestions.join(' | ')}); run migrations:create in a ` +
        `terminal to answer drizzle-kit's rename questions, or split the change into an add and a later drop`,
    );
  }
  const { generateMigration } = await drizzleKit();
  return generateMigration(prev, cur);
}

export function writeSnapshot(root: string, number: number, snapshot: Snapshot): string {
  const rel = snapshotFile(number);
  fs.mkdirSync(abs(root, 'drizzle/meta'), { recursive: true });
  fs.writeFileSync(abs(root, rel), `${JSON.stringify(snapshot, null, 2)}\n`);
  return rel;
}
