// How a tenant and broker see their bank users (R-BANK-02). user_banks is global and sensitive, so it
// is never read on its own: every read starts from bank_user_assignments, which carry tenant and broker,
// and returns only bank users assigned to the caller's tenant and broker on the date asked. A bank user
// of another broker or tenant, or one with no assignment, is simply absent.
import type { TxSql } from '../db/client.ts';
import { isBusinessDate } from '../brokers/business-date.ts';
import { BankUserError } from './bank-user-error.ts';

export interface BrokerContext {
  /** Both from the server-side session (tenant and acting broker), never from a payload. */
  tenantId: string;
  brokerId: string;
  /** Business date YYYY-MM-DD; the database's current_date when omitted. */
  on?: string;
}

export interface BrokerBankUser {
  userBankId: string;
  assignmentId: string;
  financialInstitutionId: string;
  /** The bank-user number (the login at the institution). */
  number: string;
  kind: string;
  status: string;
  userId: string;
  closedAt: string | null;
  validFrom: string;
  validUntil: string | null;
  storeCodeId: string;
  storeCode: string;
}

async function assignedBankUsers(tx: TxSql, context: BrokerContext, userBankId: string | null): Promise<BrokerBankUser[]> {
  const on = context.on ?? null;
  if (on !== null && !isBusinessDate(on)) throw new BankUserError('BANK_USER_DATE_INVALID');
  const rows = await tx`
    SELECT ub.id::text AS user_bank_id, a.id::text AS assignment_id, a.financial_institution_id::text,
           fic.login AS number, ub.kind, ub.status, a.user_id::text, ub.closed_at::text,
           a.valid_from::text, a.valid_until::text, sc.id::text AS store_code_id, sc.code AS store_code
      FROM bank_user_assignments a
      JOIN user_banks ub ON ub.id = a.user_bank_id
      JOIN financial_institution_credentials fic ON fic.credential_id = ub.credential_id
      JOIN store_codes sc ON sc.id = a.store_code_id
     WHERE a.tenant_id = ${context.tenantId} AND a.broker_id = ${context.brokerId}
       AND a.valid_from <= coalesce(${on}::date, current_date)
       AND (a.valid_until IS NULL OR a.valid_until > coalesce(${on}::date, current_date))
       ${userBankId === null ? tx`` : tx`AND a.user_bank_id = ${userBankId}`}
     ORDER BY fic.login, ub.id`;
  return rows.map((r) => ({
    userBankId: r.user_bank_id as string,
    assignmentId: r.assignment_id as string,
    financialInstitutionId: r.financial_institution_id as string,
    number: r.number as string,
    kind: r.kind as string,
    status: r.status as string,
    userId: r.user_id as string,
    closedAt: (r.closed_at as string | null) ?? null,
    validFrom: r.valid_from as string,
    validUntil: (r.valid_until as string | null) ?? null,
    storeCodeId: r.store_code_id as string,
    storeCode: r.store_code as string,
  }));
}

/** The bank users assigned to the tenant and broker on the date. */
export async function listBankUsersForBroker(tx: TxSql, context: BrokerContext): Promise<BrokerBankUser[]> {
  return assignedBankUsers(tx, context, null);
}

/** One bank user, or null when it is not assigned to the tenant and broker on the date (neutral). */
export async function findBankUserForBroker(tx: TxSql, context: BrokerContext, userBankId: string): Promise<BrokerBankUser | null> {
  if (!/^[1-9][0-9]{0,18}$/.test(userBankId)) return null;
  const [found] = await assignedBankUsers(tx, context, userBankId);
  return found ?? null;
}
