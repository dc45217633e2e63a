// billing.email_invoice_reminder: subscriber of billing.invoice_reminded v1 (published by
// billing.send_invoice_reminder); e-mails the customer and stamps the reminder emailed_at.
// #region unit
import { z } from 'zod';
import { defineSubscriber, NotFoundFailure } from '../../src/work/index.ts';
import { mailerFor } from '../../src/mail/mailer.ts';

export const emailInvoiceReminder = defineSubscriber({
  name: 'billing.email_invoice_reminder',
  event: { type: 'billing.invoice_reminded', version: 1 },
  queue: 'critical',
  timeoutSeconds: 20,
  payload: z.object({
    reminderId: z.string().regex(/^[1-9][0-9]*$/),
    invoiceId: z.string(),
    email: z.email(),
    amountCents: z.number().int().positive(),
    dueOn: z.iso.date(),
  }),
  async handler(payload, run) {
    const stamped = await run.transaction`
      UPDATE invoice_reminders SET emailed_at = clock_timestamp()
       WHERE id = ${payload.reminderId} AND tenant_id = ${run.tenantId} AND emailed_at IS NULL`;
    if (stamped.count === 0) throw new NotFoundFailure(`reminder ${payload.reminderId} does not exist or was e-mailed already`);
    // The e-mail goes last: a failure before it rolls the stamp back and the run is retried. A handler
    // can run more than once, so a mail provider that takes an idempotency key gets run.runId.
    const amount = (payload.amountCents / 100).toFixed(2);
    await mailerFor(run.logger).send({
      to: payload.email,
      subject: `Invoice ${payload.invoiceId} is due`,
      text: `Invoice ${payload.invoiceId} (${amount}) was due on ${payload.dueOn}. If you paid it already, ignore this message.`,
    });
    return { emailed: true };
  },
});
// #endregion unit
