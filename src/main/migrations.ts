// `svc migrations create <name> [--custom] | check | pin`: authoring-time commands over drizzle/ and
// sql/. Offline: they read and write files and never connect to a database.
import path from 'node:path';
import { PROJECT_ROOT } from '../config/migrator.ts';
import { checkMigrations } from '../migrator/check.ts';
import { createMigration } from '../migrator/create.ts';
import { mergedMigrations } from '../migrator/merged.ts';
import { pinAll } from '../migrator/pins.ts';

const USAGE = [
  'usage: svc migrations create <name> [--custom]   next NNNN_<name> from src/db/schema/*.ts (offline)',
  '       svc migrations check                      fail on divergence, edited or unpinned files',
  '       svc migrations pin                        rewrite the hash pins from the current files',
  '  <name>: <domain> for a domain\'s first migration, otherwise <domain>-<change>',
].join('\n');

export async function run(args: string[]): Promise<number> {
  const root = path.resolve(process.env.SVC_MIGRATIONS_ROOT ?? PROJECT_ROOT);
  const [command, ...rest] = args;
  switch (command) {
    case 'create': {
      const custom = rest.includes('--custom');
      const names = rest.filter((a) => a !== '--custom');
      if (names.length !== 1 || names[0]!.startsWith('-')) {
        console.error(USAGE);
        return 2;
      }
      const created = await createMigration(root, names[0]!, {
        custom,
        interactive: Boolean(process.stdin.isTTY && process.stdout.isTTY),
      });
      const kind = custom ? 'custom (add -- @load lines)' : `${created.statements} generated statement(s)`;
      console.log(`created ${created.tag}: ${kind}${created.first ? `, first migration of domain ${created.domain}` : ''}`);
      for (const file of created.files) console.log(`  wrote ${file}`);
      return 0;
    }
    case 'check': {
      if (rest.length) break;
      const result = await checkMigrations(root);
      for (const f of result.failures) console.error(`FAIL ${f.kind} ${f.file}: ${f.message}`);
      if (result.failures.length) {
        console.error(`migrations check: ${result.failures.length} problem(s)`);
        return 1;
      }
      console.log(
        `migrations check: ok (${result.migrations} migrations pinned, ${result.frozenFiles} frozen SQL files pinned, schema matches the latest snapshot)`,
      );
      return 0;
    }
    case 'pin': {
      if (rest.length) break;
      const pinned = pinAll(root, mergedMigrations(root));
      console.log(`pinned ${pinned.migrations} migrations and ${pinned.frozen} frozen SQL files`);
      return 0;
    }
  }
  console.error(USAGE);
  return 2;
}
