// billing.email_invoice_reminder under testUnit: testUnit publishes its event to it alone, so the test
// first records a reminder through billing.send_invoice_reminder, as production does.
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { testUnit } from '../../src/work/testing.ts';
import { freshDatabase, type TestDatabase } from '../../test/support/services.ts';
import { createTenant } from '../../test/integration/work-tables-support.ts';
import { emailInvoiceReminder } from './email-invoice-reminder.handler.ts';
import { sendInvoiceReminder } from './send-invoice-reminder.task.ts';

let db: TestDatabase;
let tenant: string;

beforeAll(async () => {
  db = await freshDatabase();
  await db.sql.file(path.join(import.meta.dirname, 'invoice-reminders.sql'));
  tenant = await createTenant(db.sql);
});
afterAll(() => db?.drop());

const invoice = { invoiceId: 'inv_2001', email: 'bia@example.com', amountCents: 4_990, dueOn: '2030-02-28' };

it('e-mails a recorded reminder once and stamps it', async () => {
  const recorded = await testUnit(sendInvoiceReminder, invoice, { sql: db.sql, tenant });
  const reminderId = String(recorded.outcome?.reminderId);

  const { outcome, error, run } = await testUnit(emailInvoiceReminder, { reminderId, ...invoice }, { sql: db.sql, tenant });
  expect(error).toBeNull();
  expect(outcome).toEqual({ emailed: true });
  expect(run).toMatchObject({ name: 'billing.email_invoice_reminder', status: 'succeeded' });
  const [row] = await db.sql`SELECT emailed_at FROM invoice_reminders WHERE id = ${reminderId}`;
  expect(row?.emailed_at).toBeInstanceOf(Date);

  // The same event again (a second publish, not a retry): the reminder was e-mailed, so it fails for good.
  const again = await testUnit(emailInvoiceReminder, { reminderId, ...invoice }, { sql: db.sql, tenant });
  expect(again.error).toMatchObject({ code: 'NOT_FOUND', permanent: true });
});
