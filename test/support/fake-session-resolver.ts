// Test wiring of the session-resolver port: a token → session table. Accepts the token from Bearer or
// cookie alike (the authentication step decides which was used) and counts lookups, so tests can
// prove a refusal happened before any lookup.
import type { Session, SessionResolver } from '../../src/auth/session-resolver.ts';

export interface FakeSession {
  tenantId: string;
  userId?: string;
  membershipId?: string;
  permissions?: string[];
}

export class FakeSessionResolver implements SessionResolver {
  readonly sessions = new Map<string, Session>();
  lookups = 0;

  add(token: string, session: FakeSession): this {
    this.sessions.set(token, {
      tenantId: session.tenantId,
      userId: session.userId ?? '1',
      membershipId: session.membershipId ?? '1',
      permissions: new Set(session.permissions ?? ['access.task_runs.read']),
    });
    return this;
  }

  async resolve(token: string): Promise<Session | null> {
    this.lookups += 1;
    return this.sessions.get(token) ?? null;
  }
}
