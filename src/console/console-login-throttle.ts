// Throttling of failed console logins per client address: after `maxFailures` wrong tokens within
// `windowSeconds`, that address is refused (429 with Retry-After) until its oldest failure leaves the
// window, whatever it presents, so a guesser learns nothing more while throttled. Refused attempts do
// not count as failures (the wait ends on its own); a successful login clears the address's record.
// In memory, for the one console process.

/** Default failed logins an address may make within the window. */
export const DEFAULT_LOGIN_MAX_FAILURES = 5;
/** Default length of the failure window (seconds). */
export const DEFAULT_LOGIN_WINDOW_SECONDS = 60;
/** Addresses tracked at most; the oldest record is dropped beyond it. */
const MAX_TRACKED = 10_000;

export interface LoginThrottle {
  /** Seconds the address must wait, or 0 when it may try now. */
  retryAfter(client: string): number;
  /** Records a failure; returns the failures of the address within the window, this one included. */
  failed(client: string): number;
  /** Clears the address's failures (a successful login). */
  succeeded(client: string): void;
}

export function loginThrottle(options: { maxFailures?: number; windowSeconds?: number; now?: () => number } = {}): LoginThrottle {
  const max = options.maxFailures ?? DEFAULT_LOGIN_MAX_FAILURES;
  const windowMs = (options.windowSeconds ?? DEFAULT_LOGIN_WINDOW_SECONDS) * 1000;
  const now = options.now ?? Date.now;
  const failures = new Map<string, number[]>();
  const recent = (client: string): number[] => {
    const since = now() - windowMs;
    const kept = (failures.get(client) ?? []).filter((t) => t > since);
    if (kept.length === 0) failures.delete(client);
    else failures.set(client, kept);
    return kept;
  };
  return {
    retryAfter(client) {
      const kept = recent(client);
      if (kept.length < max) return 0;
      return Math.max(1, Math.ceil((kept[kept.length - max]! + windowMs - now()) / 1000));
    },
    failed(client) {
      const kept = recent(client);
      kept.push(now());
      failures.delete(client);
      failures.set(client, kept);
      while (failures.size > MAX_TRACKED) failures.delete(failures.keys().next().value!);
      return kept.length;
    },
    succeeded(client) {
      failures.delete(client);
    },
  };
}
