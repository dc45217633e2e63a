// billing.send_invoice_reminder: records a reminder of an unpaid invoice in invoice_reminders (the
// example's own table, invoice-reminders.sql) and publishes billing.invoice_reminded v1, which
// billing.email_invoice_reminder turns into an e-mail. After three reminders of one invoice it refuses
// for good: a person should call that customer.
// #region unit
import { z } from 'zod';
import { defineTask, PermanentFailure } from '../../src/work/index.ts';

/** Reminders of one invoice before the task refuses. */
export const MAX_REMINDERS = 3;

export const sendInvoiceReminder = defineTask({
  name: 'billing.send_invoice_reminder',   // dot-separated [a-z][a-z0-9_]* segments, ≤ 64 characters
  queue: 'default',                        // critical | default | bulk | maintenance
  context: 'tenant',                       // tenant (default) | platform | system
  concurrency: 4,                          // simultaneous executions per workers process (default 1)
  timeoutSeconds: 30,                      // run.signal is aborted after this (default 60)
  payload: z.object({
    invoiceId: z.string().regex(/^inv_[a-z0-9]{1,32}$/),
    email: z.email(),
    amountCents: z.number().int().positive(),
    dueOn: z.iso.date(),
  }),
  // A transient failure (any error but the failures below) is retried: 3 receives at most, after a
  // random delay up to 5 s, then up to 10 s; the third failure fails the run.
  retry: { maxReceives: 3, backoff: { baseMs: 5_000, capMs: 60_000 } },
  async handler(payload, run) {
    // run.transaction: the effect transaction, bound to the run's tenant; it commits with the run, once.
    const [{ sent }] = await run.transaction<[{ sent: number }]>`
      SELECT count(*)::int AS sent FROM invoice_reminders WHERE tenant_id = ${run.tenantId} AND invoice_id = ${payload.invoiceId}`;
    if (sent >= MAX_REMINDERS) {
      // Permanent: no retry; the run fails with this code and its message goes to the dead-letter queue.
      throw new PermanentFailure({
        code: 'REMINDER_LIMIT_REACHED',
        message: `invoice ${payload.invoiceId} was reminded ${sent} times already: call the customer instead`,
      });
    }
    const [reminder] = await run.transaction<[{ id: string }]>`
      INSERT INTO invoice_reminders (tenant_id, invoice_id, email, amount_cents, due_on, run_id)
      VALUES (${run.tenantId}, ${payload.invoiceId}, ${payload.email}, ${payload.amountCents}, ${payload.dueOn}, ${run.runId})
      RETURNING id::text`;
    // Follow-ups go through the effect transaction: they exist only if this attempt commits.
    await run.publish({ type: 'billing.invoice_reminded', version: 1 }, { reminderId: reminder.id, ...payload });
    return { reminderId: reminder.id, reminder: sent + 1 };   // the run's outcome (a JSON object, ≤ 2048 bytes)
  },
});
// #endregion unit
