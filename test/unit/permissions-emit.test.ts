// `svc permissions emit` end to end: the real CLI writes <dir>/permissions.json equal to the registry.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildRegistry } from '../../src/permissions/registry.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-emit-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('svc permissions emit', () => {
  it('R-EXE-12 writes permissions.json into the output directory (dist/ by default), equal to the registry', () => {
    const out = path.join(tmp, 'dist');
    const result = spawnSync(process.execPath, [path.join(ROOT, 'src/main/cli.ts'), 'permissions', 'emit', '--out', out], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '' },
    });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/emit: .*permissions\.json \(\d+ permissions\)/);
    expect(JSON.parse(fs.readFileSync(path.join(out, 'permissions.json'), 'utf8'))).toEqual(buildRegistry());
  });

  it('R-EXE-13 an unknown subcommand is a usage error', () => {
    const result = spawnSync(process.execPath, [path.join(ROOT, 'src/main/cli.ts'), 'permissions', 'publish'], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '' },
    });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('usage: svc permissions emit');
  });
});
