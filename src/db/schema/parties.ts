// Domain `parties` (migration 0001_parties): the people and companies every other domain points at.
// A party is a person or a company; the profiles hold what only one kind has (tax id, names).
import { sql } from 'drizzle-orm';
import { check, numeric, pgTable, text, unique } from 'drizzle-orm/pg-core';
import { bigintRef, clockInstant, day, fk, identityId, instant } from '../columns.ts';

export const parties = pgTable(
  'parties',
  {
    id: identityId(),
    kind: text('kind').notNull(),
    displayName: text('display_name').notNull(),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    check('parties_kind_check', sql`kind IN ('person', 'company')`),
    // Target of the profiles' (party_id, kind) references: a profile matches its party's kind.
    unique('parties_id_kind_key').on(t.id, t.kind),
  ],
);

export const personProfiles = pgTable(
  'person_profiles',
  {
    partyId: bigintRef('party_id').primaryKey(),
    /** Always 'person': pins the profile to a person party through the composite reference. */
    partyKind: text('party_kind').notNull().default('person'),
    fullName: text('full_name').notNull(),
    /** Brazilian CPF, 11 digits, leading zeros preserved. */
    taxId: text('tax_id'),
    birthDate: day('birth_date'),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('person_profiles_party_fkey', [t.partyId, t.partyKind], [parties.id, parties.kind]),
    check('person_profiles_party_kind_check', sql`party_kind = 'person'`),
    unique('person_profiles_tax_id_key').on(t.taxId),
  ],
);

export const companyProfiles = pgTable(
  'company_profiles',
  {
    partyId: bigintRef('party_id').primaryKey(),
    /** Always 'company': pins the profile to a company party through the composite reference. */
    partyKind: text('party_kind').notNull().default('company'),
    legalName: text('legal_name').notNull(),
    tradeName: text('trade_name'),
    /** Brazilian CNPJ, 14 digits, leading zeros preserved. */
    taxId: text('tax_id').notNull(),
    createdAt: clockInstant('created_at'),
    updatedAt: clockInstant('updated_at'),
  },
  (t) => [
    fk('company_profiles_party_fkey', [t.partyId, t.partyKind], [parties.id, parties.kind]),
    check('company_profiles_party_kind_check', sql`party_kind = 'company'`),
    unique('company_profiles_tax_id_key').on(t.taxId),
  ],
);

/** Who owns a company, and since when. Periods are not guarded by the database (application rule). */
export const companyOwnerships = pgTable(
  'company_ownerships',
  {
    id: identityId(),
    companyPartyId: bigintRef('company_party_id').notNull(),
    ownerPartyId: bigintRef('owner_party_id').notNull(),
    sharePercent: numeric('share_percent', { precision: 5, scale: 2 }),
    startedOn: day('started_on').notNull(),
    endedOn: day('ended_on'),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    fk('company_ownerships_company_fkey', [t.companyPartyId], [companyProfiles.partyId]),
    fk('company_ownerships_owner_fkey', [t.ownerPartyId], [parties.id]),
  ],
);

/** E-mail addresses and phone numbers of a party (`kind` is free text: e.g. `email`, `phone`). */
export const partyContacts = pgTable(
  'party_contacts',
  {
    id: identityId(),
    partyId: bigintRef('party_id').notNull(),
    kind: text('kind').notNull(),
    value: text('value').notNull(),
    valueNormalized: text('value_normalized').notNull(),
    verifiedAt: instant('verified_at'),
    createdAt: clockInstant('created_at'),
  },
  (t) => [
    fk('party_contacts_party_fkey', [t.partyId], [parties.id]),
    unique('party_contacts_party_kind_value_key').on(t.partyId, t.kind, t.valueNormalized),
  ],
);
