// LISTEN on a channel for as long as a process wants it, through postgres.js's one listener connection
// (reconnected and listened on again by postgres.js, `onListen` called each time: notices sent while it
// was down are lost, so a caller looks again then). A LISTEN still unanswered when the caller stops (the
// database away) is unlistened once answered, so a stopped process keeps no connection open.
import type { Sql } from './client.ts';

export interface ChannelListener {
  stop(): Promise<void>;
}

export function listenOn(
  sql: Sql,
  channel: string,
  onNotice: (payload: string) => void,
  onListen: () => void,
  /** A first LISTEN that failed (postgres.js retries it as its connection comes back). */
  onError: (error: unknown) => void,
): ChannelListener {
  let stopped = false;
  let unlisten: (() => Promise<void>) | null = null;
  sql.listen(channel, onNotice, onListen).then(
    async (l) => {
      if (stopped) await l.unlisten();
      else unlisten = l.unlisten;
    },
    (error: unknown) => {
      if (!stopped) onError(error);
    },
  );
  return {
    async stop() {
      stopped = true;
      await unlisten?.().catch(() => {});
    },
  };
}
