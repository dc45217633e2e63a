// Broker store codes against a migrated database: which store codes a regime admits (R-BRK-11) and
// resolving the code a broker works under on a date (R-BRK-12).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from '../support/services.ts';
import { refusal } from '../support/refusal.ts';
import { assignBrokerStoreCode, type AssignBrokerStoreCodeInput } from '../../src/brokers/assign-broker-store-code.ts';
import { requireBrokerStoreCode, resolveBrokerStoreCode } from '../../src/brokers/resolve-broker-store-code.ts';
import { buildDomainWorld, createInstitution, type DomainWorld, type Institution } from './domain-support.ts';

let db: TestDatabase;
let w: DomainWorld;
beforeAll(async () => {
  db = await freshDatabase({ max: 3 });
  w = await buildDomainWorld(db.sql);
});
afterAll(async () => {
  await db?.drop();
});

function assign(fi: Institution, input: Partial<AssignBrokerStoreCodeInput> & Pick<AssignBrokerStoreCodeInput, 'storeCodeId' | 'regime'>) {
  return db.sql.begin((tx) =>
    assignBrokerStoreCode(tx, {
      tenantId: w.a.id, brokerId: w.b1, financialInstitutionId: fi.id, validFrom: '2024-01-01',
      assignedByUserId: w.admin.userId, ...input,
    }));
}
const refusedCode = async (run: () => Promise<unknown>) => (await refusal(run)).code;
const rowCount = async (fi: Institution) =>
  (await db.sql`SELECT count(*)::int AS n FROM broker_store_codes WHERE financial_institution_id = ${fi.id}`)[0]!.n as number;

describe('assignBrokerStoreCode', () => {
  it('R-BRK-11 regime standard needs a store code owned by a group account', async () => {
    const fi = await createInstitution(db.sql, w);
    const refused = await refusedCode(() => assign(fi, { storeCodeId: fi.b1CodeA, regime: 'standard' }));
    expect(refused).toBe('BROKER_STORE_CODE_NEEDS_GROUP_ACCOUNT');
    expect(await rowCount(fi)).toBe(0);

    const ok = await assign(fi, { storeCodeId: fi.groupCodeA, regime: 'standard' });
    expect(ok).toMatchObject({ storeCodeId: fi.groupCodeA, code: '0042', regime: 'standard', validUntil: null });
    const [row] = await db.sql`SELECT store_code_id::text, regime, assigned_by_user_id::text FROM broker_store_codes WHERE id = ${ok.brokerStoreCodeId}`;
    expect({ ...row }).toEqual({ store_code_id: fi.groupCodeA, regime: 'standard', assigned_by_user_id: w.admin.userId });
  });

  it('R-BRK-11 regimes substabelecido, indicado and subzero need a store code owned by the broker itself', async () => {
    const fi = await createInstitution(db.sql, w);
    for (const regime of ['substabelecido', 'indicado', 'subzero'] as const) {
      expect(await refusedCode(() => assign(fi, { storeCodeId: fi.groupCodeA, regime }))).toBe('BROKER_STORE_CODE_NEEDS_BROKER_OWNED');
      // b2's own code is not b1's.
      expect(await refusedCode(() => assign(fi, { storeCodeId: fi.b2CodeA, regime }))).toBe('BROKER_STORE_CODE_NEEDS_BROKER_OWNED');
    }
    expect(await rowCount(fi)).toBe(0);
    const ok = await assign(fi, { brokerId: w.b2, storeCodeId: fi.b2CodeA, regime: 'indicado' });
    expect(ok).toMatchObject({ code: '07002', regime: 'indicado' });
    expect(await refusedCode(() => assign(fi, { storeCodeId: fi.b1CodeA, regime: 'bogus' as never }))).toBe('BROKER_STORE_CODE_REGIME_INVALID');
  });

  it('R-BRK-11 the store code must be the tenant\'s at that institution, active, for an active broker, in a valid free period', async () => {
    const fi = await createInstitution(db.sql, w);
    const other = await createInstitution(db.sql, w);
    expect(await refusedCode(() => assign(fi, { storeCodeId: fi.groupCodeB, regime: 'standard' }))).toBe('STORE_CODE_NOT_FOUND');
    expect(await refusedCode(() => assign(fi, { storeCodeId: other.groupCodeA, regime: 'standard' }))).toBe('STORE_CODE_NOT_FOUND');
    expect(await refusedCode(() => assign(fi, { tenantId: w.b.id, brokerId: w.b2, storeCodeId: fi.groupCodeB, regime: 'standard' })))
      .toBe('BROKER_NOT_IN_TENANT');
    expect(await refusedCode(() => assign(fi, { storeCodeId: fi.groupCodeA, regime: 'standard', validFrom: '2024-02-30' })))
      .toBe('BROKER_STORE_CODE_PERIOD_INVALID');
    expect(await refusedCode(() => assign(fi, { storeCodeId: fi.groupCodeA, regime: 'standard', validUntil: '2024-01-01' })))
      .toBe('BROKER_STORE_CODE_PERIOD_INVALID');

    await assign(fi, { storeCodeId: fi.groupCodeA, regime: 'standard', validFrom: '2024-01-01', validUntil: '2024-03-01' });
    // Overlaps a closed period: refused by the use case (the EXCLUDE constraint would refuse it too).
    expect(await refusedCode(() => assign(fi, { storeCodeId: fi.b1CodeA, regime: 'indicado', validFrom: '2024-02-01' })))
      .toBe('BROKER_STORE_CODE_OVERLAP');
    // Adjacent half-open periods do not overlap.
    await assign(fi, { storeCodeId: fi.b1CodeA, regime: 'indicado', validFrom: '2024-03-01' });

    await db.sql`UPDATE store_codes SET disabled_at = clock_timestamp() WHERE id = ${other.b1CodeA}`;
    expect(await refusedCode(() => assign(other, { storeCodeId: other.b1CodeA, regime: 'indicado' }))).toBe('STORE_CODE_DISABLED');
  });
});

