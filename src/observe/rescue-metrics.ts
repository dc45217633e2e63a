// The rescuer's metrics: what it sent again or gave up on, and what it found overdue in its last pass.
import { QUEUE_NAMES } from '../queue/names.ts';
import { runsOverdue, runsOverdueOldest, runsRescued } from './metrics.ts';

/** The states of an overdue run, as the gauge's `state` label. */
export const OVERDUE_STATES = ['sent', 'running', 'retrying'] as const;
export type OverdueState = (typeof OVERDUE_STATES)[number];

export function recordRescued(queue: string, reason: string, n = 1): void {
  if (n > 0) runsRescued.inc({ queue, reason }, n);
}

/** Sets the gauges from one pass's findings: every queue and state is written, so a cleared backlog reads 0. */
export function recordOverdue(found: ReadonlyArray<{ queue: string; state: OverdueState; waitedSeconds: number }>): void {
  const counts = new Map<string, number>();
  let oldest = 0;
  for (const f of found) {
    const key = `${f.queue}\u0000${f.state}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
    oldest = Math.max(oldest, f.waitedSeconds);
  }
  for (const queue of QUEUE_NAMES) {
    for (const state of OVERDUE_STATES) runsOverdue.set({ queue, state }, counts.get(`${queue}\u0000${state}`) ?? 0);
  }
  runsOverdueOldest.set(oldest);
}
