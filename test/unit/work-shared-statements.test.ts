// When a coalescer's shared statement goes out (shared-statements.ts): at the end of the turn on a quiet
// worker; after the linger once the last statement carried several deliveries; at once when a full
// statement's worth is waiting. The statement is a stub here (pure logic).
import { describe, expect, it } from 'vitest';
import { SharedStatements } from '../../src/work/runtime/execute/shared-statements.ts';
import { waitFor } from '../support/wait-for.ts';

/** Statements recorded and answered by hand. */
function manual(max: number, lingerMs: number) {
  const calls: Array<{ items: string[]; answer: () => void }> = [];
  const shared = new SharedStatements<null, string>(max, (_g, items) => new Promise<void>((answer) => calls.push({ items, answer })), lingerMs);
  const add = (...items: string[]) => {
    for (const i of items) shared.add('g', () => null, i);
  };
  return { calls, add };
}

const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

describe('shared statements: when the next one goes', () => {
  it('on a quiet worker (its last statement carried one delivery) the next goes at the end of the turn, whatever the linger', async () => {
    const { calls, add } = manual(40, 60_000);
    add('a');
    await turns(1);
    expect(calls.map((c) => c.items)).toEqual([['a']]);
    calls[0]!.answer();
    await turns(1);
    add('b');
    await turns(2);
    expect(calls.map((c) => c.items)).toEqual([['a'], ['b']]);
  });

  it('once a statement carried several deliveries, the next waits the linger and takes every delivery that came meanwhile', async () => {
    const { calls, add } = manual(40, 300);
    add('a', 'b');
    await turns(1);
    expect(calls.map((c) => c.items)).toEqual([['a', 'b']]);
    calls[0]!.answer();
    await turns(1);
    add('c');
    await turns(3);
    expect(calls).toHaveLength(1); // lingering
    add('d');
    await waitFor(() => calls.length === 2, 5_000, { what: 'the statement after the linger' });
    expect(calls[1]!.items).toEqual(['c', 'd']);
  });

  it('a linger ends at once when a full statement’s worth is waiting', async () => {
    const { calls, add } = manual(3, 60_000);
    add('a', 'b');
    await turns(1);
    calls[0]!.answer();
    await turns(1);
    add('c', 'd');
    await turns(3);
    expect(calls).toHaveLength(1);
    add('e');
    await turns(2);
    expect(calls.map((c) => c.items)).toEqual([['a', 'b'], ['c', 'd', 'e']]);
  });
});
