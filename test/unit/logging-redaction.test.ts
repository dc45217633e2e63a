import { describe, expect, it } from 'vitest';
import { captureLogger, createLogger, loggerOptions, REDACTED } from '../../src/logging/logger.ts';
import { withoutUrlCredentials } from '../../src/logging/url-credentials.ts';

describe('logger', () => {
  it('R-AUTH-15 redacts credential headers, password and token fields at any usual depth', () => {
    const { logger, text } = captureLogger();
    logger.info(
      {
        req: { method: 'GET', url: '/task-runs/x', headers: { authorization: 'Bearer tok-1', cookie: '__Host-svc_session=tok-2', 'set-cookie': 'tok-3' } },
        res: { headers: { 'set-cookie': '__Host-svc_session=tok-4' } },
        password: 'pw-5',
        user: { password: 'pw-6', token: 'tok-7' },
        deep: { nested: { sessionToken: 'tok-8' } },
        headers: { authorization: 'Basic tok-9' },
      },
      'request',
    );
    const out = text();
    for (const secret of ['tok-1', 'tok-2', 'tok-3', 'tok-4', 'pw-5', 'pw-6', 'tok-7', 'tok-8', 'tok-9']) expect(out).not.toContain(secret);
    expect(out).toContain(REDACTED);
    // What is not a credential stays readable.
    expect(JSON.parse(out).req.url).toBe('/task-runs/x');
  });

  it('R-AUTH-15 keeps connection URLs readable but hides their passwords', () => {
    const { logger, lines } = captureLogger();
    logger.info({ DATABASE_URL: 'postgres://svc:db-pass@db:5432/svc', config: { REDIS_URL: 'redis://:redis-pass@cache:6379/0' } });
    const line = JSON.parse(lines[0]!);
    expect(line.DATABASE_URL).toBe(`postgres://svc:${REDACTED}@db:5432/svc`);
    expect(line.config.REDIS_URL).toBe(`redis://${REDACTED}@cache:6379/0`);
    expect(lines[0]).not.toMatch(/db-pass|redis-pass/);
  });

  it('R-AUTH-15 the CLI error line hides a password quoted anywhere in a free-text message', () => {
    const text = withoutUrlCredentials(
      'connect to postgres://app:s3cret@db:5432/x failed; redis://:p%40ss@cache:6379/0 too; see https://example.com/a@b',
    );
    expect(text).not.toContain('s3cret');
    expect(text).not.toContain('p%40ss');
    expect(text).toContain('postgres://app:[REDACTED]@db:5432/x');
    expect(text).toContain('redis://:[REDACTED]@cache:6379/0');
    expect(text).toContain('https://example.com/a@b');
  });

  it('level comes from the setting (LOG_LEVEL)', () => {
    expect(loggerOptions({ level: 'warn' }).level).toBe('warn');
    const { logger, lines } = captureLogger('warn');
    logger.info('hidden');
    logger.warn('shown');
    expect(lines).toHaveLength(1);
    expect(createLogger({ level: 'error', pretty: false }).level).toBe('error');
  });
});
