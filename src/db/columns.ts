// Column conventions shared by every drizzle table (domain schema modules and the typed-only
// hand-written ones), so ids, instants and validity dates are declared the same way everywhere.
import { sql } from 'drizzle-orm';
import { bigint, customType, date, foreignKey, jsonb, timestamp, type PgColumn } from 'drizzle-orm/pg-core';

/**
 * Internal numeric key: `bigint GENERATED ALWAYS AS IDENTITY`, so an INSERT supplying `id` is refused.
 * Read as a JS number (ids stay far below 2^53); never exposed outside the service (public ids are `uid`).
 */
export const identityId = () => bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity();

/** A bigint reference to another table's numeric id. */
export const bigintRef = (name: string) => bigint(name, { mode: 'number' });

/** An instant: timestamptz, read as the ISO-like string the driver returns. */
export const instant = (name: string) => timestamp(name, { withTimezone: true, mode: 'string' });

/**
 * An instant set by the database clock at insert (`clock_timestamp()`, not transaction start):
 * creation, consumption and audit times never come from clients.
 */
export const clockInstant = (name: string) => instant(name).notNull().default(sql`clock_timestamp()`);

/** A business date (validity bounds: half-open [valid_from, valid_until)). */
export const day = (name: string) => date(name, { mode: 'string' });

/** A JSON object column defaulting to `{}`; pair it with a CHECK on jsonb_typeof and the byte cap. */
export const jsonObject = (name: string) =>
  jsonb(name).$type<Record<string, unknown>>().notNull().default(sql`'{}'::jsonb`);

/**
 * A named foreign key (NO ACTION, not deferrable: the only kind the schema uses). Names are given so
 * they stay under PostgreSQL's 63-byte identifier limit and read the same in the database and the model.
 */
export function fk(name: string, columns: [PgColumn, ...PgColumn[]], foreignColumns: [PgColumn, ...PgColumn[]]) {
  return foreignKey({ name, columns, foreignColumns });
}

/** bytea read as a Node Buffer (postgres.js returns Buffers for bytea): digests and ciphertexts. */
export const bytea = customType<{ data: Buffer; driverData: Buffer }>({ dataType: () => 'bytea' });
