// `svc emit`: writes every build artifact into dist/ — schema-version.json, permissions.json,
// tasks.json, openapi.json. Any failing emit fails the command (and so `npm run build` and the image
// build) with a message naming the cause. None of them is ever committed.
import fs from 'node:fs';
import path from 'node:path';
import { latestMigrationName } from '../migrator/runner.ts';

export const PROJECT_ROOT = path.resolve(import.meta.dirname, '..', '..');
export const DIST_DIR = path.join(PROJECT_ROOT, 'dist');

/** dist/schema-version.json: the newest migration name of this build (the readiness gate's target). */
export function emitSchemaVersion(root: string = PROJECT_ROOT, dist: string = DIST_DIR): string {
  const latest = latestMigrationName({ root });
  if (!latest) throw Object.assign(new Error('no migration in drizzle/meta/_journal.json'), { code: 'EMIT_SCHEMA_VERSION' });
  fs.mkdirSync(dist, { recursive: true });
  fs.writeFileSync(path.join(dist, 'schema-version.json'), `${JSON.stringify({ latestMigration: latest }, null, 2)}\n`);
  return latest;
}

export async function emitAll(log: (line: string) => void = console.log): Promise<void> {
  const latest = emitSchemaVersion();
  log(`emit: dist/schema-version.json (${latest})`);
  const steps: Array<[string, () => Promise<{ run(args: string[]): Promise<number> }>]> = [
    ['permissions', () => import('./permissions.ts')],
    ['tasks', () => import('./tasks.ts')],
    ['openapi', () => import('./openapi.ts')],
  ];
  for (const [name, load] of steps) {
    const code = await (await load()).run(['emit']);
    if (code !== 0) {
      throw Object.assign(new Error(`${name} emit failed (see the message above)`), { code: 'EMIT_FAILED' });
    }
  }
}

export async function run(args: string[]): Promise<number> {
  if (args.length > 0) {
    console.error('usage: svc emit');
    return 2;
  }
  await emitAll();
  return 0;
}
