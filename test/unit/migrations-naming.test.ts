import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { checkNewName, formatTag, ownerOf, parseTag } from '../../src/migrator/naming.ts';

const DOMAINS = ['parties', 'identity', 'bank', 'bank-users', 'authorization', 'work', 'idempotency'];

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (e) {
    return (e as { code?: string }).code;
  }
}

describe('migration naming rule', () => {
  it('R-MIG-07 the plain domain name is the first migration of its domain', () => {
    expect(checkNewName('parties', DOMAINS, [])).toEqual({ domain: 'parties', first: true });
    expect(checkNewName('identity', DOMAINS, ['parties'])).toEqual({ domain: 'identity', first: true });
  });

  it('R-MIG-07 the plain domain name is refused once the domain has a migration', () => {
    expect(codeOf(() => checkNewName('identity', DOMAINS, ['parties', 'identity-platform-logins']))).toBe(
      'MIGRATION_DOMAIN_NOT_FIRST',
    );
  });

  it('R-MIG-07 later migrations are <domain>-<change>, only after the domain first migration', () => {
    expect(checkNewName('identity-platform-logins', DOMAINS, ['parties', 'identity'])).toEqual({
      domain: 'identity',
      first: false,
      change: 'platform-logins',
    });
    expect(codeOf(() => checkNewName('identity-platform-logins', DOMAINS, ['parties']))).toBe(
      'MIGRATION_DOMAIN_NO_FIRST',
    );
  });

  it('R-MIG-07 the longest domain prefix wins for domains holding a dash', () => {
    expect(ownerOf('bank-users', DOMAINS)).toEqual({ domain: 'bank-users', first: true });
    expect(ownerOf('bank-users-limits', DOMAINS)).toEqual({ domain: 'bank-users', first: false, change: 'limits' });
    expect(ownerOf('bank-accounts', DOMAINS)).toEqual({ domain: 'bank', first: false, change: 'accounts' });
    // bank-users has no migration yet, so its change name is refused even though `bank` has one.
    expect(codeOf(() => checkNewName('bank-users-limits', DOMAINS, ['bank']))).toBe('MIGRATION_DOMAIN_NO_FIRST');
    expect(checkNewName('bank-users', DOMAINS, ['bank']).first).toBe(true);
  });

  it('R-MIG-07 an unknown domain is refused with the list of domains', () => {
    let err: { code?: string; message?: string } = {};
    try {
      checkNewName('billing-invoices', DOMAINS, ['parties']);
    } catch (e) {
      err = e as typeof err;
    }
    expect(err.code).toBe('MIGRATION_DOMAIN_UNKNOWN');
    expect(err.message).toContain('bank-users');
  });

  it('R-MIG-07 malformed names are refused', () => {
    for (const bad of ['', 'Parties', 'parties_x', 'parties--x', '-parties', 'parties-', 'parties x', '0001_parties']) {
      expect(codeOf(() => checkNewName(bad, DOMAINS, []))).toBe('MIGRATION_NAME_INVALID');
    }
  });

  it('R-MIG-08 a name already used is refused', () => {
    expect(codeOf(() => checkNewName('parties-x', DOMAINS, ['parties', 'parties-x']))).toBe('MIGRATION_NAME_USED');
    expect(codeOf(() => checkNewName('identity-x', DOMAINS, ['identity', 'identity-x']))).toBe('MIGRATION_NAME_USED');
  });

  it('R-MIG-08 tags are four-digit numbers from 0001 and round-trip', () => {
    expect(formatTag(1, 'parties')).toBe('0001_parties');
    expect(formatTag(17, 'authorization-scope-ceiling-locks')).toBe('0017_authorization-scope-ceiling-locks');
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 9999 }), fc.stringMatching(/^[a-z0-9]+(-[a-z0-9]+)*$/), (n, name) => {
        expect(parseTag(formatTag(n, name))).toEqual({ number: n, name });
      }),
    );
  });

  it('R-MIG-07 any accepted name is either exactly a domain or <domain>-<change>', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z0-9-]{1,30}$/), (name) => {
        try {
          const owner = checkNewName(name, DOMAINS, DOMAINS);
          expect(owner.first).toBe(false);
          expect(name.startsWith(`${owner.domain}-`)).toBe(true);
        } catch (e) {
          expect((e as { code?: string }).code).toMatch(/^MIGRATION_/);
        }
      }),
    );
  });
});
