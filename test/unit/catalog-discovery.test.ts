// Discovery of units and the tasks.json catalog: what `tasks:check` refuses (each problem naming its
// file), what the catalog holds, and how the API loads it without importing unit code.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runNodeProcess, TYPECHECK_CLI_TIMEOUT_MS } from '../support/node-process.ts';
import { buildCatalog, CatalogError, discoverUnits, emitCatalog, loadCatalog, subscribersOf, TasksCheckFailed, writeCatalog } from '../../src/work/catalog.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const CASES = path.join(ROOT, 'test/fixtures/units/catalog');
const at = (name: string) => path.join(CASES, name);

const EMPTY_OBJECT = { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: {} };

async function problems(name: string) {
  return (await discoverUnits(at(name))).problems;
}

describe('tasks:check', () => {
  it('R-UNT-13 R-UNT-01 builds the catalog from *.task.ts and *.handler.ts files', async () => {
    const catalog = await emitCatalog(at('valid'));
    expect(catalog).toEqual({
      version: 1,
      tasks: [
        { name: 'demo.nightly_report', queue: 'bulk', context: 'platform', concurrency: 1, timeoutSeconds: 60, schedule: 'rate(1 day)', overlap: 'skip', rateLimit: null, file: 'units/demo/nightly.task.ts', payloadSchema: EMPTY_OBJECT },
        { name: 'demo.ping', queue: 'default', context: 'tenant', concurrency: 3, timeoutSeconds: 30, schedule: null, overlap: null, rateLimit: null, file: 'units/demo/ping.task.ts',
          payloadSchema: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { n: { type: 'number' } }, required: ['n'] } },
      ],
      subscriptions: [
        { name: 'demo.pong_on_ping', event: { type: 'demo.pinged', version: 2 }, queue: 'critical', context: 'tenant', concurrency: 1, timeoutSeconds: 60, rateLimit: null, file: 'units/demo/pong.handler.ts', payloadSchema: EMPTY_OBJECT },
      ],
    });
  });

  it('refuses a payload schema that has no JSON Schema form, naming the unit and the field', async () => {
    expect(await problems('unrepresentable-payload')).toEqual([
      { file: 'units/demo/dated.task.ts', problem: expect.stringMatching(/^unit 'demo\.dated': field payload: payload schema cannot be expressed as JSON Schema: field at \(Date\)/) },
    ]);
    await expect(emitCatalog(at('unrepresentable-payload'))).rejects.toBeInstanceOf(TasksCheckFailed);
  });

  it('refuses a retry policy out of range (receives 1..5, base 1 s..cap, cap 1 s..12 h, jitter full|none), naming field and rule', async () => {
    const found = await problems('bad-retry');
    const of = (file: string) => found.filter((p) => p.file === file).map((p) => p.problem);
    expect(of('units/demo/retry.task.ts')).toEqual([
      "unit 'demo.retry': " + 'retry.maxReceives must be a whole number from 1 to 5 (the runtime\'s receive limit), not 6',
      "unit 'demo.retry': retry.backoff.baseMs must be a whole number of ms from 1000 (the queue counts visibility in whole seconds) to 43200000, not -1",
      "unit 'demo.retry': " + 'retry.backoff.capMs must be a whole number of ms from 1000 to 43200000 (12 h, the queue\'s visibility limit), not 500',
      "unit 'demo.retry': retry.backoff.jitter must be full or none, not 'some'",
    ]);
    expect(of('units/demo/order.task.ts')).toEqual([
      "unit 'demo.order': " + 'retry.maxReceives must be a whole number from 1 to 5 (the runtime\'s receive limit), not 0',
      "unit 'demo.order': " + 'retry.backoff.baseMs (10000) must not exceed retry.backoff.capMs (5000)',
    ]);
    // A sub-second base rounded to a visibility of 0 s: a retry at once.
    expect(of('units/demo/subsecond.task.ts')).toEqual([
      "unit 'demo.subsecond': retry.backoff.baseMs must be a whole number of ms from 1000 (the queue counts visibility in whole seconds) to 43200000, not 500",
    ]);
  });

  it('puts a rate limit into the catalog and refuses a wrong one with UNIT_RATE_LIMIT_INVALID, naming the file', async () => {
    const { units, problems: found } = await discoverUnits(at('rate-limit'));
    expect(found).toEqual([
      { file: 'units/demo/zero.task.ts', problem: expect.stringContaining("cannot be loaded: unit 'demo.zero': rateLimit.max must be a whole number from 1") },
    ]);
    expect(buildCatalog(units).tasks).toEqual([
      expect.objectContaining({ name: 'demo.limited', rateLimit: { max: 20, perSeconds: 1, scope: 'tenant' } }),
    ]);
    // `svc tasks check` prints these problems (the test above runs it).
    await expect(emitCatalog(at('rate-limit'))).rejects.toThrow(/units\/demo\/zero\.task\.ts: cannot be loaded: unit 'demo\.zero': rateLimit\.max/);
  });

  it('R-UNT-15 refuses a unit in a file discovery does not see, naming the file', async () => {
    expect(await problems('undiscovered')).toEqual([
      { file: 'units/demo/stray.ts', problem: expect.stringContaining('discovery does not see') },
    ]);
  });

  it('R-UNT-15 refuses malformed unit files: no definition, two definitions, wrong kind, a load error', async () => {
    const found = await problems('malformed');
    expect(found.map((p) => p.file).sort()).toEqual([
      'units/demo/broken.task.ts',
      'units/demo/empty.task.ts',
      'units/demo/two.task.ts',
      'units/demo/wrong-kind.handler.ts',
    ]);
    expect(found.find((p) => p.file.endsWith('empty.task.ts'))!.problem).toMatch(/exports no unit definition/);
    expect(found.find((p) => p.file.endsWith('two.task.ts'))!.problem).toMatch(/exactly one unit/);
    expect(found.find((p) => p.file.endsWith('wrong-kind.handler.ts'))!.problem).toMatch(/must export a subscriber/);
    expect(found.find((p) => p.file.endsWith('broken.task.ts'))!.problem).toMatch(/cannot be loaded: this unit file fails/);
  });

  it('R-UNT-15 refuses duplicate names, naming both files', async () => {
    expect(await problems('duplicate')).toEqual([
      { file: 'units/other/same.task.ts', problem: "duplicate unit name 'demo.same' (also defined in units/demo/same.task.ts)" },
    ]);
  });

  it('R-UNT-02 R-UNT-15 refuses a name breaking the rule', async () => {
    expect(await problems('bad-name')).toEqual([{ file: 'units/demo/bad.task.ts', problem: expect.stringContaining("name 'Demo.Bad-Name' breaks the rule") }]);
  });

  it('R-UNT-07 R-UNT-15 refuses an invalid schedule expression', async () => {
    expect(await problems('bad-schedule')).toEqual([{ file: 'units/demo/sched.task.ts', problem: expect.stringContaining("invalid schedule 'every 5 minutes'") }]);
  });

  it('R-UNT-04 R-UNT-15 R-SCH-04 `svc tasks check` refuses a schedule on a tenant task, naming the file and the rule', async () => {
    expect(await problems('tenant-schedule')).toEqual([
      { file: 'units/demo/tenant-tick.task.ts', problem: expect.stringContaining("a scheduled task must have context 'platform' or 'system'") },
    ]);
    const cli = path.join(ROOT, 'src/main/cli.ts');
    const out = await runNodeProcess([cli, 'tasks', 'check'], { env: { ...process.env, SVC_UNITS_ROOT: at('tenant-schedule') }, timeoutMs: TYPECHECK_CLI_TIMEOUT_MS });
    expect(out.code).toBe(1);
    expect(out.stderr).toContain('units/demo/tenant-tick.task.ts');
    expect(out.stderr).toContain("not 'tenant'");
  }, TYPECHECK_CLI_TIMEOUT_MS + 10_000);

  it('R-UNT-03 R-UNT-15 refuses an unknown queue', async () => {
    expect(await problems('unknown-queue')).toEqual([{ file: 'units/demo/queue.task.ts', problem: expect.stringContaining("unknown queue 'urgent'") }]);
  });

  it('R-UNT-15 emitCatalog throws TASKS_CHECK_FAILED listing every file', async () => {
    const error = await emitCatalog(at('malformed')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TasksCheckFailed);
    expect((error as TasksCheckFailed).code).toBe('TASKS_CHECK_FAILED');
    expect((error as Error).message).toContain('units/demo/two.task.ts');
  });

  it('R-UNT-10 R-UNT-12 R-UNT-13 the shipped units pass the check and appear in the catalog', async () => {
    const catalog = await emitCatalog(ROOT);
    expect(catalog.tasks.find((t) => t.name === 'maintenance.purge')).toMatchObject({
      queue: 'maintenance', context: 'system', schedule: 'rate(1 hour)', overlap: 'skip', timeoutSeconds: 900, file: 'units/maintenance/purge.task.ts',
    });
    expect(subscribersOf(catalog, 'identity.session_started', 1)).toEqual([
      expect.objectContaining({ name: 'identity.login_notification_email', queue: 'critical', file: 'units/identity/login-notification-email.handler.ts' }),
    ]);
  });

  // The check type-checks the units (a TypeScript program): on a machine whose cores are busy that takes
  // minutes, so the processes run bounded and asynchronously, under a timeout that can fire.
  it('R-UNT-15 `svc tasks check` exits 1 naming the file, 0 on the shipped units', async () => {
    const cli = path.join(ROOT, 'src/main/cli.ts');
    const bad = await runNodeProcess([cli, 'tasks', 'check'], { env: { ...process.env, SVC_UNITS_ROOT: at('bad-schedule') }, timeoutMs: TYPECHECK_CLI_TIMEOUT_MS });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('units/demo/sched.task.ts');
    const good = await runNodeProcess([cli, 'tasks', 'check'], { env: { ...process.env, SVC_UNITS_ROOT: undefined }, timeoutMs: TYPECHECK_CLI_TIMEOUT_MS });
    expect(good.stdout).toMatch(/tasks:check ok/);
    expect(good.code).toBe(0);
  }, 2 * TYPECHECK_CLI_TIMEOUT_MS + 10_000);
});

