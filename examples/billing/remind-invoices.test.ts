// The reminder use cases: what they dispatch, read from what dispatch returns (the runs themselves are
// delivered and tested in send-invoice-reminder.test.ts). No Redis: the relay's sweep would send them.
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Actor } from '../../src/db/unit-of-work.ts';
import { DispatchError } from '../../src/work/index.ts';
import { freshDatabase, type TestDatabase } from '../../test/support/services.ts';
import { createTenant } from '../../test/integration/work-tables-support.ts';
import { remindInvoice, remindOverdueInvoices, type UnpaidInvoice } from './remind-invoices.ts';

let db: TestDatabase;
let tenant: string;
let actor: Actor;

beforeAll(async () => {
  db = await freshDatabase();
  // A system process acting for one tenant; a user's request would pass its user actor instead.
  tenant = await createTenant(db.sql);
  actor = { kind: 'system', tenantId: tenant, label: 'billing' };
});
afterAll(() => db?.drop());

const invoice = (id: string, email = `${id}@example.com`): UnpaidInvoice => ({ id, email, amountCents: 1_000, dueOn: '2030-03-31' });

it('typed: one run per invoice; while it waits, a second call returns it and writes nothing', async () => {
  const first = await remindInvoice(db.sql, undefined, actor, invoice('inv_3001'));
  expect(first).toMatchObject({ name: 'billing.send_invoice_reminder', queue: 'default', tenantId: tenant });
  expect(first.deduplicated).toBeUndefined();

  const again = await remindInvoice(db.sql, undefined, actor, invoice('inv_3001'));
  expect(again).toMatchObject({ runId: first.runId, deduplicated: true });
});

it('bulk: one run per invoice in one transaction; one bad payload refuses the whole list', async () => {
  const invoices = ['inv_3101', 'inv_3102', 'inv_3103'].map((id) => invoice(id));
  const refused = await remindOverdueInvoices(db.sql, undefined, actor, [...invoices, invoice('inv_3104', 'not an e-mail')]).catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(DispatchError);
  // The refusal names each bad payload by its index in the list, never its values.
  expect(refused).toMatchObject({ code: 'PAYLOAD_INVALID', details: { invalid: [{ index: 3 }] } });

  // Nothing of the refused list was written: none of these runs is found by its key.
  const runs = await remindOverdueInvoices(db.sql, undefined, actor, invoices);
  expect(runs).toHaveLength(3);
  expect(runs.every((r) => r.name === 'billing.send_invoice_reminder' && r.deduplicated === undefined)).toBe(true);
  expect(new Set(runs.map((r) => r.runId)).size).toBe(3);
});
