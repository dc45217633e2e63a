// One postgres.js pool per process. Every query goes through it as a tagged template; the drizzle
// schema (src/db/schema) describes the tables for migrations and is not a query layer.
import postgres from 'postgres';

export type Sql = postgres.Sql;
export type TxSql = postgres.TransactionSql;

export interface DbOptions {
  /** Maximum pool size; workers check it against their slots (2 x slots + 2). */
  max?: number;
  /** Application name shown in pg_stat_activity, e.g. `svc-api`. */
  applicationName?: string;
}

export function createSql(url: string, options: DbOptions = {}): Sql {
  return postgres(url, {
    max: options.max ?? 10,
    // Instants stay strings until serialized: postgres.js would otherwise build Date objects we never need.
    onnotice: () => {},
    connection: { application_name: options.applicationName ?? 'svc' },
  });
}
