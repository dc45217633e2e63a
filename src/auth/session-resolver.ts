// The session-resolver port: the authentication step hands it a session token and gets a session, or
// null. Login is being rebuilt, so production wires `noSessionResolver` and every protected route is 401.

export interface Session {
  /** Tenant of the session, as a decimal string (bigint in the database). Never sent to clients. */
  tenantId: string;
  userId: string;
  membershipId: string;
  /** Permission codes the session holds, e.g. `access.task_runs.read`. */
  permissions: ReadonlySet<string>;
}

export interface SessionResolver {
  /** Turns a session token into a session, or null when it resolves to nothing. Never logs the token. */
  resolve(token: string): Promise<Session | null>;
}

/** Production wiring while login is rebuilt: no token resolves. */
export const noSessionResolver: SessionResolver = {
  async resolve() {
    return null;
  },
};
