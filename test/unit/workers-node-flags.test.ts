import { describe, expect, it } from 'vitest';
import { missingWorkersNodeFlags } from '../../src/main/workers-node-flags.ts';

describe('the workers node flags', () => {
  it('are found on the command line or in NODE_OPTIONS', () => {
    expect(missingWorkersNodeFlags(['--max-semi-space-size=16'], undefined)).toEqual([]);
    expect(missingWorkersNodeFlags([], '--enable-source-maps  --max-semi-space-size=16')).toEqual([]);
  });

  it('are missing when neither has them, or has another young generation', () => {
    expect(missingWorkersNodeFlags([], undefined)).toEqual(['--max-semi-space-size=16']);
    expect(missingWorkersNodeFlags(['--max-semi-space-size=32'], '--max-semi-space-size')).toEqual(['--max-semi-space-size=16']);
  });
});
