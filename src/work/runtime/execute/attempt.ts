// One attempt's lifetime, owned in one place: its signal (the handler's run.signal), aborted by the
// unit's deadline, an operator's cancel (cancel-watch.ts) or a release on shutdown, with the effect
// transaction's statement cancelled from another connection when a cancel or a release aborts it
// (cancel-statement.ts); and end(), which lets go of all of them once, so no timer, watch or listener
// outlives the attempt and nothing aborts it afterwards. Why it was aborted (UnitTimedOut,
// RunCancelled, ReleasedOnShutdown) is its signal's reason, which settlement weighs over the error the
// abort caused (a statement cancelled by our own deadline reports as a query error). Used by a
// delivery alone (execution.ts) and by each member of a group commit (group-execution.ts).
import type { Logger } from 'pino';
import { DEFAULT_HEARTBEAT_INTERVAL_MS } from '../../../config/limits.ts';
import { CodedError } from '../../../errors/coded-error.ts';
import { UnitTimedOut } from '../../define/unit-errors.ts';
import type { WorkUnit } from '../../define/unit.ts';
import type { RunKey } from '../store/run-store.ts';
import type { RunScope } from '../store/scope-tables.ts';
import { watchForCancel, type CancelWatch } from './cancel-watch.ts';
import type { EffectStatement } from './cancel-statement.ts';
import { ReleasedOnShutdown, type RunnerDeps } from './context.ts';

/**
 * start() after end(): the attempt's transaction was given up (its connection lost) while the code
 * that runs it went on. Nothing of it can commit, so none of it may run: no deadline, watch or
 * listener is armed that nobody would release, and no handler starts.
 */
export class AttemptEnded extends CodedError<'ATTEMPT_ENDED'> {
  constructor() {
    super('ATTEMPT_ENDED', 'the attempt ended before its execution started: its transaction was given up');
    this.name = 'AttemptEnded';
  }
}

export interface AttemptOptions {
  deps: Pick<RunnerDeps, 'sql' | 'cancelNotices' | 'cancelCheckIntervalMs'>;
  /** Where a failed cancel check is logged (the delivery's logger). */
  log: Pick<Logger, 'warn'>;
  /** The effect transaction the attempt runs in: its statement is cancelled on a cancel and on a release. */
  statement: EffectStatement;
  /**
   * Whether an operator's cancel cancels the statement too. Not for a member of a group with
   * neighbours: the backend is theirs as well, and the transaction's statement_timeout bounds it.
   */
  cancelsStatement: boolean;
  /**
   * Listened to from start() to end(): a release aborts the attempt and cancels its statement. None
   * for a group member: its group listens for all its members at once (group-execution.ts).
   */
  releaseSignal?: AbortSignal | undefined;
}

export interface AttemptStart {
  unit: Pick<WorkUnit, 'name' | 'timeoutSeconds'>;
  scope: RunScope;
  run: RunKey;
}

export interface AttemptLifetime {
  /** The handler's run.signal. */
  readonly signal: AbortSignal;
  /** Why the attempt was aborted (UnitTimedOut, RunCancelled, ReleasedOnShutdown), undefined while it was not: settlement's `reason`. */
  readonly abortReason: unknown;
  /**
   * The execution starts: the unit's deadline runs from now, the run is watched for a cancel and the
   * release, if any, listened to (already released: aborted at once). A second start() does nothing;
   * one after end() throws AttemptEnded.
   */
  start(at: AttemptStart): void;
  /** Aborts with `reason` (a group's release on shutdown); nothing once aborted or ended. */
  abort(reason: Error): void;
  /** The execution's turn is over (a group member's): the deadline and the cancel watch stop; abort() still applies until end(). */
  stop(): void;
  /** Lets go of the deadline, the cancel watch, the release listener and the statement, once; a second end() does nothing, nor does any abort after it. */
  end(): void;
}

/** An attempt not started yet: its signal exists (and may be aborted) before its execution starts. */
export function openAttempt(o: AttemptOptions): AttemptLifetime {
  const controller = new AbortController();
  let started = false;
  let ended = false;
  let timer: NodeJS.Timeout | undefined;
  let watch: CancelWatch | undefined;
  let listening: AbortSignal | undefined;
  const abort = (reason: Error) => {
    if (!ended) controller.abort(reason);
  };
  const onRelease = () => {
    abort(new ReleasedOnShutdown());
    o.statement.cancel('a released run');
  };
  const stop = () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    watch?.stop();
    watch = undefined;
  };
  return {
    signal: controller.signal,
    get abortReason() {
      return controller.signal.aborted ? controller.signal.reason : undefined;
    },
    start({ unit, scope, run }) {
      if (ended) throw new AttemptEnded();
      if (started) return;
      started = true;
      timer = setTimeout(() => abort(new UnitTimedOut(unit.name, unit.timeoutSeconds)), unit.timeoutSeconds * 1000);
      watch = watchForCancel({
        sql: o.deps.sql,
        scope,
        run,
        intervalMs: o.deps.cancelCheckIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS,
        notices: o.deps.cancelNotices,
        // As a release: abort the handler and cancel its statement; settlement then finds the run failed and acks.
        onCancel: (reason) => {
          abort(reason);
          if (o.cancelsStatement) o.statement.cancel('a cancelled run');
        },
        onError: (error) => o.log.warn({ err: error }, 'could not check whether the run was cancelled'),
      });
      if (o.releaseSignal?.aborted) {
        onRelease();
      } else if (o.releaseSignal) {
        listening = o.releaseSignal;
        listening.addEventListener('abort', onRelease, { once: true });
      }
    },
    abort,
    stop,
    end() {
      if (ended) return;
      ended = true;
      stop();
      listening?.removeEventListener('abort', onRelease);
      listening = undefined;
      o.statement.close();
    },
  };
}
