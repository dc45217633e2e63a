// The push side of a cancel: the operator's cancel (src/work/operate/cancel-run.ts) sends
// NOTIFY svc_run_cancelled with the run id in its own transaction, and each workers process holds ONE
// LISTEN connection that hands the notification to the watches of its running attempts
// (cancel-watch.ts), which check the run row before they abort anything: a notification is a hint,
// the database the authority (any role that can connect may NOTIFY).
//
// LISTEN/NOTIFY rather than Redis pub/sub, because:
// - a notification is delivered only if, and when, the cancel commits: never before the row a watch
//   re-reads is visible, never for a cancel that rolled back;
// - it needs no Redis, which the workers run without, and a cancel from the CLI or the console (no
//   Redis client of their own) pushes all the same;
// - a channel belongs to its database, so stacks sharing one Redis never cross, with no name to derive.
// Its cost is one connection per workers process outside the pool (postgres.js's listener
// connection), which postgres.js reconnects and listens on again, for as long as it takes. A
// notification sent while that connection is down is lost, so every (re)listen checks every watched
// run. Meanwhile, and without a listener at all (behind a transaction pooler, where LISTEN does not
// hold: `cancelListen: false`), each watch's heartbeat poll still sees the cancel within one interval.
import type { Logger } from 'pino';
import type { Sql, TxSql } from '../../../db/client.ts';
import { listenOn } from '../../../db/channel-listener.ts';

/** The channel of cancel notifications; the payload is the cancelled run's id. */
export const CANCEL_CHANNEL = 'svc_run_cancelled';

/** The process's listener: a watch subscribes its run; `check` is called when that run may be cancelled. */
export interface CancelNotices {
  subscribe(runId: string, check: () => void): () => void;
  stop(): Promise<void>;
}

export function listenForCancels(sql: Sql, log: Logger): CancelNotices {
  const watchers = new Map<string, Set<() => void>>();
  const checkAll = () => {
    for (const checks of watchers.values()) for (const check of checks) check();
  };
  const listener = listenOn(
    sql,
    CANCEL_CHANNEL,
    (runId) => watchers.get(runId)?.forEach((check) => check()),
    checkAll,
    (error) => log.warn({ err: error }, 'could not listen for cancels yet: a running run learns of its cancel at its heartbeat poll meanwhile'),
  );
  return {
    subscribe(runId, check) {
      let checks = watchers.get(runId);
      if (!checks) watchers.set(runId, (checks = new Set()));
      checks.add(check);
      return () => {
        checks.delete(check);
        if (checks.size === 0 && watchers.get(runId) === checks) watchers.delete(runId);
      };
    },
    async stop() {
      watchers.clear();
      await listener.stop();
    },
  };
}

/** Sends the cancel notification of a run in the cancel's transaction: delivered at its commit, never if it rolls back. */
export async function notifyCancelled(tx: TxSql, runId: string): Promise<void> {
  await tx`SELECT pg_notify(${CANCEL_CHANNEL}, ${runId})`;
}
