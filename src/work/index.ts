// The public authoring API of background work: what a unit file, a use case and a unit's test import.
// Everything under runtime/ is internal (the workers, the relay and the scheduler run it) and operate/
// is the operators' side (CLI and console); a unit imports from here, never from those.
//
//   units/<domain>/<name>.task.ts     export default defineTask({ name, queue, context, payload, handler })
//   a use case, in its transaction    await dispatchTask(tx, sendInvoice, { invoiceId }, { actor })
//   the unit's test                   await testUnit(sendInvoice, { invoiceId }, { sql, tenant })  (src/work/testing.ts)
export {
  defineSubscriber,
  defineTask,
  type DispatchedRun,
  type FollowUpOptions,
  type Overlap,
  type RateLimit,
  type RateLimitScope,
  type RetryPolicy,
  type RunState,
  type SubscriberOptions,
  type SubscriberUnit,
  type TaskOptions,
  type TaskUnit,
  type UnitContext,
  type UnitHandler,
  type UnitOutcome,
  type UnitQueue,
  type UniqueDispatchOptions,
  type UnitRun,
  type WorkUnit,
} from './define/unit.ts';
export { ForbiddenFailure, NotFoundFailure, PermanentFailure, RateLimitInvalid, TransientFailure, ValidationFailure, type FailureInit, type UnitFailure } from './define/unit-errors.ts';
export { DispatchError, dispatchMany, dispatchTask, MAX_BULK_RUNS, type DispatchErrorCode, type DispatchOptions, type UnitDispatchOptions } from './runtime/produce/dispatch.ts';
// What a use case needs around a dispatch: its pool, the unit of work it dispatches in, the actor, and
// the relay's wake signal after commit (Redis optional: without it the relay's sweep finds the rows).
export type { Sql } from '../db/client.ts';
export { inUnitOfWork, type Actor } from '../db/unit-of-work.ts';
export type { Redis } from '../kv/client.ts';
export { afterCommit } from '../kv/wake.ts';
