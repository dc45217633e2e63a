// The console's login sessions, held in this process's memory: one console process serves them, so a
// restart logs everyone out (and a rotated token, which needs a restart, ends every session with it).
// The cookie carries a random session id; the store keys sessions by the id's SHA-256, so a dump of
// the store holds nothing a browser could present. A session ends at its expiry or at logout, which
// deletes it here: an old cookie replayed afterwards matches nothing.
import { createHash, randomBytes } from 'node:crypto';

/** Default lifetime of a console session (8 hours). */
export const DEFAULT_SESSION_TTL_SECONDS = 8 * 3600;
/** Sessions kept at most; the oldest is dropped beyond it (only token holders create sessions). */
const MAX_SESSIONS = 10_000;

export interface ConsoleSession {
  /** Who logged in, as given on the login form (validated): recorded on every action. */
  readonly operator: string;
  /** Epoch milliseconds after which the session is refused. */
  readonly expiresAt: number;
}

export interface SessionStore {
  /** Seconds a new session lives (the cookie's Max-Age). */
  readonly ttlSeconds: number;
  /** A new session for `operator`: the id to put in the cookie. */
  create(operator: string): string;
  /** The live session of a cookie value, else null (unknown, revoked or expired). */
  find(id: string | undefined): ConsoleSession | null;
  /** Ends the session of a cookie value (logout); unknown ids are ignored. */
  revoke(id: string | undefined): void;
}

const keyOf = (id: string) => createHash('sha256').update(id, 'utf8').digest('hex');

export function sessionStore(options: { ttlSeconds?: number; now?: () => number } = {}): SessionStore {
  const ttlSeconds = options.ttlSeconds ?? DEFAULT_SESSION_TTL_SECONDS;
  const now = options.now ?? Date.now;
  const sessions = new Map<string, ConsoleSession>();
  const prune = () => {
    const t = now();
    for (const [key, s] of sessions) if (s.expiresAt <= t) sessions.delete(key);
    // Insertion order is creation order: the first keys are the oldest.
    while (sessions.size >= MAX_SESSIONS) {
      const oldest = sessions.keys().next().value!;
      sessions.delete(oldest);
    }
  };
  return {
    ttlSeconds,
    create(operator) {
      prune();
      const id = randomBytes(32).toString('hex');
      sessions.set(keyOf(id), { operator, expiresAt: now() + ttlSeconds * 1000 });
      return id;
    },
    find(id) {
      if (id === undefined || !/^[0-9a-f]{64}$/.test(id)) return null;
      const key = keyOf(id);
      const s = sessions.get(key);
      if (!s) return null;
      if (s.expiresAt <= now()) {
        sessions.delete(key);
        return null;
      }
      return s;
    },
    revoke(id) {
      if (id !== undefined) sessions.delete(keyOf(id));
    },
  };
}
