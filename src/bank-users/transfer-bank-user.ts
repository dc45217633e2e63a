// Moves a bank user from the broker it is assigned to to another broker of the same tenant
// (R-BANK-12, R-DB-24). In the caller's one transaction: the origin assignment is closed on
// `effectiveOn` (valid_until is exclusive, so the origin's last day is the day before) and the
// destination assignment opens on that same date, and a bank_user_transfers row names both. The
// database cannot express "close and open on the same date"; this module is where it holds.
//
// The destination keeps the origin's store code: store_code_id records the code under which the bank
// user was created at the institution, which a transfer between brokers does not change. The
// destination's origin acting link must be the same person's link for the destination broker (R-BANK-09).
import type { TxSql } from '../db/client.ts';
import { isBusinessDate } from '../brokers/business-date.ts';
import { BankUserError } from './bank-user-error.ts';
import { originLinkFor } from './origin-link.ts';

export interface TransferActor {
  /** From the server-side authenticated identity. */
  userId: string;
  /** The actor's membership in this tenant (null for a platform operator in a session context). */
  membershipId?: string | null;
  /** The broker the actor acts for, if any. */
  brokerId?: string | null;
}

export interface TransferBankUserInput {
  tenantId: string;
  userBankId: string;
  toBrokerId: string;
  /** First day of the destination assignment and exclusive end of the origin (YYYY-MM-DD). */
  effectiveOn: string;
  reason: string;
  actor: TransferActor;
  /** The destination's acting link; the person's open link for the destination broker when omitted. */
  toOriginMembershipBrokerId?: string | null;
}

export interface BankUserTransfer {
  transferId: string;
  userBankId: string;
  fromAssignmentId: string;
  fromBrokerId: string;
  toAssignmentId: string;
  toBrokerId: string;
  effectiveOn: string;
}

const NUMERIC_ID = /^[1-9][0-9]{0,18}$/;

export async function transferBankUser(tx: TxSql, input: TransferBankUserInput): Promise<BankUserTransfer> {
  const reason = input.reason.trim();
  if (!reason) throw new BankUserError('BANK_USER_REASON_REQUIRED');
  if (!isBusinessDate(input.effectiveOn)) throw new BankUserError('BANK_USER_DATE_INVALID');
  if (!NUMERIC_ID.test(input.userBankId)) throw new BankUserError('BANK_USER_NOT_FOUND');
  if (!NUMERIC_ID.test(input.toBrokerId)) throw new BankUserError('BANK_USER_BROKER_NOT_IN_TENANT');

  // Serializes transfers of one bank user: a second transfer waits here, and its next statement (a new
  // snapshot) sees the assignment the first one opened. NO KEY UPDATE leaves foreign-key checks unblocked.
  await tx`SELECT 1 FROM user_banks WHERE id = ${input.userBankId} AND closed_at IS NULL FOR NO KEY UPDATE`;
  const [origin] = await tx`
    SELECT id::text, broker_id::text, user_id::text, party_id::text, financial_institution_id::text,
           store_code_id::text, valid_from::text
      FROM bank_user_assignments
     WHERE user_bank_id = ${input.userBankId} AND tenant_id = ${input.tenantId} AND valid_until IS NULL
       AND EXISTS (SELECT 1 FROM user_banks ub WHERE ub.id = user_bank_id AND ub.closed_at IS NULL)
       FOR UPDATE`;
  // Neutral: an assignment in another tenant is indistinguishable from none.
  if (!origin) throw new BankUserError('BANK_USER_NOT_FOUND');
  if (origin.broker_id === input.toBrokerId) throw new BankUserError('BANK_USER_TRANSFER_SAME_BROKER');
  if (input.effectiveOn <= (origin.valid_from as string)) throw new BankUserError('BANK_USER_DATE_INVALID');

  const [destination] = await tx`
    SELECT disabled_at FROM tenant_brokers WHERE tenant_id = ${input.tenantId} AND broker_id = ${input.toBrokerId}`;
  if (!destination || destination.disabled_at !== null) throw new BankUserError('BANK_USER_BROKER_NOT_IN_TENANT');

  const link = await originLinkFor(tx, {
    tenantId: input.tenantId,
    brokerId: input.toBrokerId,
    userId: origin.user_id as string,
    partyId: origin.party_id as string,
    on: input.effectiveOn,
    membershipBrokerId: input.toOriginMembershipBrokerId ?? null,
  });

  await tx`
    UPDATE bank_user_assignments
       SET valid_until = ${input.effectiveOn}, ended_by_user_id = ${input.actor.userId}, ended_recorded_at = clock_timestamp()
     WHERE id = ${origin.id}`;
  const [opened] = await tx`
    INSERT INTO bank_user_assignments
      (user_bank_id, user_id, party_id, financial_institution_id, tenant_id, broker_id, valid_from,
       created_by_user_id, change_reason, store_code_id, origin_membership_broker_id)
    VALUES (${input.userBankId}, ${origin.user_id}, ${origin.party_id}, ${origin.financial_institution_id},
            ${input.tenantId}, ${input.toBrokerId}, ${input.effectiveOn}, ${input.actor.userId}, ${reason},
            ${origin.store_code_id}, ${link.membershipBrokerId})
    RETURNING id::text`;
  const [transfer] = await tx`
    INSERT INTO bank_user_transfers
      (tenant_id, user_bank_id, from_assignment_id, from_broker_id, to_assignment_id, to_broker_id, effective_on,
       actor_user_id, actor_membership_id, actor_broker_id, reason)
    VALUES (${input.tenantId}, ${input.userBankId}, ${origin.id}, ${origin.broker_id}, ${opened!.id}, ${input.toBrokerId},
            ${input.effectiveOn}, ${input.actor.userId}, ${input.actor.membershipId ?? null}, ${input.actor.brokerId ?? null},
            ${reason})
    RETURNING id::text`;

  return {
    transferId: transfer!.id as string,
    userBankId: input.userBankId,
    fromAssignmentId: origin.id as string,
    fromBrokerId: origin.broker_id as string,
    toAssignmentId: opened!.id as string,
    toBrokerId: input.toBrokerId,
    effectiveOn: input.effectiveOn,
  };
}
