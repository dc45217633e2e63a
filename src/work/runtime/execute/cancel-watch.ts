// The worker's side of a cancel: while a handler runs, its run row is read when the process's
// listener hears that the run was cancelled (cancel-notices.ts, pushed at the cancel's commit), and
// every heartbeat interval as the fallback (no listener, a lost notification); once an operator has
// cancelled the run (cancel-run.ts), `onCancel` aborts the attempt. One indexed primary-key read per
// running run per interval (20 s by default) costs nothing measurable.
import type { Sql } from '../../../db/client.ts';
import type { RunKey } from '../store/run-store.ts';
import type { RunScope } from '../store/scope-tables.ts';
import { isRunCancelled, RunCancelled } from '../complete/cancellation.ts';
import type { CancelNotices } from './cancel-notices.ts';

export interface CancelWatch {
  stop(): void;
}

export function watchForCancel(options: {
  sql: Sql;
  scope: RunScope;
  run: RunKey;
  /** The heartbeat interval, ms: without a notification, a cancel is seen within one. */
  intervalMs: number;
  /** The process's listener for pushed cancels; none: the poll alone. */
  notices?: CancelNotices | undefined;
  onCancel: (reason: RunCancelled) => void;
  onError?: (error: unknown) => void;
}): CancelWatch {
  let stopped = false;
  let checking = false;
  // A notification that lands while a read is in flight: that read may predate the cancel's commit, so one more follows.
  let again = false;
  const stop = () => {
    stopped = true;
    clearInterval(timer);
    unsubscribe?.();
  };
  const check = () => {
    if (stopped) return;
    if (checking) {
      again = true;
      return;
    }
    checking = true;
    again = false;
    isRunCancelled(options.sql, options.scope, options.run)
      .then((cancelled) => {
        if (cancelled && !stopped) {
          stop();
          options.onCancel(new RunCancelled(options.run.runId));
        }
      })
      .catch((error: unknown) => options.onError?.(error))
      .finally(() => {
        checking = false;
        if (again) check();
      });
  };
  const timer = setInterval(check, options.intervalMs);
  timer.unref();
  const unsubscribe = options.notices?.subscribe(options.run.runId, check);
  return { stop };
}
