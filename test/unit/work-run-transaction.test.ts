// guardRunTransaction (src/work/runtime/execute/run-transaction.ts): the hook a group member opens its
// savepoint in runs once, before the handler's first statement, and never for a fragment or after close.
// A stand-in for the postgres.js transaction records what would be sent (pure logic, no database).
import { describe, expect, it } from 'vitest';
import type { TxSql } from '../../src/db/client.ts';
import { guardRunTransaction, RunTransactionClosed } from '../../src/work/runtime/execute/run-transaction.ts';

function fakeTx(log: string[]): TxSql {
  const tag = (first: unknown, ...rest: unknown[]) => {
    if (Array.isArray(first) && Array.isArray((first as { raw?: unknown }).raw)) {
      log.push(`statement:${(first as string[]).join('?')}`);
      return Promise.resolve([]);
    }
    log.push(`fragment:${String(first)}`);
    return { fragment: first, rest };
  };
  return Object.assign(tag, {
    unsafe: (text: string) => {
      log.push(`unsafe:${text}`);
      return Promise.resolve([]);
    },
    savepoint: async (fn: (sp: TxSql) => unknown) => {
      log.push('savepoint');
      return fn(fakeTx(log));
    },
  }) as unknown as TxSql;
}

describe('run.transaction guard', () => {
  it('calls beforeFirstStatement once, just before the first statement; a fragment alone does not', async () => {
    const log: string[] = [];
    const guarded = guardRunTransaction(fakeTx(log), () => log.push('hook'));
    guarded.tx('bench_effects');
    expect(log).toEqual(['fragment:bench_effects']);
    await guarded.tx`SELECT 1`;
    await guarded.tx`SELECT 2`;
    await guarded.tx.unsafe('SELECT 3');
    expect(log).toEqual(['fragment:bench_effects', 'hook', 'statement:SELECT 1', 'statement:SELECT 2', 'unsafe:SELECT 3']);
  });

  it('calls it before a first statement sent through unsafe or a nested savepoint too', async () => {
    const viaUnsafe: string[] = [];
    await guardRunTransaction(fakeTx(viaUnsafe), () => viaUnsafe.push('hook')).tx.unsafe('SELECT 1');
    expect(viaUnsafe).toEqual(['hook', 'unsafe:SELECT 1']);
    const viaSavepoint: string[] = [];
    await guardRunTransaction(fakeTx(viaSavepoint), () => viaSavepoint.push('hook')).tx.savepoint(async (sp) => sp`SELECT 1`);
    expect(viaSavepoint).toEqual(['hook', 'savepoint', 'statement:SELECT 1']);
  });

  it('never calls it for a statement refused after close, and the refused statement is not sent', async () => {
    const log: string[] = [];
    const guarded = guardRunTransaction(fakeTx(log), () => log.push('hook'));
    guarded.close();
    await expect(guarded.tx`SELECT 1`).rejects.toBeInstanceOf(RunTransactionClosed);
    await expect(guarded.tx.unsafe('SELECT 1')).rejects.toBeInstanceOf(RunTransactionClosed);
    expect(log).toEqual([]);
  });
});
