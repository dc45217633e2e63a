// The adapter from delivery lifecycle events to metrics: the consumer reports each delivery's
// DeliveryResult, the runner reports a run's first start and its final status. Units are labelled
// only when registered in this process ('unregistered' otherwise), so a stray message or a run of a
// unit this build lacks cannot add series.
import { wasCancelled } from '../work/runtime/complete/cancellation.ts';
import type { DeliveryResult } from '../work/runtime/execute/context.ts';
import type { RunRow } from '../work/runtime/store/run-store.ts';
import { deliveries, deliveryStageTimeouts, groupCommitRuns, runDuration, runPickup, runsFinished } from './metrics.ts';

/** The run facts the metrics need (RunRow has them). */
export interface ObservedRun {
  name: string;
  queue: string;
  queuedAt: Date;
  startedAt: Date | null;
}

/** Counts one delivery by its result (svc_deliveries_total). */
export function recordDelivery(queue: string, unit: string | undefined, registered: ReadonlySet<string> | ReadonlyMap<string, unknown>, result: DeliveryResult): void {
  deliveries.inc({ unit: unit !== undefined && registered.has(unit) ? unit : 'unregistered', queue, result });
}

/** Unit names this process registers (the worker runtime's units); every other name is labelled 'unregistered'. */
let registeredUnits: ReadonlySet<string> = new Set();

/** Declares the units this process registers (the worker runtime does, at its start). */
export function observeRegisteredUnits(names: Iterable<string>): void {
  registeredUnits = new Set([...registeredUnits, ...names]);
}

function unitLabel(name: string): string {
  return registeredUnits.has(name) ? name : 'unregistered';
}

/** The run's attempt started (its row is `running`); the first attempt records queued → started. */
export function recordRunStarted(run: ObservedRun, attempt: number): void {
  if (attempt !== 1 || !run.startedAt) return;
  runPickup.observe({ unit: unitLabel(run.name), queue: run.queue }, Math.max(0, (run.startedAt.getTime() - run.queuedAt.getTime()) / 1000));
}

/**
 * The run reached a final status. Its duration runs from the first start (database clock) to now
 * (this process' clock): settlement does not read the finish instant back.
 */
export function recordRunFinished(run: ObservedRun, status: 'succeeded' | 'failed'): void {
  const labels = { unit: unitLabel(run.name), queue: run.queue };
  runsFinished.inc({ ...labels, status });
  if (run.startedAt) runDuration.observe(labels, Math.max(0, (Date.now() - run.startedAt.getTime()) / 1000));
}

/**
 * A delivery met its run final, settled by someone else (an operator's cancel, another delivery). An
 * operator's cancel (run `failed` with CANCELLED, src/work/operate/cancel-run.ts) is counted here as
 * status `cancelled`: the cancelling process (a CLI) exports no metrics, so the worker that meets the
 * cancelled run counts it: the one whose handler it aborted, or the one its queued message reaches.
 * No duration: the run did not finish by running.
 */
export function recordRunMetFinal(run: ObservedRun & Pick<RunRow, 'status' | 'outcome'>): void {
  if (wasCancelled(run)) runsFinished.inc({ unit: unitLabel(run.name), queue: run.queue, status: 'cancelled' });
}

/** One group commit started with `runs` deliveries of `unit` (a registered unit: only those group). */
export function recordGroupCommit(unit: string, runs: number): void {
  groupCommitRuns.observe({ unit }, runs);
}

/** A wait of a delivery outlived its stage deadline (svc_delivery_stage_timeouts_total). */
export function recordStageTimeout(stage: string): void {
  deliveryStageTimeouts.inc({ stage });
}
