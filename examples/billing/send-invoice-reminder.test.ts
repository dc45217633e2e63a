// billing.send_invoice_reminder under testUnit: its run goes through the worker's own runner against a
// real database (no SQS, Redis or relay), so what passes here passes in the workers.
// #region test
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { testUnit } from '../../src/work/testing.ts';
import { freshDatabase, type TestDatabase } from '../../test/support/services.ts';
import { createTenant } from '../../test/integration/work-tables-support.ts';
import { emailInvoiceReminder } from './email-invoice-reminder.handler.ts';
import { sendInvoiceReminder } from './send-invoice-reminder.task.ts';

let db: TestDatabase;   // this file's own database, cloned from the migrated template; dropped after
let tenant: string;     // a tenant id: the run belongs to it (a tenant unit)

beforeAll(async () => {
  db = await freshDatabase();
  await db.sql.file(path.join(import.meta.dirname, 'invoice-reminders.sql'));   // the unit's table
  tenant = await createTenant(db.sql);
});
afterAll(() => db?.drop());

const reminder = { invoiceId: 'inv_1001', email: 'ana@example.com', amountCents: 12_500, dueOn: '2030-01-31' };

it('records the reminder once and publishes billing.invoice_reminded', async () => {
  const { outcome, error, run, trail, followUps } = await testUnit(sendInvoiceReminder, reminder, {
    sql: db.sql,
    tenant,
    units: [emailInvoiceReminder],   // the subscribers run.publish reaches (default: none)
  });
  expect(error).toBeNull();
  expect(outcome).toMatchObject({ reminder: 1 });
  expect(run).toMatchObject({ status: 'succeeded', attempts: 1 });
  expect(trail.map((t) => t.event)).toEqual(['queued', 'sent', 'received', 'started', 'succeeded']);
  expect(followUps.map((f) => f.name)).toEqual(['billing.email_invoice_reminder']);
  const rows = await db.sql`SELECT run_id FROM invoice_reminders WHERE invoice_id = ${reminder.invoiceId}`;
  expect(rows.map((r) => r.run_id)).toEqual([run.runId]);
});
// #endregion test

// #region permanent
it('refuses a fourth reminder of one invoice for good: failed, dead-lettered, nothing written', async () => {
  const invoice = { ...reminder, invoiceId: 'inv_1002' };
  for (let n = 1; n <= 3; n++) expect((await testUnit(sendInvoiceReminder, invoice, { sql: db.sql, tenant })).outcome).toMatchObject({ reminder: n });

  const fourth = await testUnit(sendInvoiceReminder, invoice, { sql: db.sql, tenant });
  expect(fourth.error).toMatchObject({ code: 'REMINDER_LIMIT_REACHED', type: 'PermanentFailure', permanent: true });
  expect(fourth.run).toMatchObject({ status: 'failed' });
  expect(fourth.delivery).toBe('dead_lettered');
  const [{ count }] = await db.sql<[{ count: number }]>`SELECT count(*)::int AS count FROM invoice_reminders WHERE invoice_id = ${invoice.invoiceId}`;
  expect(count).toBe(3);
});
// #endregion permanent
