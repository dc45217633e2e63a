// `svc tasks check | emit`: discovers the units under units/ (files *.task.ts and *.handler.ts),
// checks them (discovery, unique names, the name rule, schedules, queues; every problem names its
// file) and, for emit, writes the catalog dist/tasks.json that the API loads from SVC_TASKS_CATALOG.
import path from 'node:path';
import { DEFAULT_CATALOG_PATH, emitCatalog, TasksCheckFailed, writeCatalog } from '../work/catalog.ts';

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
    const catalog = await emitCatalog(root, { dir });
    const summary = `${catalog.tasks.length} task(s), ${catalog.subscriptions.length} subscription(s)`;
    if (command === 'check') {
      console.log(`tasks:check ok: ${summary}`);
      return 0;
    }
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