describe('resolveBrokerStoreCode', () => {
  it('R-BRK-12 the system resolves the broker\'s store code from broker_store_codes by date; a new code closes the open one', async () => {
    const fi = await createInstitution(db.sql, w);
    const ctx = { tenantId: w.a.id, brokerId: w.b1, financialInstitutionId: fi.id };
    const resolve = (on?: string) => db.sql.begin((tx) => resolveBrokerStoreCode(tx, { ...ctx, ...(on ? { on } : {}) }));

    expect(await resolve('2024-05-01')).toBeNull();
    const first = await assign(fi, { storeCodeId: fi.groupCodeA, regime: 'standard', validFrom: '2024-01-01' });
    const second = await assign(fi, { storeCodeId: fi.b1CodeA, regime: 'substabelecido', validFrom: '2024-06-01' });
    expect(second.closedBrokerStoreCodeId).toBe(first.brokerStoreCodeId);
    const [closed] = await db.sql`SELECT valid_until::text FROM broker_store_codes WHERE id = ${first.brokerStoreCodeId}`;
    expect(closed!.valid_until).toBe('2024-06-01');

    expect(await resolve('2023-12-31')).toBeNull();
    expect(await resolve('2024-05-31')).toEqual({
      brokerStoreCodeId: first.brokerStoreCodeId, storeCodeId: fi.groupCodeA, code: '0042', regime: 'standard',
      validFrom: '2024-01-01', validUntil: '2024-06-01', owner: { kind: 'group_account', financialInstitutionAccountId: expect.any(String) },
    });
    expect(await resolve('2024-06-01')).toMatchObject({ storeCodeId: fi.b1CodeA, code: '7001', regime: 'substabelecido', owner: { kind: 'broker' } });
    expect(await resolve()).toMatchObject({ storeCodeId: fi.b1CodeA }); // today
    // Another broker or tenant resolves nothing from b1's rows.
    expect(await db.sql.begin((tx) => resolveBrokerStoreCode(tx, { ...ctx, brokerId: w.b2, on: '2024-06-01' }))).toBeNull();
    expect(await db.sql.begin((tx) => resolveBrokerStoreCode(tx, { ...ctx, tenantId: w.b.id, on: '2024-06-01' }))).toBeNull();

    // A disabled store code resolves to nothing, and requiring one is then an error with a code.
    await db.sql`UPDATE store_codes SET disabled_at = clock_timestamp() WHERE id = ${fi.b1CodeA}`;
    expect(await resolve('2024-06-01')).toBeNull();
    const missing = await refusal(() => db.sql.begin((tx) => requireBrokerStoreCode(tx, { ...ctx, on: '2024-06-01' })));
    expect(missing.code).toBe('BROKER_STORE_CODE_UNRESOLVED');
  });
});
