// Registers a bank user: a person's login at a financial institution, created under the broker's store
// code and assigned to that broker in the tenant. What the product calls the bank-user number is the
// login the institution gave the person; the schema keeps it in financial_institution_credentials.login
// (the bank user's credential), since user_banks itself has no number column.
//
// R-BANK-05: a bank-user number must not repeat across tenants. Bank users are global, so the rule is
// one open bank user per (institution, number) whatever tenant it is assigned to; the refusal is
// neutral (BANK_USER_NUMBER_UNAVAILABLE) and never says where the number is in use. The same neutral
// answer covers a person who already has an open bank user at the institution. A closed bank user
// releases its number. Two registrations of one number serialize on a transaction-level advisory lock,
// since no unique constraint can span user_banks and the credential's login.
//
// R-BRK-12: the store code is resolved from broker_store_codes for the start date, never typed in.
// R-BANK-09: the origin acting link is checked for party coherence (origin-link.ts).
import { randomUUID } from 'node:crypto';
import type { TxSql } from '../db/client.ts';
import { isBusinessDate } from '../brokers/business-date.ts';
import { requireBrokerStoreCode } from '../brokers/resolve-broker-store-code.ts';
import { BankUserError } from './bank-user-error.ts';
import type { SealedSecret } from './bank-password-sealing.ts';
import { originLinkFor } from './origin-link.ts';

export interface RegisterBankUserInput {
  tenantId: string;
  brokerId: string;
  financialInstitutionId: string;
  /** The person the bank login belongs to. */
  userId: string;
  /** The bank-user number (login at the institution); leading zeros kept. */
  number: string;
  kind: string;
  /** Free text lifecycle (no value check in the database); default `active`. */
  status?: string;
  /** The first password, already sealed (bank-password-sealing.ts). */
  sealedPassword: SealedSecret;
  /** Start of the first assignment (YYYY-MM-DD). */
  validFrom: string;
  /** The acting link the assignment originates from; the person's open link for the broker when omitted. */
  originMembershipBrokerId?: string | null;
  /** From the server-side authenticated identity. */
  createdByUserId: string;
}

export interface RegisteredBankUser {
  userBankId: string;
  credentialId: string;
  credentialVersionId: string;
  assignmentId: string;
  storeCodeId: string;
  storeCode: string;
  originMembershipBrokerId: string;
}

/** How numbers are compared: surrounding spaces and letter case never make a different number. */
export function normalizeBankUserNumber(number: string): string {
  return number.trim().toLowerCase();
}

export async function registerBankUser(tx: TxSql, input: RegisterBankUserInput): Promise<RegisteredBankUser> {
  const number = input.number.trim();
  if (!number) throw new BankUserError('BANK_USER_NUMBER_INVALID');
  if (!isBusinessDate(input.validFrom)) throw new BankUserError('BANK_USER_DATE_INVALID');

  const [tenantBroker] = await tx`
    SELECT disabled_at FROM tenant_brokers WHERE tenant_id = ${input.tenantId} AND broker_id = ${input.brokerId}`;
  if (!tenantBroker || tenantBroker.disabled_at !== null) throw new BankUserError('BANK_USER_BROKER_NOT_IN_TENANT');

  const normalized = normalizeBankUserNumber(number);
  await tx`SELECT pg_advisory_xact_lock(hashtextextended(${`bank-user-number:${input.financialInstitutionId}:${normalized}`}, 0))`;
  // Only existence is asked, and the answer is neutral: this never exposes a bank user of another tenant.
  const [inUse] = await tx`
    SELECT 1 FROM user_banks ub
      JOIN financial_institution_credentials fic ON fic.credential_id = ub.credential_id
     WHERE ub.financial_institution_id = ${input.financialInstitutionId} AND ub.closed_at IS NULL
       AND (lower(btrim(fic.login)) = ${normalized} OR ub.user_id = ${input.userId})
     LIMIT 1`;
  if (inUse) throw new BankUserError('BANK_USER_NUMBER_UNAVAILABLE');

  const [user] = await tx`SELECT party_id::text FROM users WHERE id = ${input.userId}`;
  if (!user) throw new BankUserError('BANK_USER_ORIGIN_LINK_NOT_FOUND');
  const link = await originLinkFor(tx, {
    tenantId: input.tenantId,
    brokerId: input.brokerId,
    userId: input.userId,
    partyId: user.party_id as string,
    on: input.validFrom,
    membershipBrokerId: input.originMembershipBrokerId ?? null,
  });
  const storeCode = await requireBrokerStoreCode(tx, {
    tenantId: input.tenantId,
    brokerId: input.brokerId,
    financialInstitutionId: input.financialInstitutionId,
    on: input.validFrom,
  });

  const [credential] = await tx`
    INSERT INTO credentials (uid, kind) VALUES (${randomUUID()}, 'financial_institution') RETURNING id::text`;
  const credentialId = credential!.id as string;
  await tx`INSERT INTO financial_institution_credentials (credential_id, financial_institution_id, login)
           VALUES (${credentialId}, ${input.financialInstitutionId}, ${number})`;
  const [version] = await tx`
    INSERT INTO credential_versions (credential_id, version, algorithm, secret, created_by_user_id)
    VALUES (${credentialId}, 1, ${input.sealedPassword.algorithm}, ${input.sealedPassword.secret}, ${input.createdByUserId})
    RETURNING id::text`;
  const [userBank] = await tx`
    INSERT INTO user_banks (user_id, financial_institution_id, credential_id, kind, status, confirmed_at)
    VALUES (${input.userId}, ${input.financialInstitutionId}, ${credentialId}, ${input.kind}, ${input.status ?? 'active'},
            clock_timestamp())
    RETURNING id::text`;
  const [assignment] = await tx`
    INSERT INTO bank_user_assignments
      (user_bank_id, user_id, party_id, financial_institution_id, tenant_id, broker_id, valid_from,
       created_by_user_id, change_reason, store_code_id, origin_membership_broker_id)
    VALUES (${userBank!.id}, ${input.userId}, ${user.party_id}, ${input.financialInstitutionId}, ${input.tenantId},
            ${input.brokerId}, ${input.validFrom}, ${input.createdByUserId}, 'registered', ${storeCode.storeCodeId},
            ${link.membershipBrokerId})
    RETURNING id::text`;

  return {
    userBankId: userBank!.id as string,
    credentialId,
    credentialVersionId: version!.id as string,
    assignmentId: assignment!.id as string,
    storeCodeId: storeCode.storeCodeId,
    storeCode: storeCode.code,
    originMembershipBrokerId: link.membershipBrokerId,
  };
}
