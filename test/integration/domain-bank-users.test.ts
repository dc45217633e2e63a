// Bank-user use cases against a migrated database: registration with a unique number (R-BANK-05),
// party coherence of the origin link (R-BANK-09), transfers (R-BANK-12, R-DB-24), the one-shot
// password reveal (R-BANK-14) and reads that go only through assignments (R-BANK-02).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from '../support/services.ts';
import { refusal } from '../support/refusal.ts';
import { inUnitOfWork } from '../../src/db/unit-of-work.ts';
import type { TxSql } from '../../src/db/client.ts';
import { assignBrokerStoreCode } from '../../src/brokers/assign-broker-store-code.ts';
import { sealBankPassword, unsealBankPassword } from '../../src/bank-users/bank-password-sealing.ts';
import { registerBankUser, type RegisterBankUserInput } from '../../src/bank-users/register-bank-user.ts';
import { transferBankUser, type TransferBankUserInput } from '../../src/bank-users/transfer-bank-user.ts';
import { revealBankCredential, type PortalViewer, type UnitOfWork } from '../../src/bank-users/reveal-bank-credential.ts';
import { findBankUserForBroker, listBankUsersForBroker } from '../../src/bank-users/broker-bank-users.ts';
import { BANK_USER_MESSAGES } from '../../src/bank-users/bank-user-error.ts';
import {
  buildDomainWorld, createInstitution, createPerson, insertRow,
  type DomainWorld, type Institution, type Person,
} from './domain-support.ts';

const KEY = randomBytes(32);
const unseal = (sealed: { algorithm: string; secret: Buffer }) => unsealBankPassword(KEY, sealed);

let db: TestDatabase;
let w: DomainWorld;
beforeAll(async () => {
  db = await freshDatabase({ max: 5 });
  w = await buildDomainWorld(db.sql);
});
afterAll(async () => {
  await db?.drop();
});

/** An institution where b1 works under the group code in both tenants and b2 under its own code in A. */
async function institution(): Promise<Institution> {
  const fi = await createInstitution(db.sql, w);
  await db.sql.begin(async (tx) => {
    const base = { financialInstitutionId: fi.id, validFrom: '2024-01-01', assignedByUserId: w.admin.userId };
    await assignBrokerStoreCode(tx, { ...base, tenantId: w.a.id, brokerId: w.b1, storeCodeId: fi.groupCodeA, regime: 'standard' });
    await assignBrokerStoreCode(tx, { ...base, tenantId: w.a.id, brokerId: w.b2, storeCodeId: fi.b2CodeA, regime: 'indicado' });
    await assignBrokerStoreCode(tx, { ...base, tenantId: w.b.id, brokerId: w.b1, storeCodeId: fi.groupCodeB, regime: 'standard' });
  });
  return fi;
}

const inTx = <T>(work: (tx: TxSql) => Promise<T>) => db.sql.begin(work) as Promise<T>;

function register(fi: Institution, input: Partial<RegisterBankUserInput> = {}) {
  return inTx((tx) =>
    registerBankUser(tx, {
      tenantId: w.a.id, brokerId: w.b1, financialInstitutionId: fi.id, userId: w.ana.userId, number: '000123',
      kind: 'operator', sealedPassword: sealBankPassword(KEY, 's3cret-1'), validFrom: '2024-01-01',
      createdByUserId: w.admin.userId, ...input,
    }));
}

function transfer(userBankId: string, input: Partial<TransferBankUserInput> = {}) {
  return inTx((tx) =>
    transferBankUser(tx, {
      tenantId: w.a.id, userBankId, toBrokerId: w.b2, effectiveOn: '2024-03-01', reason: 'team change',
      actor: { userId: w.admin.userId, membershipId: w.admin.membershipA, brokerId: w.b1 }, ...input,
    }));
}

