// Billing's reminder use cases, as an API route or a job of the project calls them: each opens a unit
// of work (one transaction under the actor's context), dispatches billing.send_invoice_reminder in it,
// and wakes the relay once after commit. Whatever else the use case writes through `tx` commits with the
// runs, or none of it does.
// #region dispatch
import {
  afterCommit,              // wakes the relay once the transaction committed
  dispatchMany,
  dispatchTask,
  inUnitOfWork,             // one transaction under the actor's context
  type Actor,               // who acts: a user of a tenant, the system (for a tenant or not), the scheduler
  type DispatchedRun,
  type Redis,               // createRedis(REDIS_URL) from src/kv/client.ts: optional, only the wake signal
  type Sql,                 // createSql(DATABASE_URL) from src/db/client.ts: one pool per process
} from '../../src/work/index.ts';
import { sendInvoiceReminder } from './send-invoice-reminder.task.ts';

export interface UnpaidInvoice {
  id: string;
  email: string;
  amountCents: number;
  dueOn: string;
}

const reminderOf = (invoice: UnpaidInvoice) => ({ invoiceId: invoice.id, email: invoice.email, amountCents: invoice.amountCents, dueOn: invoice.dueOn });

/** Reminds one invoice, unless a reminder of it is still waiting or running: then returns that run (`deduplicated`). */
export async function remindInvoice(sql: Sql, redis: Redis | undefined, actor: Actor, invoice: UnpaidInvoice): Promise<DispatchedRun> {
  // Typed: TypeScript checks the payload against the task's schema, then the schema checks it.
  return afterCommit(redis, inUnitOfWork(sql, actor, (tx) =>
    dispatchTask(tx, sendInvoiceReminder, reminderOf(invoice), { actor, uniqueKey: `invoice:${invoice.id}` })));
}

/** Reminds every invoice of the list: one run each, all or nothing, one wake-up of the relay. */
export async function remindOverdueInvoices(sql: Sql, redis: Redis | undefined, actor: Actor, invoices: UnpaidInvoice[]): Promise<DispatchedRun[]> {
  // Bulk: up to 1,000,000 payloads, written 10,000 per statement; one bad payload refuses them all.
  return afterCommit(redis, inUnitOfWork(sql, actor, (tx) =>
    dispatchMany(tx, sendInvoiceReminder, invoices.map(reminderOf), { actor, uniqueKey: (p) => `invoice:${p.invoiceId}` })));
}
// #endregion dispatch
