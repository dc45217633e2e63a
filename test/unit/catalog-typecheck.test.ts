// tasks:check type-checks the units (and what they import) with the project's compiler options: a
// unit that imports and runs but has a type error fails the check, naming its file and line.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runNodeProcess, TYPECHECK_CLI_TIMEOUT_MS } from '../support/node-process.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const cli = path.join(ROOT, 'src/main/cli.ts');
let dir: string;

// Outside the project (so `npm run typecheck` never sees the deliberate error): an ES module package
// whose node_modules is linked so 'zod' resolves; the runtime's file is imported by a relative path.
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'units-type-error-'));
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  fs.writeFileSync(path.join(dir, 'package.json'), '{ "type": "module" }\n');
  fs.mkdirSync(path.join(dir, 'units', 'demo'), { recursive: true });
  const runtime = path.relative(path.join(dir, 'units', 'demo'), path.join(ROOT, 'src/work/define/unit.ts'));
  const unit = (body: string) => `import { z } from 'zod';
import { defineTask } from '${runtime}';

${body}
`;
  fs.writeFileSync(
    path.join(dir, 'units', 'demo', 'ok.task.ts'),
    unit(`export const ok = defineTask({ name: 'demo.ok', queue: 'default', payload: z.object({ n: z.number() }), handler: async (p) => ({ twice: p.n * 2 }) });`),
  );
  fs.writeFileSync(
    path.join(dir, 'units', 'demo', 'typo.task.ts'),
    unit(`export const typo = defineTask({
  name: 'demo.typo',
  queue: 'default',
  payload: z.object({ amount: z.string() }),
  handler: async (p) => {
    const cents: number = p.amount;
    return { cents };
  },
});`),
  );
});
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('tasks:check type-checks the units', () => {
  // A TypeScript program: minutes on a machine whose cores are busy, so bounded and asynchronous.
  it('a unit with a type error fails the check with its file and line, though it imports and runs', async () => {
    const out = await runNodeProcess([cli, 'tasks', 'check'], { env: { ...process.env, SVC_UNITS_ROOT: dir }, timeoutMs: TYPECHECK_CLI_TIMEOUT_MS });
    expect(out.stderr).toMatch(/units\/demo\/typo\.task\.ts: type error at line 9:11: TS2322/);
    expect(out.stderr).not.toContain('ok.task.ts');
    expect(out.code).toBe(1);
  }, TYPECHECK_CLI_TIMEOUT_MS + 10_000);

  it('the project units pass, and the check says how long the type check took', async () => {
    const out = await runNodeProcess([cli, 'tasks', 'check'], { env: { ...process.env }, timeoutMs: TYPECHECK_CLI_TIMEOUT_MS });
    expect(out.stderr).toBe('');
    expect(out.stdout).toMatch(/tasks:check ok: .*type-checked in \d+(\.\d+)? s/);
    expect(out.code).toBe(0);
  }, TYPECHECK_CLI_TIMEOUT_MS + 10_000);
});
