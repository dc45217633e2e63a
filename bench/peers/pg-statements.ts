// BENCH_PG_STATEMENTS=true: PostgreSQL's own figures per statement (pg_stat_statements) over each
// round's drain, per job, for the system's database: where its database time goes, statement by
// statement. Diagnostics only (stderr); the server then loads the extension, which costs a little.
import type { Sql } from '../../src/db/client.ts';

export function pgStatementsWanted(): boolean {
  return process.env.BENCH_PG_STATEMENTS === 'true';
}

/** How many statements, by execution time, each round prints. */
const TOP = 14;

export interface PgStatementsProbe {
  /** Forgets what came before (the enqueue, the last round). */
  begin(): Promise<void>;
  /** Prints the round's largest statements of the system's database, per job. */
  report(labels: string, jobs: number, log: (line: string) => void): Promise<void>;
}

export async function pgStatementsProbe(sql: Sql): Promise<PgStatementsProbe | null> {
  if (!pgStatementsWanted()) return null;
  await sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`;
  return {
    async begin() {
      await sql`SELECT pg_stat_statements_reset()`;
    },
    async report(labels, jobs, log) {
      const rows = await sql<{ calls: string; ms: number; plan_ms: number; rows: string; query: string }[]>`
        SELECT calls::text, total_exec_time AS ms, total_plan_time AS plan_ms, rows::text, query FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        ORDER BY total_exec_time DESC`;
      const total = rows.reduce((sum, r) => sum + r.ms, 0);
      const calls = rows.reduce((sum, r) => sum + Number(r.calls), 0);
      const planned = rows.reduce((sum, r) => sum + r.plan_ms, 0);
      log(`PG_STATEMENTS ${labels} statements_per_job=${(calls / jobs).toFixed(2)} exec_ms_per_job=${(total / jobs).toFixed(3)} plan_ms_per_job=${(planned / jobs).toFixed(3)}`);
      // The largest by execution time, then those of the most calls not among them (cheap statements
      // that run often: polls, transaction control, per-run round trips).
      const byCalls = rows.slice(TOP).sort((a, b) => Number(b.calls) - Number(a.calls)).slice(0, TOP);
      for (const r of [...rows.slice(0, TOP), ...byCalls]) {
        const query = r.query.replace(/\s+/g, ' ').slice(0, 160);
        log(
          `PG_STATEMENT ${labels} calls_per_job=${(Number(r.calls) / jobs).toFixed(2)} exec_ms_per_job=${(r.ms / jobs).toFixed(4)} ` +
            `ms_per_call=${(r.ms / Math.max(1, Number(r.calls))).toFixed(4)} plan_ms_per_call=${(r.plan_ms / Math.max(1, Number(r.calls))).toFixed(4)} rows_per_call=${(Number(r.rows) / Math.max(1, Number(r.calls))).toFixed(1)} query=${query}`,
        );
      }
    },
  };
}
