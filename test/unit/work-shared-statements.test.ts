// When a coalescer's shared statement goes out (shared-statements.ts): at the end of the turn on a quiet
// worker; once the last statement carried several deliveries, when as many wait again or after the
// linger, whichever comes first. The statement is a stub here (pure logic).
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

  it('once a statement carried several deliveries, the next waits the linger while fewer wait, and takes every delivery that came meanwhile', async () => {
    const { calls, add } = manual(40, 300);
    add('a', 'b', 'c');
    await turns(1);
    expect(calls.map((c) => c.items)).toEqual([['a', 'b', 'c']]);
    calls[0]!.answer();
    await turns(1);
    add('d');
    await turns(3);
    expect(calls).toHaveLength(1); // lingering: one waits, the last statement carried three
    add('e');
    await waitFor(() => calls.length === 2, 5_000, { what: 'the statement after the linger' });
    expect(calls[1]!.items).toEqual(['d', 'e']);
  });

  it('the linger ends at once when as many deliveries wait as the last statement carried', async () => {
    const { calls, add } = manual(40, 60_000);
    add('a', 'b', 'c');
    await turns(1);
    calls[0]!.answer();
    await turns(1);
    add('d', 'e');
    await turns(3);
    expect(calls).toHaveLength(1);
    add('f');
    await turns(2);
    expect(calls.map((c) => c.items)).toEqual([['a', 'b', 'c'], ['d', 'e', 'f']]);
  });

  it('deliveries that came while the statement was out go as soon as it is back when they are as many as it carried: no linger', async () => {
    const { calls, add } = manual(40, 60_000);
    add('a', 'b');
    await turns(1);
    add('c', 'd', 'e'); // while the first statement is out
    await turns(2);
    expect(calls).toHaveLength(1);
    calls[0]!.answer();
    await turns(3);
    expect(calls.map((c) => c.items)).toEqual([['a', 'b'], ['c', 'd', 'e']]);
  });

  it('a full statement’s worth ends the linger: no statement carries more than the maximum', async () => {
    const { calls, add } = manual(3, 60_000);
    add('a', 'b', 'c', 'd');
    await turns(1);
    expect(calls.map((c) => c.items)).toEqual([['a', 'b', 'c']]);
    calls[0]!.answer();
    await turns(3);
    expect(calls).toHaveLength(1); // 'd' alone lingers: the last statement carried three
    add('e', 'f', 'g');
    await turns(2);
    expect(calls.map((c) => c.items)).toEqual([['a', 'b', 'c'], ['d', 'e', 'f']]);
  });
});
