import { describe, expect, it } from 'vitest';
import {
  HOLDER_SCOPES,
  PERMISSION_SCOPES,
  SCOPE_CEILING,
  ScopeCeilingError,
  assertWithinCeiling,
  ceilingAccepts,
} from '../../src/permissions/scope-ceiling.ts';

describe('scope ceiling mirror', () => {
  it('R-CEIL-02 holder platform accepts platform, tenant accepts tenant and broker, broker accepts broker', () => {
    const accepted = Object.fromEntries(
      HOLDER_SCOPES.map((h) => [h, PERMISSION_SCOPES.filter((p) => ceilingAccepts(h, p))]),
    );
    expect(accepted).toEqual({ platform: ['platform'], tenant: ['tenant', 'broker'], broker: ['broker'] });
    expect(Object.isFrozen(SCOPE_CEILING)).toBe(true);
  });

  it('R-CEIL-04 R-CEIL-11 assertWithinCeiling fails early with the code, its scope and the expected scopes', () => {
    expect(() => assertWithinCeiling('tenant', { code: 'a.b', scope: 'broker' })).not.toThrow();
    let error: unknown;
    try {
      assertWithinCeiling('broker', { code: 'access.task_runs.read', scope: 'tenant' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ScopeCeilingError);
    expect((error as ScopeCeilingError).code).toBe('PERMISSION_SCOPE_CEILING');
    expect((error as Error).message).toBe(
      'permission access.task_runs.read has scope tenant, above the ceiling of a broker holder, which accepts only scope broker',
    );
  });
});
