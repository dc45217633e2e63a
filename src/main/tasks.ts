// `svc tasks check | emit`: discovers the units under units/ (files *.task.ts and *.handler.ts),
// checks them (discovery, unique names, the name rule, schedules, queues; for check also the type
// check of the units and what they import; every problem names its file) and, for emit, writes the catalog dist/tasks.json that the API loads from SVC_TASKS_CATALOG.
import path from 'node:path';
import { DEFAULT_CATALOG_PATH, emitCatalog, TasksCheckFailed, writeCatalog, type Catalog } from '../work/catalog.ts';
import { typeCheckUnits } from '../work/catalog-typecheck.ts';

const PROJECT_ROOT = path.resolve(import.meta.dirname, '..', '..');

export async function run(args: string[]): Promise<number> {
  const [command, ...rest] = args;
  if ((command !== 'check' && command !== 'emit') || rest.length > 2) {
    console.error('usage: svc tasks check | emit [--out <file>]');
    return 2;
  }
  const root = process.env.SVC_UNITS_ROOT ?? PROJECT_ROOT;
  const dir = process.env.SVC_UNITS_DIR ?? 'units';
  try {
    if (command === 'check') {
      // Both checks run, so one pass reports every problem: discovery's and the compiler's.
      const discovered = await emitCatalog(root, { dir }).catch((error: unknown) => error);
      if (!(discovered instanceof TasksCheckFailed) && discovered instanceof Error) throw discovered;
      const typed = await typeCheckUnits(root, dir);
      const problems = [...(discovered instanceof TasksCheckFailed ? discovered.problems : []), ...typed.problems];
      if (problems.length > 0) throw new TasksCheckFailed(problems);
      const catalog = discovered as Catalog;
      const summary = `${catalog.tasks.length} task(s), ${catalog.subscriptions.length} subscription(s)`;
      console.log(`tasks:check ok: ${summary}; type-checked in ${(typed.elapsedMs / 1000).toFixed(1)} s`);
      return 0;
    }
    const catalog = await emitCatalog(root, { dir });
    const summary = `${catalog.tasks.length} task(s), ${catalog.subscriptions.length} subscription(s)`;
    const outIndex = rest.indexOf('--out');
    const out = outIndex >= 0 && rest[outIndex + 1] ? path.resolve(rest[outIndex + 1]!) : path.join(PROJECT_ROOT, DEFAULT_CATALOG_PATH);
    writeCatalog(out, catalog);
    console.log(`tasks:emit: ${path.relative(process.cwd(), out) || out} (${summary})`);
    return 0;
  } catch (error) {
    if (error instanceof TasksCheckFailed) {
      console.error(error.message);
      return 1;
    }
    throw error;
  }
}
