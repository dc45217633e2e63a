import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { declarePermissions, type PermissionDeclaration } from '../../src/permissions/declaration.ts';
import { TASK_RUNS_READ } from '../../src/permissions/declarations/access.ts';
import {
  PermissionRegistryError,
  buildRegistry,
  declaredPermissions,
  registryProblems,
} from '../../src/permissions/registry.ts';
import { emitRegistry, loadRegistry, readRegistryFile, RegistryFileError } from '../../src/permissions/registry-file.ts';

const SRC_A = 'src/permissions/declarations/a.ts';
const SRC_B = 'src/permissions/declarations/b.ts';

function decl(overrides: Partial<PermissionDeclaration> = {}): PermissionDeclaration {
  return { code: 'area.things.read', scope: 'tenant', description: 'Read things.', useCases: ['things.read'], ...overrides };
}

function problemsOf(a: PermissionDeclaration[], b: PermissionDeclaration[] = [], retired: string[] = []) {
  return registryProblems(
    [...declarePermissions(SRC_A, a), ...declarePermissions(SRC_B, b)],
    retired.map((code) => ({ code, reason: 'test' })),
  );
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-permissions-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('permission registry', () => {
  it('R-HTTP-08 R-SEED-03 the build registry is valid and declares access.task_runs.read and platform administration', () => {
    const registry = buildRegistry();
    const byCode = new Map(registry.permissions.map((p) => [p.code, p]));
    expect(byCode.get(TASK_RUNS_READ)).toMatchObject({ scope: 'tenant', use_cases: ['task-runs.read'] });
    const platform = registry.permissions.filter((p) => p.scope === 'platform');
    expect(platform.length).toBeGreaterThanOrEqual(5);
    expect(platform.map((p) => p.code)).toContain('platform.operators.invite');
    // Sorted, so the emitted file is stable from build to build.
    const codes = registry.permissions.map((p) => p.code);
    expect(codes).toEqual([...codes].sort());
    expect(registry.permissions.length).toBe(declaredPermissions.length);
  });

  it('R-EXE-13 a duplicate code fails naming both declarations', () => {
    const problems = problemsOf([decl()], [decl({ useCases: ['other.read'] })]);
    expect(problems).toEqual([
      { source: SRC_B, code: 'area.things.read', rule: `duplicate code: already declared in ${SRC_A}` },
    ]);
  });

  it.each(['Area.things.read', 'area', 'area..read', 'area.read.', '1area.read', 'area.things-x.read', ''])(
    'R-EXE-13 malformed dotted code %j fails naming it',
    (code) => {
      const problems = problemsOf([decl({ code })]);
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatchObject({ source: SRC_A, code });
      expect(problems[0]!.rule).toMatch(/^malformed code/);
    },
  );

  it('R-EXE-13 an unknown scope fails naming the declaration', () => {
    const problems = problemsOf([decl({ scope: 'global' as never })]);
    expect(problems).toEqual([
      { source: SRC_A, code: 'area.things.read', rule: 'unknown scope "global": expected platform, tenant or broker' },
    ]);
  });

  it('R-EXE-13 a use case claimed by two codes fails naming the second claimant and the first owner', () => {
    const problems = problemsOf([decl()], [decl({ code: 'area.things.write', useCases: ['things.read'] })]);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ source: SRC_B, code: 'area.things.write' });
    expect(problems[0]!.rule).toContain('use case things.read is already claimed by area.things.read');
    expect(problems[0]!.rule).toContain(SRC_A);
  });

  it('R-EXE-13 a rename pointing nowhere fails; pointing to a retired code passes', () => {
    const nowhere = problemsOf([decl({ replacesCode: 'area.stuff.read' })]);
    expect(nowhere).toHaveLength(1);
    expect(nowhere[0]).toMatchObject({ source: SRC_A, code: 'area.things.read' });
    expect(nowhere[0]!.rule).toContain('replaces_code area.stuff.read points nowhere');
    expect(problemsOf([decl({ replacesCode: 'area.stuff.read' })], [], ['area.stuff.read'])).toEqual([]);
  });

  it('R-EXE-13 a rename of a code still declared, of itself, or twice of one code fails', () => {
    const still = problemsOf([decl(), decl({ code: 'area.items.read', useCases: ['items.read'], replacesCode: 'area.things.read' })]);
    expect(still[0]!.rule).toContain('is still declared');
    expect(problemsOf([decl({ replacesCode: 'area.things.read' })])[0]!.rule).toBe('replaces_code points to itself');
    const twice = problemsOf(
      [decl({ replacesCode: 'area.old.read' })],
      [decl({ code: 'area.items.read', useCases: ['items.read'], replacesCode: 'area.old.read' })],
      ['area.old.read'],
    );
    expect(twice).toHaveLength(1);
    expect(twice[0]).toMatchObject({ source: SRC_B, code: 'area.items.read' });
  });

  it('R-EXE-13 buildRegistry throws PERMISSION_REGISTRY_INVALID listing every problem with source and code', () => {
    let error: unknown;
    try {
      buildRegistry(
        [...declarePermissions(SRC_A, [decl({ code: 'bad' }), decl({ code: 'area.x.read', scope: 'nope' as never, useCases: ['x'] })])],
        [],
      );
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(PermissionRegistryError);
    const e = error as PermissionRegistryError;
    expect(e.code).toBe('PERMISSION_REGISTRY_INVALID');
    expect(e.problems).toHaveLength(2);
    expect(e.message).toContain(`${SRC_A}: "bad": malformed code`);
    expect(e.message).toContain(`${SRC_A}: "area.x.read": unknown scope`);
  });

  it('R-EXE-12 R-CFG-11 emit writes permissions.json that reads back equal; SVC_PERMISSIONS_REGISTRY and in-process agree', () => {
    const file = emitRegistry(path.join(tmp, 'dist'));
    expect(path.basename(file)).toBe('permissions.json');
    const read = readRegistryFile(file);
    expect(read).toEqual(buildRegistry());
    expect(loadRegistry({ SVC_PERMISSIONS_REGISTRY: file }, tmp).registry).toEqual(loadRegistry({}, tmp).registry);
    expect(loadRegistry({}, tmp).origin).toBe('the declarations of this build');
  });

  it('R-CFG-11 a missing or malformed registry file is refused with a message saying to emit it', () => {
    expect(() => readRegistryFile(path.join(tmp, 'absent.json'))).toThrow(/permissions:emit/);
    const bad = path.join(tmp, 'bad.json');
    fs.writeFileSync(bad, JSON.stringify({ version: 1, permissions: [{ code: 'x', scope: 'tenant' }] }));
    expect(() => readRegistryFile(bad)).toThrow(RegistryFileError);
    expect(() => readRegistryFile(bad)).toThrow(/permissions\.0\.code/);
  });
});
