// The test services' back ends: the default starts embedded PostgreSQL 18, a private redis-server and
// the in-memory SQS server as local processes; `SVC_TEST_BACKEND=containers` starts the same images
// compose uses through testcontainers, for contributors with a Docker engine.
export interface StartedBackend {
  /** URL of the `postgres` (admin) database. */
  pgAdminUrl: string;
  pgPort: number;
  redisUrl: string;
  sqsEndpoint: string;
  stop(): Promise<void>;
}

export interface Backend {
  name: 'embedded' | 'containers';
  start(baseDir: string): Promise<StartedBackend>;
}

export function selectBackendName(env: Record<string, string | undefined>): 'embedded' | 'containers' {
  const value = env.SVC_TEST_BACKEND ?? 'embedded';
  if (value !== 'embedded' && value !== 'containers') {
    throw new Error(`SVC_TEST_BACKEND must be embedded or containers (got an unknown value)`);
  }
  return value;
}

/**
 * Password of the test cluster's `postgres` role, in every URL the tests hand out. Distinctive (no word
 * a log line would carry by chance), so "the password is never logged" is a real check.
 */
export const TEST_DB_PASSWORD = 'pw-7f3c9e1d5b2a';
