// Which migrations are merged: those present in the base branch's tree. A merged migration and every
// frozen SQL file it loads never change again, so `migrations pin` refuses to re-pin them and
// `migrations check` tells an edit of a merged file (revert it) from one of a file still under review
// (re-pin it). Git answers; without a repository or base branch, every pinned migration counts as merged.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { DRIZZLE_DIR, abs } from './project-layout.ts';
import { readMigrationPins, type MergedMigrations } from './pins.ts';

export type { MergedMigrations };

/** Base branches tried in order when SVC_MIGRATIONS_BASE_REF is unset. */
const DEFAULT_BASE_REFS = ['origin/main', 'main'];


function git(root: string, args: string[]): string | undefined {
  const res = spawnSync('git', ['-C', root, ...args], { encoding: 'utf8' });
  return res.status === 0 ? res.stdout.trim() : undefined;
}

/** `baseRef`: SVC_MIGRATIONS_BASE_REF, else origin/main, else main. */
export function mergedMigrations(root: string, baseRef: string | undefined = process.env.SVC_MIGRATIONS_BASE_REF): MergedMigrations {
  const top = git(root, ['rev-parse', '--show-toplevel']);
  const ref = top ? (baseRef ? [baseRef] : DEFAULT_BASE_REFS).find((r) => git(root, ['rev-parse', '--verify', '--quiet', `${r}^{commit}`])) : undefined;
  if (top && ref) {
    const dir = path.relative(top, abs(root, DRIZZLE_DIR)).split(path.sep).join('/');
    const listed = git(root, ['ls-tree', '--name-only', ref, '--', `${dir}/`]) ?? '';
    const names = new Set(listed.split('\n').filter((l) => l.endsWith('.sql')).map((l) => l.slice(l.lastIndexOf('/') + 1)));
    return { source: ref, has: (m) => names.has(m) };
  }
  // No base branch to compare with: strict, every pinned migration is treated as merged.
  const pins = readMigrationPins(root);
  return { source: 'pins', has: (m) => pins[m] !== undefined };
}
