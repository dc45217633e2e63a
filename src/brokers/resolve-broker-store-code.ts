// The store code a broker works under at an institution on a date (R-BRK-12). Nobody types a store
// code into business rows: use cases ask this resolver, which reads broker_store_codes (one period at a
// time per tenant, broker and institution, by the EXCLUDE constraint). A disabled store code resolves
// to nothing: no new business may be registered under it.
import type { TxSql } from '../db/client.ts';
import { BrokerStoreCodeError } from './broker-store-code-error.ts';
import { isBusinessDate } from './business-date.ts';

export type StoreCodeRegime = 'standard' | 'substabelecido' | 'indicado' | 'subzero';

export interface BrokerStoreCodeContext {
  tenantId: string;
  brokerId: string;
  financialInstitutionId: string;
  /** Business date YYYY-MM-DD; the database's current_date when omitted. */
  on?: string;
}

/** One period [validFrom, validUntil) of a broker working under a store code at an institution. */
export interface BrokerStoreCodePeriod {
  brokerStoreCodeId: string;
  storeCodeId: string;
  /** As the institution wrote it (leading zeros kept). */
  code: string;
  regime: StoreCodeRegime;
  validFrom: string;
  validUntil: string | null;
}

export interface ResolvedStoreCode extends BrokerStoreCodePeriod {
  owner: { kind: 'group_account'; financialInstitutionAccountId: string } | { kind: 'broker' };
}

export async function resolveBrokerStoreCode(tx: TxSql, context: BrokerStoreCodeContext): Promise<ResolvedStoreCode | null> {
  const on = context.on ?? null;
  if (on !== null && !isBusinessDate(on)) throw new BrokerStoreCodeError('BROKER_STORE_CODE_PERIOD_INVALID');
  const [row] = await tx`
    SELECT bsc.id::text AS broker_store_code_id, sc.id::text AS store_code_id, sc.code, bsc.regime,
           bsc.valid_from::text, bsc.valid_until::text, sc.financial_institution_account_id::text AS account_id
      FROM broker_store_codes bsc
      JOIN store_codes sc ON sc.id = bsc.store_code_id AND sc.tenant_id = bsc.tenant_id
     WHERE bsc.tenant_id = ${context.tenantId} AND bsc.broker_id = ${context.brokerId}
       AND bsc.financial_institution_id = ${context.financialInstitutionId}
       AND bsc.valid_from <= coalesce(${on}::date, current_date)
       AND (bsc.valid_until IS NULL OR bsc.valid_until > coalesce(${on}::date, current_date))
       AND sc.disabled_at IS NULL`;
  if (!row) return null;
  const accountId = (row.account_id as string | null) ?? null;
  return {
    brokerStoreCodeId: row.broker_store_code_id as string,
    storeCodeId: row.store_code_id as string,
    code: row.code as string,
    regime: row.regime as StoreCodeRegime,
    validFrom: row.valid_from as string,
    validUntil: (row.valid_until as string | null) ?? null,
    owner: accountId === null ? { kind: 'broker' } : { kind: 'group_account', financialInstitutionAccountId: accountId },
  };
}

/** Like resolveBrokerStoreCode, but a broker without a code on that date is an error for the caller. */
export async function requireBrokerStoreCode(tx: TxSql, context: BrokerStoreCodeContext): Promise<ResolvedStoreCode> {
  const resolved = await resolveBrokerStoreCode(tx, context);
  if (!resolved) throw new BrokerStoreCodeError('BROKER_STORE_CODE_UNRESOLVED');
  return resolved;
}
