// Runs one delivery of a queue message through the gated idempotency runner and settles it.
//
//   checks (delivery/checks.ts): envelope, unit, receive count, context, payload, key, Redis gate
//   ─► execution (delivery/execution.ts): effect tx opens, advisory lock ─► registration
//      (delivery/registration.ts): lock run, trail `received`, status → running, attempts + 1
//   ─► back in the effect tx: ledger claim, trail `started`, handler(payload, run), ledger
//      `completed`, status → succeeded, trail `succeeded` ─commit─► result copied to Redis, message deleted.
//
// Failures: transient → ledger `failed_retryable`, run `retrying`, `retry_scheduled`, message back
// with exponential backoff; permanent or the fifth receive → ledger `failed_permanent`, run `failed`,
// `failed`, message to the dead-letter queue, `dead_lettered`. Shutdown past the drain window → run
// `queued`, `released_on_shutdown`, message visible again at once (delivery/settlement.ts). The effect
// transaction never holds the run row locked while the handler runs, so `progress()` commits in its
// own short transaction.
//
// A unit with `groupCommit` runs the effect transactions of the deliveries that reach execution
// together as one (delivery/group-commit.ts, delivery/group-execution.ts): one opening (locks, runs,
// claims: delivery/group-opening.ts) and one finish statement for the group, each handler in its own
// savepoint, and the usual member's registration written by the finish, in the same commit.
//
// The runner knows nothing of SQS: the consumer passes a DeliveryPort that deletes, delays or
// dead-letters the message.
import { checkDelivery } from '../execute/checks.ts';
import type { Delivery, DeliveryPort, DeliveryResult, RunnerDeps } from '../execute/context.ts';
import { deliver } from '../execute/executor.ts';

export { fitDetail, ReleasedOnShutdown } from '../execute/context.ts';
export type { DeadLetterContext, Delivery, DeliveryPort, DeliveryResult, RunnerDeps } from '../execute/context.ts';
export { StartCoalescer } from '../execute/start-coalescer.ts';
export { FinishCoalescer } from '../execute/finish-coalescer.ts';
export { GroupCommits } from '../execute/group-commit.ts';

/** Processes one delivery end to end. Never throws for a unit's failure; throws only if the database is unreachable. */
export async function runDelivery(deps: RunnerDeps, delivery: Delivery, port: DeliveryPort): Promise<DeliveryResult> {
  // A forming group commit waits for the deliveries still in their checks (delivery/group-commit.ts).
  const leaveChecks = deps.groups.enterChecks();
  let checked;
  try {
    checked = await checkDelivery(deps, delivery, port);
  } finally {
    leaveChecks();
  }
  if (checked.kind === 'settled') return checked.result;
  return deliver(checked.context, checked.early, checked.gate, checked.payload, checked.leaseMs);
}
