// Gives a broker a store code at an institution for a period (R-BRK-11). The regime decides whose
// code it may be: `standard` works under a code of a group account (financial_institution_account_id
// set); `substabelecido`, `indicado` and `subzero` need a code owned by the broker itself (broker_id =
// this broker). The database only knows each code has exactly one owner; this rule lives here.
//
// Periods are half-open [valid_from, valid_until). Assigning from a date while the broker's current
// code is open-ended and started earlier closes that period on the new start date (a change of code);
// any other overlap is refused, and the EXCLUDE constraint remains the last word under concurrency.
import type { TxSql } from '../db/client.ts';
import { BrokerStoreCodeError } from './broker-store-code-error.ts';
import { isBusinessDate } from './business-date.ts';
import type { BrokerStoreCodePeriod, StoreCodeRegime } from './resolve-broker-store-code.ts';

export const STORE_CODE_REGIMES: readonly StoreCodeRegime[] = ['standard', 'substabelecido', 'indicado', 'subzero'];

export interface AssignBrokerStoreCodeInput {
  tenantId: string;
  brokerId: string;
  financialInstitutionId: string;
  storeCodeId: string;
  regime: StoreCodeRegime;
  validFrom: string;
  /** Exclusive end; null or omitted for no defined end. */
  validUntil?: string | null;
  /** From the server-side authenticated identity. */
  assignedByUserId: string;
}

export interface AssignedBrokerStoreCode extends BrokerStoreCodePeriod {
  /** The open-ended period this assignment closed on `validFrom`, if any. */
  closedBrokerStoreCodeId: string | null;
}

const NUMERIC_ID = /^[1-9][0-9]{0,18}$/;

export async function assignBrokerStoreCode(tx: TxSql, input: AssignBrokerStoreCodeInput): Promise<AssignedBrokerStoreCode> {
  if (!STORE_CODE_REGIMES.includes(input.regime)) throw new BrokerStoreCodeError('BROKER_STORE_CODE_REGIME_INVALID');
  const validUntil = input.validUntil ?? null;
  if (
    !isBusinessDate(input.validFrom) ||
    (validUntil !== null && (!isBusinessDate(validUntil) || validUntil <= input.validFrom))
  ) {
    throw new BrokerStoreCodeError('BROKER_STORE_CODE_PERIOD_INVALID');
  }
  if (!NUMERIC_ID.test(input.brokerId)) throw new BrokerStoreCodeError('BROKER_NOT_IN_TENANT');
  if (!NUMERIC_ID.test(input.storeCodeId)) throw new BrokerStoreCodeError('STORE_CODE_NOT_FOUND');

  // NO KEY UPDATE serializes assignments of one broker (the overlap check below is then race-free)
  // without blocking rows that merely reference tenant_brokers.
  const [tenantBroker] = await tx`
    SELECT disabled_at FROM tenant_brokers
     WHERE tenant_id = ${input.tenantId} AND broker_id = ${input.brokerId} FOR NO KEY UPDATE`;
  if (!tenantBroker || tenantBroker.disabled_at !== null) throw new BrokerStoreCodeError('BROKER_NOT_IN_TENANT');

  const [storeCode] = await tx`
    SELECT code, financial_institution_account_id::text AS account_id, broker_id::text, disabled_at
      FROM store_codes
     WHERE id = ${input.storeCodeId} AND tenant_id = ${input.tenantId}
       AND financial_institution_id = ${input.financialInstitutionId}
       FOR SHARE`;
  if (!storeCode) throw new BrokerStoreCodeError('STORE_CODE_NOT_FOUND');
  if (storeCode.disabled_at !== null) throw new BrokerStoreCodeError('STORE_CODE_DISABLED');
  if (input.regime === 'standard') {
    if (storeCode.account_id === null) throw new BrokerStoreCodeError('BROKER_STORE_CODE_NEEDS_GROUP_ACCOUNT');
  } else if (storeCode.broker_id !== input.brokerId) {
    throw new BrokerStoreCodeError('BROKER_STORE_CODE_NEEDS_BROKER_OWNED');
  }

  const overlapping = await tx`
    SELECT id::text, valid_from::text, valid_until::text FROM broker_store_codes
     WHERE tenant_id = ${input.tenantId} AND broker_id = ${input.brokerId}
       AND financial_institution_id = ${input.financialInstitutionId}
       AND daterange(valid_from, valid_until, '[)') && daterange(${input.validFrom}::date, ${validUntil}::date, '[)')
     ORDER BY valid_from
       FOR UPDATE`;
  let closedBrokerStoreCodeId: string | null = null;
  if (overlapping.length) {
    const [only] = overlapping;
    const supersedes = overlapping.length === 1 && only!.valid_until === null && (only!.valid_from as string) < input.validFrom;
    if (!supersedes) throw new BrokerStoreCodeError('BROKER_STORE_CODE_OVERLAP');
    await tx`UPDATE broker_store_codes SET valid_until = ${input.validFrom} WHERE id = ${only!.id}`;
    closedBrokerStoreCodeId = only!.id as string;
  }

  let inserted: { id: unknown } | undefined;
  try {
    [inserted] = await tx`
      INSERT INTO broker_store_codes
        (tenant_id, broker_id, financial_institution_id, store_code_id, regime, valid_from, valid_until, assigned_by_user_id)
      VALUES (${input.tenantId}, ${input.brokerId}, ${input.financialInstitutionId}, ${input.storeCodeId}, ${input.regime},
              ${input.validFrom}, ${validUntil}, ${input.assignedByUserId})
      RETURNING id::text`;
  } catch (error) {
    if ((error as { constraint_name?: string }).constraint_name === 'broker_store_codes_no_overlap') {
      throw new BrokerStoreCodeError('BROKER_STORE_CODE_OVERLAP', { cause: error });
    }
    throw error;
  }
  return {
    brokerStoreCodeId: inserted!.id as string,
    storeCodeId: input.storeCodeId,
    code: storeCode.code as string,
    regime: input.regime,
    validFrom: input.validFrom,
    validUntil,
    closedBrokerStoreCodeId,
  };
}
