// A delivery that meets a final run (the runner's `final` registration) is acknowledged without
// running. Two such cases concern operators:
// - a cancelled run (cancel-run.ts): its message is simply acknowledged, never dead-lettered;
// - a failed run whose message had been dead-lettered: the message came back, typically moved from
//   the dead-letter queue by SQS's own redrive (a console "start DLQ redrive"), which cannot reopen a
//   final run. It is made visible: a warning naming the tool that does redrive (`svc dlq redrive`),
//   and a note on the run's `received` trail event.
import type { RunRow } from '../store/run-store.ts';
import { wasCancelled } from './cancellation.ts';

export interface FinalDeliveryNote {
  /** The detail of the `received` event this delivery writes on the run's trail. */
  detail: Record<string, unknown>;
  /** A warning for the worker log, or null. */
  warning: string | null;
}

export const FINAL_RUN_REDRIVE_HINT =
  'a message of this dead-lettered run came back (moved from the dead-letter queue?); a final run never runs again, so it was acknowledged without running: run `svc dlq redrive --queue <queue> --by <you>` or `svc runs redrive <runId> --by <you>` to run it again';

export function finalDeliveryNote(run: Pick<RunRow, 'status' | 'outcome'>, deadLettered: boolean): FinalDeliveryNote {
  if (wasCancelled(run)) return { detail: { settled: run.status, cancelled: true }, warning: null };
  if (run.status === 'failed' && deadLettered) {
    return { detail: { settled: run.status, note: 'dead-lettered run: acknowledged without running; redrive with svc dlq redrive' }, warning: FINAL_RUN_REDRIVE_HINT };
  }
  return { detail: { settled: run.status }, warning: null };
}
