// `migrator status`: every migration of this build with its state, plus applied names this build does
// not know (a newer build ran against this database, or a migration was renamed).
import type { Sql } from '../db/client.ts';
import { appliedMigrations, migrationNames, type MigrationSource } from './runner.ts';

export interface MigrationState {
  name: string;
  state: 'applied' | 'pending';
  /** ISO 8601 instant with Z; undefined while pending. */
  executedAt?: string;
  /** False for an applied name that is not in this build's journal. */
  known: boolean;
}

export async function migrationStatus(sql: Sql, src: MigrationSource): Promise<MigrationState[]> {
  const applied = await appliedMigrations(sql);
  const byName = new Map(applied.map((m) => [m.name, m.executedAt]));
  const names = migrationNames(src);
  const rows: MigrationState[] = names.map((name) => {
    const executedAt = byName.get(name);
    return executedAt ? { name, state: 'applied', executedAt, known: true } : { name, state: 'pending', known: true };
  });
  for (const m of applied) {
    if (!names.includes(m.name)) rows.push({ name: m.name, state: 'applied', executedAt: m.executedAt, known: false });
  }
  return rows;
}

/** A plain-text table, one line per migration, then a summary line. */
export function formatStatus(rows: readonly MigrationState[]): string[] {
  const known = rows.filter((r) => r.known);
  const unknown = rows.filter((r) => !r.known);
  const width = Math.max('migration'.length, ...rows.map((r) => r.name.length));
  const line = (r: MigrationState) => `${r.name.padEnd(width)}  ${r.state.padEnd(7)}  ${r.executedAt ?? '-'}`;
  const out = [`${'migration'.padEnd(width)}  ${'state'.padEnd(7)}  executed_at`, ...known.map(line)];
  if (unknown.length) out.push('applied but unknown to this build:', ...unknown.map(line));
  const pending = known.filter((r) => r.state === 'pending').length;
  out.push(`${known.length - pending} applied, ${pending} pending, ${unknown.length} unknown to this build`);
  return out;
}