describe('loadCatalog', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-'));

  it('R-UNT-14 R-CFG-08 reads a written catalog back without importing unit code', async () => {
    const file = path.join(dir, 'tasks.json');
    const catalog = await emitCatalog(at('valid'));
    writeCatalog(file, catalog);
    expect(loadCatalog(file)).toEqual(catalog);
    expect(subscribersOf(loadCatalog(file), 'demo.pinged', 2).map((s) => s.name)).toEqual(['demo.pong_on_ping']);
  });

  it('R-UNT-14 a missing catalog is TASKS_CATALOG_MISSING, an invalid one TASKS_CATALOG_INVALID', () => {
    expect(() => loadCatalog(path.join(dir, 'nope.json'))).toThrow(expect.objectContaining({ code: 'TASKS_CATALOG_MISSING' }));
    const bad = path.join(dir, 'bad.json');
    fs.writeFileSync(bad, JSON.stringify({ version: 1, tasks: [{ name: 'x' }], subscriptions: [] }));
    expect(() => loadCatalog(bad)).toThrow(CatalogError);
    expect(() => loadCatalog(bad)).toThrow(expect.objectContaining({ code: 'TASKS_CATALOG_INVALID' }));
    fs.writeFileSync(bad, '{not json');
    expect(() => loadCatalog(bad)).toThrow(expect.objectContaining({ code: 'TASKS_CATALOG_INVALID' }));
  });
});
