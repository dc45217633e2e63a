// The project's migration naming rule, as pure logic. A migration is `NNNN_<name>`; the number is
// given by the generator (from 0001), the name by the author:
// - the plain domain name (`parties`) is that domain's FIRST migration, the one loading its
//   constraints file, and is allowed only while the domain has no migration yet;
// - every later migration of a domain is `<domain>-<change>` (`identity-platform-logins`).
// Domains may contain '-' themselves (`bank-users`), so the longest matching domain prefix wins.
import { MigratorError } from './migrator-error.ts';

/** Lower-case words joined by single dashes: the shape of domains, changes and whole names. */
export const NAME_PATTERN = /^[a-z0-9]+(-[a-z0-9]+)*$/;
/** A journal tag: four-digit number, underscore, name. */
export const TAG_PATTERN = /^(\d{4})_(.+)$/;

export interface ParsedTag {
  number: number;
  name: string;
}

export function parseTag(tag: string): ParsedTag | undefined {
  const m = TAG_PATTERN.exec(tag);
  return m ? { number: Number(m[1]), name: m[2]! } : undefined;
}

export function formatTag(number: number, name: string): string {
  return `${String(number).padStart(4, '0')}_${name}`;
}

export interface NameOwner {
  domain: string;
  /** True for the plain domain name: the domain's first migration. */
  first: boolean;
  /** The `<change>` part of `<domain>-<change>`; undefined for a first migration. */
  change?: string;
}

/** Which domain a migration name belongs to, or undefined when it names no known domain. */
export function ownerOf(name: string, domains: Iterable<string>): NameOwner | undefined {
  const all = [...domains];
  if (all.includes(name)) return { domain: name, first: true };
  let best: string | undefined;
  for (const d of all) {
    if (name.startsWith(`${d}-`) && NAME_PATTERN.test(name.slice(d.length + 1))) {
      if (!best || d.length > best.length) best = d;
    }
  }
  return best ? { domain: best, first: false, change: name.slice(best.length + 1) } : undefined;
}

/**
 * Validates the name of a new migration against the domains and the names already used (without their
 * numbers), oldest first. Returns the owner or throws a MigratorError with a stable code.
 */
export function checkNewName(name: string, domains: Iterable<string>, usedNames: readonly string[]): NameOwner {
  const all = [...domains].sort();
  if (!NAME_PATTERN.test(name)) {
    throw new MigratorError(
      'MIGRATION_NAME_INVALID',
      `migration name '${name}' is not valid: use lower-case words joined by '-', either a domain name ` +
        `(first migration of that domain) or <domain>-<change>, e.g. 'parties' or 'identity-platform-logins'`,
    );
  }
  const owner = ownerOf(name, all);
  if (!owner) {
    throw new MigratorError(
      'MIGRATION_DOMAIN_UNKNOWN',
      `migration name '${name}' names no known domain; known domains: ${all.join(', ') || '(none)'} ` +
        `(a domain is a file src/db/schema/<domain>.ts or a folder sql/<domain>/)`,
    );
  }
  const domainHasMigration = usedNames.some((used) => ownerOf(used, all)?.domain === owner.domain);
  if (owner.first && domainHasMigration) {
    throw new MigratorError(
      'MIGRATION_DOMAIN_NOT_FIRST',
      `domain '${owner.domain}' already has its first migration; name this one '${owner.domain}-<change>'`,
    );
  }
  if (!owner.first && !domainHasMigration) {
    throw new MigratorError(
      'MIGRATION_DOMAIN_NO_FIRST',
      `domain '${owner.domain}' has no migration yet; its first migration must be named '${owner.domain}'`,
    );
  }
  if (usedNames.includes(name)) {
    throw new MigratorError(
      'MIGRATION_NAME_USED',
      `migration name '${name}' is already used; choose another <domain>-<change> name`,
    );
  }
  return owner;
}
