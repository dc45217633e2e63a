// The worker's side of a cancel: while a handler runs, every heartbeat interval the run row is read;
// once an operator has cancelled the run (cancel-run.ts), `onCancel` aborts the attempt. One indexed
// primary-key read per running run per interval (20 s by default) costs nothing measurable.
import type { Sql } from '../../../db/client.ts';
import type { RunKey, RunScope } from '../store/run-store.ts';
import { isRunCancelled, RunCancelled } from '../complete/cancellation.ts';

export interface CancelWatch {
  stop(): void;
}

export function watchForCancel(options: {
  sql: Sql;
  scope: RunScope;
  run: RunKey;
  /** The heartbeat interval, ms: a cancel is seen within one. */
  intervalMs: number;
  onCancel: (reason: RunCancelled) => void;
  onError?: (error: unknown) => void;
}): CancelWatch {
  let stopped = false;
  let checking = false;
  const timer = setInterval(() => {
    if (stopped || checking) return;
    checking = true;
    isRunCancelled(options.sql, options.scope, options.run)
      .then((cancelled) => {
        if (cancelled && !stopped) {
          stopped = true;
          clearInterval(timer);
          options.onCancel(new RunCancelled(options.run.runId));
        }
      })
      .catch((error: unknown) => options.onError?.(error))
      .finally(() => {
        checking = false;
      });
  }, options.intervalMs);
  timer.unref();
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}
