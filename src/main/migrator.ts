// `svc migrator deploy | apply | status | db-seed [--class <Name>]`: the migrator executable. Runs
// one command against DATABASE_URL (or the embedded PostgreSQL) and exits. One log line per step;
// never the URL or any other credential.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadMigratorConfig, migrationsRoot, type MigratorConfig } from '../config/migrator.ts';
import { createSql } from '../db/client.ts';
import { resolveDatabase } from '../db/connect.ts';
import { MigratorError } from '../migrator/migrator-error.ts';
import { applyMigrations, latestMigrationName } from '../migrator/runner.ts';
import { runSeeders, type Seeder } from '../migrator/seed-runner.ts';
import { formatStatus, migrationStatus } from '../migrator/status.ts';
import { readRegistryFile } from '../permissions/registry-file.ts';

const USAGE = [
  'usage: svc migrator deploy                   apply pending migrations, then the default seeders',
  '       svc migrator apply                    apply pending migrations only',
  '       svc migrator status                   list every migration: applied or pending',
  '       svc migrator db-seed [--class <Name>] run the default seeders, or one named seeder',
].join('\n');

interface SeederLists {
  defaultSeeders: Seeder[];
  namedSeeders: Record<string, Seeder>;
}

/** The build's seeders: `<root>/seeders/index.ts` (a fixture root brings its own). */
async function loadSeeders(root: string): Promise<SeederLists> {
  const file = path.join(root, 'seeders', 'index.ts');
  if (!fs.existsSync(file)) return { defaultSeeders: [], namedSeeders: {} };
  const mod = (await import(pathToFileURL(file).href)) as Partial<SeederLists>;
  return { defaultSeeders: mod.defaultSeeders ?? [], namedSeeders: mod.namedSeeders ?? {} };
}

function pickSeeders(lists: SeederLists, className: string | undefined): Seeder[] {
  if (className === undefined) return lists.defaultSeeders;
  const found = lists.namedSeeders[className] ?? lists.defaultSeeders.find((s) => s.name === className);
  if (found) return [found];
  const known = [...new Set([...lists.defaultSeeders.map((s) => s.name), ...Object.keys(lists.namedSeeders)])];
  throw new MigratorError(
    'SEEDER_UNKNOWN',
    `unknown seeder '${className}'; known seeders: ${known.sort().join(', ') || '(none)'}`,
  );
}

function parseArgs(args: string[]): { command?: string; className?: string; bad: boolean } {
  const [command, ...rest] = args;
  let className: string | undefined;
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    if (a === '--class' && command === 'db-seed' && rest[i + 1] && className === undefined) className = rest[++i];
    else if (a.startsWith('--class=') && command === 'db-seed' && className === undefined) className = a.slice(8);
    else return { bad: true };
  }
  const bad = !command || !['deploy', 'apply', 'status', 'db-seed'].includes(command) || className === '';
  return { command, className, bad };
}

export async function run(args: string[]): Promise<number> {
  const { command, className, bad } = parseArgs(args);
  if (bad || !command) {
    console.error(USAGE);
    return 2;
  }
  const config: MigratorConfig = loadMigratorConfig(process.env);
  const root = migrationsRoot(config);
  const log = (line: string) => console.log(`migrator: ${line}`);
  const seeding = command === 'deploy' || command === 'db-seed';
  // Resolve the seeders before touching the database, so an unknown --class fails fast.
  const seeders = seeding ? pickSeeders(await loadSeeders(root), className) : [];
  // The registry the PermissionsSeeder projects, read before the first migration: a missing or invalid
  // file found only at seeding time would leave the database migrated and unseeded.
  if (seeding && config.SVC_PERMISSIONS_REGISTRY) readRegistryFile(path.resolve(root, config.SVC_PERMISSIONS_REGISTRY));

  const db = await resolveDatabase(
    {
      DATABASE_URL: config.DATABASE_URL,
      SVC_DATA_DIR: config.SVC_DATA_DIR,
      SVC_EMBEDDED_PG_PORT: config.SVC_EMBEDDED_PG_PORT?.toString(),
    },
    log,
  );
  log(db.embedded ? 'using the embedded PostgreSQL' : 'using the database of DATABASE_URL');
  const sql = createSql(db.url, { max: 2, applicationName: 'svc-migrator' });
  try {
    if (command === 'status') {
      for (const line of formatStatus(await migrationStatus(sql, { root }))) console.log(line);
      return 0;
    }
    if (command === 'deploy' || command === 'apply') {
      log('waiting for the migration lock');
      const applied = await applyMigrations(sql, { root }, log);
      log(
        applied.length
          ? `applied ${applied.length} migration(s); schema at ${latestMigrationName({ root })}`
          : `no pending migrations; schema at ${latestMigrationName({ root }) ?? '(no migrations)'}`,
      );
    }
    if (seeding) {
      await runSeeders(sql, seeders, { env: process.env, log, root });
    }
    log(`${command} done`);
    return 0;
  } finally {
    await sql.end({ timeout: 5 });
    await db.stop();
  }
}
