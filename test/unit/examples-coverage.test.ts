// The worked examples under examples/ are code CI checks, not text: the type check, the lint and the
// README's test command cover them, and their units pass what `tasks:check` asks of a unit under units/
// (the workers never load them: discovery reads units/ only).
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import vitestConfig from '../../vitest.config.ts';
import { discoverUnits } from '../../src/work/catalog.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

describe('examples/', () => {
  it('npm run typecheck covers it (tsconfig include)', () => {
    const tsconfig = JSON.parse(fs.readFileSync(path.join(ROOT, 'tsconfig.json'), 'utf8')) as { include: string[] };
    expect(tsconfig.include).toContain('examples');
  });

  it('npm test runs its tests (vitest include)', () => {
    expect(vitestConfig.test?.include).toContain('examples/**/*.test.ts');
  });

  it('npm run lint covers it (eslint files)', () => {
    expect(fs.readFileSync(path.join(ROOT, 'eslint.config.js'), 'utf8')).toContain('"examples/**/*.ts"');
  });

  it('its units pass the checks of tasks:check', async () => {
    const { units, problems } = await discoverUnits(ROOT, { dir: 'examples' });
    expect(problems).toEqual([]);
    expect(units.map((u) => `${u.unit.name} ${u.file}`).sort()).toEqual([
      'billing.email_invoice_reminder examples/billing/email-invoice-reminder.handler.ts',
      'billing.send_invoice_reminder examples/billing/send-invoice-reminder.task.ts',
    ]);
  });
});
