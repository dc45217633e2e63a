// Which database a process's Redis entries belong to. Redis may be shared by stacks with databases
// of their own (two clones of the project on one machine's Redis, a database cloned from a template,
// a data directory recreated): an entry written for one database must never be served for another.
// The identity is the cluster's system identifier (random per initdb) and the database's oid (new
// for every CREATE DATABASE, clones included); without EXECUTE on pg_control_system() the server's
// address stands in for the cluster. A physical backup restored in place keeps both, which is why a
// cache entry is never what makes a run skip its effect (the ledger decides, src/work/runtime/store/idempotency.ts).
import { createHash } from 'node:crypto';
import type { Sql } from '../db/client.ts';

const identities = new WeakMap<Sql, Promise<string>>();
const known = new WeakMap<Sql, string>();

/** Reads the database's identity once per connection pool (a failed read is retried by the next caller). */
export function databaseIdentityOf(sql: Sql): Promise<string> {
  const pending = identities.get(sql);
  if (pending) return pending;
  const reading = readDatabaseIdentity(sql);
  identities.set(sql, reading);
  reading.then(
    (identity) => known.set(sql, identity),
    () => {
      if (identities.get(sql) === reading) identities.delete(sql);
    },
  );
  return reading;
}

/**
 * The identity if it has been read already, else undefined (and a read is started in the background).
 * For the delivery path, which must not wait on the database for a Redis key: without the identity a
 * delivery simply takes no gate and the database decides, as when Redis is down.
 */
export function knownDatabaseIdentity(sql: Sql): string | undefined {
  const identity = known.get(sql);
  if (identity === undefined) databaseIdentityOf(sql).catch(() => {});
  return identity;
}

/** 16 hex characters of SHA-256 over the cluster (or server address) and the database's oid and name. */
export async function readDatabaseIdentity(sql: Sql): Promise<string> {
  const [row] = await sql<{ readable: boolean; address: string; oid: string; name: string }[]>`
    SELECT has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE') AS readable,
           coalesce(host(inet_server_addr()), 'socket') || ':' || coalesce(inet_server_port()::text, '') AS address,
           d.oid::text AS oid, d.datname AS name
      FROM pg_catalog.pg_database d WHERE d.datname = current_database()`;
  // A statement of its own: PostgreSQL checks EXECUTE when it starts a statement, even for a branch never taken.
  const [control] = row!.readable ? await sql<{ id: string }[]>`SELECT system_identifier::text AS id FROM pg_catalog.pg_control_system()` : [];
  const cluster = control ? control.id : `address ${row!.address}`;
  return createHash('sha256').update(`${cluster}\n${row!.oid}\n${row!.name}`).digest('hex').slice(0, 16);
}
