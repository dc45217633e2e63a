// The acting link (membership_brokers row) an assignment originates from, and the party coherence
// between them (R-BANK-09). The assignment copies the bank user's user and party; its origin link must
// be a link of that same person, for the assignment's broker, open on the assignment's start date, of a
// membership that was not removed. The composite foreign keys pin the user id; the party, the date and
// the membership state are checked here, before any write, with their own error codes.
import type { TxSql } from '../db/client.ts';
import { BankUserError } from './bank-user-error.ts';

export interface OriginLinkQuery {
  tenantId: string;
  brokerId: string;
  /** The bank user's user (the person the bank login belongs to) and that user's party. */
  userId: string;
  partyId: string;
  /** The assignment's start date (YYYY-MM-DD). */
  on: string;
  /** A link named by the caller; otherwise the person's open link for the broker on `on` is used. */
  membershipBrokerId?: string | null;
}

export interface OriginLink {
  membershipBrokerId: string;
  membershipId: string;
}

/** Throws BANK_USER_PARTY_MISMATCH when the link's person is not the assignment's party. */
export function assertPartyCoherence(assignmentPartyId: string, linkPartyId: string): void {
  if (assignmentPartyId !== linkPartyId) throw new BankUserError('BANK_USER_PARTY_MISMATCH');
}

export async function originLinkFor(tx: TxSql, query: OriginLinkQuery): Promise<OriginLink> {
  const named = query.membershipBrokerId ?? null;
  if (named !== null && !/^[1-9][0-9]{0,18}$/.test(named)) throw new BankUserError('BANK_USER_ORIGIN_LINK_NOT_FOUND');
  // FOR SHARE OF mb: a link being ended concurrently waits until the assignment is recorded (or ends first
  // and is not found here).
  const [link] = named !== null
    ? await tx`
        SELECT mb.id::text, mb.membership_id::text, u.party_id::text,
               (mb.valid_from <= ${query.on}::date AND (mb.valid_until IS NULL OR mb.valid_until > ${query.on}::date)
                AND m.removed_at IS NULL) AS usable
          FROM membership_brokers mb
          JOIN memberships m ON m.id = mb.membership_id
          JOIN users u ON u.id = m.user_id
         WHERE mb.id = ${named} AND mb.tenant_id = ${query.tenantId} AND mb.broker_id = ${query.brokerId}
           FOR SHARE OF mb`
    : await tx`
        SELECT mb.id::text, mb.membership_id::text, u.party_id::text, true AS usable
          FROM membership_brokers mb
          JOIN memberships m ON m.id = mb.membership_id AND m.removed_at IS NULL
          JOIN users u ON u.id = m.user_id
         WHERE mb.tenant_id = ${query.tenantId} AND mb.broker_id = ${query.brokerId} AND mb.user_id = ${query.userId}
           AND mb.valid_from <= ${query.on}::date AND (mb.valid_until IS NULL OR mb.valid_until > ${query.on}::date)
         ORDER BY mb.valid_from DESC, mb.id DESC
         LIMIT 1
           FOR SHARE OF mb`;
  if (!link) throw new BankUserError('BANK_USER_ORIGIN_LINK_NOT_FOUND');
  // Party first: a link of another person is that error whatever its dates.
  assertPartyCoherence(query.partyId, link.party_id as string);
  if (!link.usable) throw new BankUserError('BANK_USER_ORIGIN_LINK_NOT_FOUND');
  return { membershipBrokerId: link.id as string, membershipId: link.membership_id as string };
}
