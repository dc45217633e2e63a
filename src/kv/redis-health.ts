// Whether Redis answers, as the workers see it. A Redis that is down fails commands at once, but a
// hung one (a frozen process, a network black hole) keeps the connection open and answers nothing:
// every command then costs the full command timeout. A probe (PING, bounded by that timeout) notices
// either within one interval, and while it fails the workers skip Redis altogether (gate: the ledger
// decides; cache: the database; wake: the sweep) instead of paying the timeout on every call.
import { once } from 'node:events';
import type { Logger } from 'pino';
import type { Redis } from 'ioredis';

export interface RedisHealth {
  /** False while the last probe failed (or the client is not connected). */
  readonly up: boolean;
  stop(): void;
}

export interface RedisHealthOptions {
  /** Pause between probes, ms. Default 1000. */
  intervalMs?: number;
  /** Bound of one probe, ms (the client's commandTimeout bounds it too). Default 500. */
  timeoutMs?: number;
  /** Probes in a row that must go unanswered before a hung Redis counts as down. Default 2. */
  unansweredToDown?: number;
  logger: Logger;
}

export function watchRedis(redis: Redis, o: RedisHealthOptions): RedisHealth {
  const intervalMs = o.intervalMs ?? 1_000;
  const timeoutMs = o.timeoutMs ?? 500;
  // One slow PING on a starved machine (a GC pause, both cores busy) is not an outage: entering the mode
  // on it would flap the mode and its log lines. A closed connection still counts at once.
  const unansweredToDown = Math.max(1, o.unansweredToDown ?? 2);
  let unanswered = 0;
  // Assumed up until a probe says otherwise: a client still connecting fails its commands fast meanwhile.
  let up = true;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const set = (next: boolean, reason?: string) => {
    if (next === up) return;
    up = next;
    // Once on entering and once on leaving the mode, never per failed command.
    if (up) o.logger.warn('redis answers again: gate, cache and wake signal back in use');
    else o.logger.warn({ reason }, 'running without redis: the ledger gates, the database answers, the relay sweeps');
  };
  const probe = async () => {
    if (redis.status === 'end') return set(false, 'connection ended');
    let bound: NodeJS.Timeout | undefined;
    const waiting = new AbortController();
    try {
      // A client still connecting (at boot, or reconnecting) gets the same bound to become ready.
      const ready = redis.status === 'ready' ? Promise.resolve() : once(redis, 'ready', { signal: waiting.signal }).then(() => undefined);
      await Promise.race([
        ready.then(() => redis.ping()),
        new Promise((_, reject) => {
          bound = setTimeout(() => reject(new Error(`no reply within ${timeoutMs} ms`)), timeoutMs).unref();
        }),
      ]);
      unanswered = 0;
      set(true);
    } catch (error) {
      unanswered += 1;
      if (unanswered >= unansweredToDown) set(false, (error as Error).message);
    } finally {
      clearTimeout(bound);
      waiting.abort();
    }
  };
  const loop = async () => {
    if (stopped) return;
    await probe();
    // unref: the probe never keeps a process alive (a failed boot must still exit).
    if (!stopped) timer = setTimeout(() => void loop(), intervalMs).unref();
  };
  // Events make a down connection count at once; a hung one is found by the probe.
  const onClose = () => set(false, 'connection closed');
  redis.on('close', onClose);
  void loop();
  return {
    get up() {
      return up;
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
      redis.off('close', onClose);
    },
  };
}
