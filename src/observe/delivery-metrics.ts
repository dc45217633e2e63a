// The adapter from delivery lifecycle events to metrics: the consumer reports each delivery's
// DeliveryResult, the runner reports a run's first start and its final status. Units are labelled
// only when registered in this process ('unregistered' otherwise), so a stray message cannot add
// series.
import type { DeliveryResult } from '../work/runtime/execute/context.ts';
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

/** The run's attempt started (its row is `running`); the first attempt records queued → started. */
export function recordRunStarted(run: ObservedRun, attempt: number): void {
  if (attempt !== 1 || !run.startedAt) return;
  runPickup.observe({ unit: run.name, queue: run.queue }, Math.max(0, (run.startedAt.getTime() - run.queuedAt.getTime()) / 1000));
}

/**
 * The run reached a final status. Its duration runs from the first start (database clock) to now
 * (this process' clock): settlement does not read the finish instant back.
 */
export function recordRunFinished(run: ObservedRun, status: 'succeeded' | 'failed'): void {
  runsFinished.inc({ unit: run.name, queue: run.queue, status });
  if (run.startedAt) runDuration.observe({ unit: run.name, queue: run.queue }, Math.max(0, (Date.now() - run.startedAt.getTime()) / 1000));
}

/** One group commit started with `runs` deliveries of `unit` (a registered unit: only those group). */
export function recordGroupCommit(unit: string, runs: number): void {
  groupCommitRuns.observe({ unit }, runs);
}

/** A wait of a delivery outlived its stage deadline (svc_delivery_stage_timeouts_total). */
export function recordStageTimeout(stage: string): void {
  deliveryStageTimeouts.inc({ stage });
}