const assignments = async (userBankId: string) =>
  (await db.sql`
    SELECT id::text, broker_id::text, valid_from::text, valid_until::text, store_code_id::text,
           origin_membership_broker_id::text AS origin, party_id::text, ended_by_user_id::text, created_by_user_id::text
      FROM bank_user_assignments WHERE user_bank_id = ${userBankId} ORDER BY valid_from`).map((r) => ({ ...r }));

describe('registerBankUser', () => {
  it('R-BANK-05 a bank-user number in use in another tenant is refused with a neutral error, and a closed one is released', async () => {
    const fi = await institution();
    const first = await register(fi);
    const [stored] = await db.sql`
      SELECT fic.login, ub.user_id::text, ub.kind, ub.status FROM user_banks ub
        JOIN financial_institution_credentials fic ON fic.credential_id = ub.credential_id WHERE ub.id = ${first.userBankId}`;
    expect({ ...stored }).toEqual({ login: '000123', user_id: w.ana.userId, kind: 'operator', status: 'active' });
    // R-BRK-12: the store code was resolved from broker_store_codes, not typed in.
    expect(first).toMatchObject({ storeCodeId: fi.groupCodeA, storeCode: '0042', originMembershipBrokerId: w.ana.linkA1 });

    const count = async () => (await db.sql`SELECT count(*)::int AS n FROM user_banks WHERE financial_institution_id = ${fi.id}`)[0]!.n;
    // Caio in tenant B, same number (spaces and case do not make another number).
    for (const number of ['000123', ' 000123 ']) {
      const refused = await refusal(() => register(fi, { tenantId: w.b.id, userId: w.caio.userId, number }));
      expect(refused.code).toBe('BANK_USER_NUMBER_UNAVAILABLE');
      // Neutral: the message names neither the number nor where it is used.
      expect(refused.message).toBe(BANK_USER_MESSAGES.BANK_USER_NUMBER_UNAVAILABLE.en);
      expect(refused.message).not.toMatch(/000123|Tenant A/);
    }
    // The same answer inside the tenant, and for a person who already has an open bank user there.
    expect((await refusal(() => register(fi, { userId: w.bia.userId }))).code).toBe('BANK_USER_NUMBER_UNAVAILABLE');
    expect((await refusal(() => register(fi, { number: '999' }))).code).toBe('BANK_USER_NUMBER_UNAVAILABLE');
    expect(await count()).toBe(1);

    // Another number is fine; once the first bank user is closed its number may be registered again.
    await register(fi, { tenantId: w.b.id, userId: w.caio.userId, number: '000124' });
    await db.sql`UPDATE user_banks SET closed_at = clock_timestamp() WHERE id = ${first.userBankId}`;
    const again = await register(fi, { userId: w.bia.userId, number: '000123' });
    expect(again.originMembershipBrokerId).toBe(w.bia.linkA1);
    expect(await count()).toBe(3);
    expect((await refusal(() => register(fi, { userId: w.admin.userId, number: '  ' }))).code).toBe('BANK_USER_NUMBER_INVALID');
  });

  it('R-BANK-05 two tenants registering one number at the same time: exactly one succeeds', async () => {
    const fi = await institution();
    const results = await Promise.allSettled([
      register(fi, { number: 'X-77' }),
      register(fi, { tenantId: w.b.id, userId: w.caio.userId, number: 'x-77' }),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const rejected = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(rejected.reason.code).toBe('BANK_USER_NUMBER_UNAVAILABLE');
  });

  it('R-BANK-09 the origin link must be a link of the bank user\'s own person, acting for the broker on the start date', async () => {
    const fi = await institution();
    const mismatch = await refusal(() => register(fi, { originMembershipBrokerId: w.bia.linkA1 }));
    expect(mismatch.code).toBe('BANK_USER_PARTY_MISMATCH');
    // Caio acts for b1 only in tenant B: no link in tenant A.
    expect((await refusal(() => register(fi, { userId: w.caio.userId }))).code).toBe('BANK_USER_ORIGIN_LINK_NOT_FOUND');
    // A link starting after the assignment's start does not cover it.
    expect((await refusal(() => register(fi, { validFrom: '2023-12-31' }))).code).toBe('BANK_USER_ORIGIN_LINK_NOT_FOUND');
    expect((await db.sql`SELECT count(*)::int AS n FROM user_banks WHERE financial_institution_id = ${fi.id}`)[0]!.n).toBe(0);

    const ok = await register(fi, { originMembershipBrokerId: w.ana.linkA1 });
    const [row] = await assignments(ok.userBankId);
    expect(row).toMatchObject({ party_id: w.ana.partyId, origin: w.ana.linkA1 });
  });
});

describe('transferBankUser', () => {
  it('R-BANK-12 R-DB-24 closes the origin and opens the destination on the same date, with a transfer record naming both', async () => {
    const fi = await institution();
    const bank = await register(fi);
    const result = await transfer(bank.userBankId);

    const rows = await assignments(bank.userBankId);
    expect(rows).toEqual([
      {
        id: bank.assignmentId, broker_id: w.b1, valid_from: '2024-01-01', valid_until: '2024-03-01', store_code_id: fi.groupCodeA,
        origin: w.ana.linkA1, party_id: w.ana.partyId, ended_by_user_id: w.admin.userId, created_by_user_id: w.admin.userId,
      },
      {
        id: result.toAssignmentId, broker_id: w.b2, valid_from: '2024-03-01', valid_until: null, store_code_id: fi.groupCodeA,
        origin: w.ana.linkA2, party_id: w.ana.partyId, ended_by_user_id: null, created_by_user_id: w.admin.userId,
      },
    ]);
    const [record] = await db.sql`
      SELECT id::text, tenant_id::text, from_assignment_id::text AS from_a, from_broker_id::text AS from_b,
             to_assignment_id::text AS to_a, to_broker_id::text AS to_b, effective_on::text, actor_user_id::text,
             actor_membership_id::text, actor_broker_id::text, reason
        FROM bank_user_transfers WHERE user_bank_id = ${bank.userBankId}`;
    expect({ ...record }).toEqual({
      id: result.transferId, tenant_id: w.a.id, from_a: bank.assignmentId, from_b: w.b1, to_a: result.toAssignmentId, to_b: w.b2,
      effective_on: '2024-03-01', actor_user_id: w.admin.userId, actor_membership_id: w.admin.membershipA, actor_broker_id: w.b1,
      reason: 'team change',
    });

    // And back again later: the chain continues from the open assignment.
    const back = await transfer(bank.userBankId, { toBrokerId: w.b1, effectiveOn: '2024-05-01' });
    expect(back.fromAssignmentId).toBe(result.toAssignmentId);
    expect((await assignments(bank.userBankId)).map((r) => [r.broker_id, r.valid_from, r.valid_until])).toEqual([
      [w.b1, '2024-01-01', '2024-03-01'], [w.b2, '2024-03-01', '2024-05-01'], [w.b1, '2024-05-01', null],
    ]);
  });

  it('R-BANK-12 R-BANK-09 a refused transfer changes nothing', async () => {
    const fi = await institution();
    const bank = await register(fi);
    const before = await assignments(bank.userBankId);
    const code = async (input: Partial<TransferBankUserInput>) => (await refusal(() => transfer(bank.userBankId, input))).code;

    expect(await code({ toBrokerId: w.b1 })).toBe('BANK_USER_TRANSFER_SAME_BROKER');
    expect(await code({ effectiveOn: '2024-01-01' })).toBe('BANK_USER_DATE_INVALID');
    expect(await code({ effectiveOn: '2024-13-01' })).toBe('BANK_USER_DATE_INVALID');
    expect(await code({ reason: ' ' })).toBe('BANK_USER_REASON_REQUIRED');
    expect(await code({ tenantId: w.b.id, toBrokerId: w.b1 })).toBe('BANK_USER_NOT_FOUND');
    expect(await code({ toBrokerId: '987654' })).toBe('BANK_USER_BROKER_NOT_IN_TENANT');
    // The destination link of another person breaks party coherence (R-BANK-09).
    expect(await code({ toOriginMembershipBrokerId: w.bia.linkA2 })).toBe('BANK_USER_PARTY_MISMATCH');
    // Ana stops acting for b2 before the effective date: no origin link for the destination.
    await db.sql`UPDATE membership_brokers SET valid_until = '2024-02-01' WHERE id = ${w.ana.linkA2}`;
    try {
      expect(await code({})).toBe('BANK_USER_ORIGIN_LINK_NOT_FOUND');
    } finally {
      await db.sql`UPDATE membership_brokers SET valid_until = NULL WHERE id = ${w.ana.linkA2}`;
    }

    expect(await assignments(bank.userBankId)).toEqual(before);
    expect((await db.sql`SELECT count(*)::int AS n FROM bank_user_transfers WHERE user_bank_id = ${bank.userBankId}`)[0]!.n).toBe(0);
  });

  it('R-BANK-12 two concurrent transfers of one bank user serialize: the second sees the first\'s result', async () => {
    const fi = await institution();
    const bank = await register(fi);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let firstDone!: () => void;
    const firstTransferred = new Promise<void>((resolve) => (firstDone = resolve));
    const first = inTx(async (tx) => {
      const r = await transferBankUser(tx, {
        tenantId: w.a.id, userBankId: bank.userBankId, toBrokerId: w.b2, effectiveOn: '2024-03-01', reason: 'first',
        actor: { userId: w.admin.userId },
      });
      firstDone();
      await held;
      return r;
    });
    await firstTransferred;
    // refusal() attaches the handler at once: the second transfer may reject before `first` resolves.
    const second = refusal(() => transfer(bank.userBankId, { effectiveOn: '2024-04-01', reason: 'second' }));
    // Released only once the second transfer waits on the first one's row lock (a condition, not a sleep).
    const deadline = Date.now() + 10_000;
    for (;;) {
      const [row] = await db.sql`SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`;
      if (row!.n > 0) break;
      if (Date.now() > deadline) {
        release();
        throw new Error('the second transfer never waited for the first one\'s lock');
      }
      await new Promise((r) => setImmediate(r));
    }
    release();
    await first;
    expect((await second).code).toBe('BANK_USER_TRANSFER_SAME_BROKER');
    expect((await assignments(bank.userBankId)).map((r) => [r.broker_id, r.valid_until])).toEqual([[w.b1, '2024-03-01'], [w.b2, null]]);
  });
});

describe('revealBankCredential', () => {
  const viewer = (overrides: Partial<PortalViewer> = {}): PortalViewer => ({
    surface: 'portal', userId: w.admin.userId, tenantId: w.a.id, membershipId: w.admin.membershipA, brokerId: w.b1, ...overrides,
  });
  const uow = (v: PortalViewer): UnitOfWork => (work) =>
    inUnitOfWork(db.sql, { kind: 'user', tenantId: v.tenantId, userId: v.userId, membershipId: v.membershipId, label: 'portal' }, work);
  const reveal = (userBankId: string, v = viewer(), payload: unknown = { userBankId }) => revealBankCredential(uow(v), v, payload, unseal);
  const deliveries = async (userBankId: string) =>
    (await db.sql`
      SELECT credential_version_id::text AS version_id, assignment_id::text, viewed_by_user_id::text, tenant_id::text
        FROM bank_credential_deliveries WHERE user_bank_id = ${userBankId} ORDER BY consumed_at`).map((r) => ({ ...r }));

  it('R-BANK-14 reveals once per password version, recording the session\'s viewer', async () => {
    const fi = await institution();
    const bank = await register(fi);
    const shown = await reveal(bank.userBankId);
    expect(shown).toMatchObject({ userBankId: bank.userBankId, credentialVersionId: bank.credentialVersionId, version: 1, password: 's3cret-1' });
    expect(await deliveries(bank.userBankId)).toEqual([
      { version_id: bank.credentialVersionId, assignment_id: bank.assignmentId, viewed_by_user_id: w.admin.userId, tenant_id: w.a.id },
    ]);

    const again = await refusal(() => reveal(bank.userBankId));
    expect(again.code).toBe('BANK_CREDENTIAL_ALREADY_REVEALED');
    expect(again.message).not.toContain('s3cret');
    // Also for another viewer acting for the broker: one reveal per version, not per person.
    const ana = viewer({ userId: w.ana.userId, membershipId: w.ana.membershipA });
    expect((await refusal(() => reveal(bank.userBankId, ana))).code).toBe('BANK_CREDENTIAL_ALREADY_REVEALED');

    // A new password version can be revealed once more.
    const sealed = sealBankPassword(KEY, 's3cret-2');
    await db.sql.begin(async (tx) => {
      await tx`UPDATE credential_versions SET retired_at = clock_timestamp() WHERE id = ${bank.credentialVersionId}`;
      await tx`INSERT INTO credential_versions (credential_id, version, algorithm, secret) VALUES (${bank.credentialId}, 2, ${sealed.algorithm}, ${sealed.secret})`;
    });
    expect(await reveal(bank.userBankId, ana)).toMatchObject({ version: 2, password: 's3cret-2' });
    expect((await deliveries(bank.userBankId)).map((d) => d.viewed_by_user_id)).toEqual([w.admin.userId, w.ana.userId]);
  });

  it('R-BANK-14 the viewer comes from the session, never from the payload; access goes through the broker\'s assignment', async () => {
    const fi = await institution();
    const bank = await register(fi);
    const forged = await refusal(() => reveal(bank.userBankId, viewer(), { userBankId: bank.userBankId, viewedByUserId: w.bia.userId }));
    expect(forged.code).toBe('BANK_CREDENTIAL_REQUEST_INVALID');
    expect((await refusal(() => reveal(bank.userBankId, viewer(), {}))).code).toBe('BANK_CREDENTIAL_REQUEST_INVALID');
    const api = { ...viewer(), surface: 'api' } as unknown as PortalViewer;
    expect((await refusal(() => reveal(bank.userBankId, api))).code).toBe('BANK_CREDENTIAL_PORTAL_ONLY');
    // A session of tenant A acting for b2, where the bank user is not assigned: neutral not-found.
    expect((await refusal(() => reveal(bank.userBankId, viewer({ brokerId: w.b2 })))).code).toBe('BANK_USER_NOT_FOUND');
    // A session claiming b1 without acting for it (caio's membership is in tenant B).
    const outsider = viewer({ userId: w.caio.userId, membershipId: w.caio.membershipB });
    expect((await refusal(() => reveal(bank.userBankId, outsider))).code).toBe('BANK_CREDENTIAL_VIEWER_NOT_ALLOWED');
    expect(await deliveries(bank.userBankId)).toEqual([]);

    const shown = await reveal(bank.userBankId, viewer({ userId: w.bia.userId, membershipId: w.bia.membershipA }));
    expect(shown.password).toBe('s3cret-1');
    expect((await deliveries(bank.userBankId))[0]!.viewed_by_user_id).toBe(w.bia.userId);
  });

  it('R-BANK-14 the password is returned only after commit: a failed commit returns nothing and consumes nothing', async () => {
    const fi = await institution();
    const bank = await register(fi);
    const commitFails: UnitOfWork = (work) =>
      db.sql.begin(async (tx) => {
        await work(tx);
        throw new Error('commit refused');
      });
    const failed = await refusal(() => revealBankCredential(commitFails, viewer(), { userBankId: bank.userBankId }, unseal));
    expect(failed.message).toBe('commit refused');
    expect(await deliveries(bank.userBankId)).toEqual([]);

    // An unreadable secret rolls back too, so the one reveal is not lost.
    const wrongKey = (sealed: { algorithm: string; secret: Buffer }) => unsealBankPassword(randomBytes(32), sealed);
    const unreadable = await refusal(() => revealBankCredential(uow(viewer()), viewer(), { userBankId: bank.userBankId }, wrongKey));
    expect(unreadable.code).toBe('BANK_CREDENTIAL_UNREADABLE');
    expect(await deliveries(bank.userBankId)).toEqual([]);

    let committed = false;
    const observed: UnitOfWork = async (work) => {
      const value = await inUnitOfWork(db.sql, { kind: 'system', tenantId: w.a.id, label: 'test' }, work);
      committed = true;
      return value;
    };
    const shown = await revealBankCredential(observed, viewer(), { userBankId: bank.userBankId }, unseal);
    expect(committed).toBe(true);
    expect(shown.password).toBe('s3cret-1');
  });
});

describe('broker bank-user reads', () => {
  it('R-BANK-02 bank users are read only through assignments carrying the tenant and broker', async () => {
    const fi = await institution();
    const bank = await register(fi);
    await register(fi, { tenantId: w.b.id, userId: w.caio.userId, number: '555' });
    // A bank user with no assignment at all: never visible to anyone.
    const loner: Person = await createPerson(db.sql, 'Loner');
    const credential = await insertRow(db.sql, 'credentials', { uid: `c-${bank.userBankId}-loner`, kind: 'financial_institution' });
    await insertRow(db.sql, 'financial_institution_credentials', { credential_id: credential.id, financial_institution_id: fi.id, login: '777' });
    const lonerBank = await insertRow(db.sql, 'user_banks', {
      user_id: loner.userId, financial_institution_id: fi.id, credential_id: credential.id, kind: 'operator', status: 'active',
      confirmed_at: '2024-01-01T00:00:00Z',
    });

    const list = (tenantId: string, brokerId: string, on?: string) =>
      inTx((tx) => listBankUsersForBroker(tx, { tenantId, brokerId, ...(on ? { on } : {}) }))
        .then((rows) => rows.filter((r) => r.financialInstitutionId === fi.id).map((r) => r.number));
    expect(await list(w.a.id, w.b1)).toEqual(['000123']);
    expect(await list(w.b.id, w.b1)).toEqual(['555']);
    expect(await list(w.a.id, w.b2)).toEqual([]);
    expect(await list(w.a.id, w.b1, '2023-12-31')).toEqual([]);

    const find = (tenantId: string, brokerId: string, id: string, on?: string) =>
      inTx((tx) => findBankUserForBroker(tx, { tenantId, brokerId, ...(on ? { on } : {}) }, id));
    expect(await find(w.a.id, w.b1, bank.userBankId)).toMatchObject({
      userBankId: bank.userBankId, assignmentId: bank.assignmentId, number: '000123', storeCode: '0042', userId: w.ana.userId,
    });
    expect(await find(w.b.id, w.b1, bank.userBankId)).toBeNull();
    expect(await find(w.a.id, w.b2, bank.userBankId)).toBeNull();
    expect(await find(w.a.id, w.b1, lonerBank.id)).toBeNull();

    // After a transfer the bank user belongs to b1 before the effective date and to b2 from it.
    await transfer(bank.userBankId, { effectiveOn: '2024-03-01' });
    expect(await find(w.a.id, w.b1, bank.userBankId, '2024-02-29')).not.toBeNull();
    expect(await find(w.a.id, w.b1, bank.userBankId, '2024-03-01')).toBeNull();
    expect(await find(w.a.id, w.b2, bank.userBankId, '2024-03-01')).toMatchObject({ validFrom: '2024-03-01', validUntil: null });
  });
});
