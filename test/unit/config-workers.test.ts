import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/parse.ts';
import { configProblems } from '../support/config-problems.ts';
import { checkPoolSize, workersConfig } from '../../src/config/workers.ts';

const base = { QUEUES: 'critical,default', SVC_SQS_QUEUE_URL_PREFIX: 'http://127.0.0.1:9324/000000000000/' };

const problems = (env: Record<string, string | undefined>) => configProblems(() => workersConfig(env));

describe('workers configuration', () => {
  it('R-CFG-01 QUEUES is required', () => {
    const p = problems({ SVC_SQS_QUEUE_URL_PREFIX: base.SVC_SQS_QUEUE_URL_PREFIX });
    expect(p).toEqual([expect.objectContaining({ variable: 'QUEUES', rule: expect.stringContaining('required') })]);
  });

  it('R-CFG-01 QUEUES takes the comma-separated queue names, only the four, no duplicates', () => {
    expect(workersConfig({ ...base, QUEUES: 'critical, default,bulk,maintenance' }).QUEUES).toEqual([
      'critical',
      'default',
      'bulk',
      'maintenance',
    ]);
    for (const bad of ['urgent', 'critical,critical', 'critical,', 'Critical', 'critical;default']) {
      expect(problems({ ...base, QUEUES: bad }).map((x) => x.variable)).toEqual(['QUEUES']);
    }
  });

  it('R-CFG-02 SVC_RELAY is a boolean defaulting to false', () => {
    expect(workersConfig(base).SVC_RELAY).toBe(false);
    expect(workersConfig({ ...base, SVC_RELAY: 'true' }).SVC_RELAY).toBe(true);
    expect(problems({ ...base, SVC_RELAY: 'maybe' })[0]!.variable).toBe('SVC_RELAY');
  });

  it('SVC_CANCEL_LISTEN is a boolean defaulting to true (cancels pushed to running handlers)', () => {
    expect(workersConfig(base).SVC_CANCEL_LISTEN).toBe(true);
    expect(workersConfig({ ...base, SVC_CANCEL_LISTEN: 'false' }).SVC_CANCEL_LISTEN).toBe(false);
    expect(problems({ ...base, SVC_CANCEL_LISTEN: 'off' })[0]!.variable).toBe('SVC_CANCEL_LISTEN');
  });

  it('SVC_TENANT_INFLIGHT_LONE_MAX (the lone room of a tenant nobody contends with) is a whole number, 0 allowed, unset by default (each queue\'s from its units)', () => {
    expect(workersConfig(base).SVC_TENANT_INFLIGHT_LONE_MAX).toBeUndefined();
    expect(workersConfig({ ...base, SVC_TENANT_INFLIGHT_LONE_MAX: '440' }).SVC_TENANT_INFLIGHT_LONE_MAX).toBe(440);
    expect(workersConfig({ ...base, SVC_TENANT_INFLIGHT_LONE_MAX: '0' }).SVC_TENANT_INFLIGHT_LONE_MAX).toBe(0);
    for (const bad of ['-1', '2.5', 'many']) expect(problems({ ...base, SVC_TENANT_INFLIGHT_LONE_MAX: bad }).map((x) => x.variable)).toEqual(['SVC_TENANT_INFLIGHT_LONE_MAX']);
  });

  it('SVC_TENANT_INFLIGHT_MAX is a whole number, 0 (fairness off) allowed, default 40; SVC_SQS_FAIR_GROUPS defaults to true; SVC_RELAY_CAPPED_POLL_MS defaults to 50', () => {
    expect(workersConfig(base).SVC_TENANT_INFLIGHT_MAX).toBe(40);
    expect(workersConfig({ ...base, SVC_TENANT_INFLIGHT_MAX: '0' }).SVC_TENANT_INFLIGHT_MAX).toBe(0);
    for (const bad of ['-1', '2.5', 'many']) expect(problems({ ...base, SVC_TENANT_INFLIGHT_MAX: bad }).map((x) => x.variable)).toEqual(['SVC_TENANT_INFLIGHT_MAX']);
    expect(workersConfig(base).SVC_SQS_FAIR_GROUPS).toBe(true);
    expect(workersConfig({ ...base, SVC_SQS_FAIR_GROUPS: 'false' }).SVC_SQS_FAIR_GROUPS).toBe(false);
    expect(workersConfig(base).SVC_RELAY_CAPPED_POLL_MS).toBe(50);
    expect(workersConfig({ ...base, SVC_RELAY_CAPPED_POLL_MS: '10' }).SVC_RELAY_CAPPED_POLL_MS).toBe(10);
    for (const bad of ['0', '-5', 'soon']) expect(problems({ ...base, SVC_RELAY_CAPPED_POLL_MS: bad }).map((x) => x.variable)).toEqual(['SVC_RELAY_CAPPED_POLL_MS']);
  });

  it('SVC_RECEIVE_LINGER_MS is a whole number of ms from 0 (receive at the first free slot) to 1000, default 10', () => {
    expect(workersConfig(base).SVC_RECEIVE_LINGER_MS).toBe(10);
    expect(workersConfig({ ...base, SVC_RECEIVE_LINGER_MS: '0' }).SVC_RECEIVE_LINGER_MS).toBe(0);
    expect(workersConfig({ ...base, SVC_RECEIVE_LINGER_MS: '1000' }).SVC_RECEIVE_LINGER_MS).toBe(1000);
    for (const bad of ['-1', '1001', '2.5', 'soon']) expect(problems({ ...base, SVC_RECEIVE_LINGER_MS: bad }).map((x) => x.variable)).toEqual(['SVC_RECEIVE_LINGER_MS']);
  });

  it('the rescuer: SVC_RESCUE_INTERVAL_MS 30000, SVC_RESCUE_MARGIN_MS 120000, SVC_RESCUE_MAX 5, SVC_RESCUE_QUEUE_STARTED_EMPTY false by default; bad values named', () => {
    const c = workersConfig(base);
    expect([c.SVC_RESCUE_INTERVAL_MS, c.SVC_RESCUE_MARGIN_MS, c.SVC_RESCUE_MAX, c.SVC_RESCUE_QUEUE_STARTED_EMPTY]).toEqual([30_000, 120_000, 5, false]);
    const set = workersConfig({ ...base, SVC_RESCUE_INTERVAL_MS: '200', SVC_RESCUE_MARGIN_MS: '500', SVC_RESCUE_MAX: '0', SVC_RESCUE_QUEUE_STARTED_EMPTY: 'true' });
    expect([set.SVC_RESCUE_INTERVAL_MS, set.SVC_RESCUE_MARGIN_MS, set.SVC_RESCUE_MAX, set.SVC_RESCUE_QUEUE_STARTED_EMPTY]).toEqual([200, 500, 0, true]);
    for (const bad of ['0', '-5', 'soon']) expect(problems({ ...base, SVC_RESCUE_INTERVAL_MS: bad }).map((x) => x.variable)).toEqual(['SVC_RESCUE_INTERVAL_MS']);
    for (const bad of ['-1', '2.5', '1001']) expect(problems({ ...base, SVC_RESCUE_MAX: bad }).map((x) => x.variable)).toEqual(['SVC_RESCUE_MAX']);
  });

  it('SVC_ACK_LINGER_MS is a whole number of ms from 0 (delete at once) to 1000, default 20', () => {
    expect(workersConfig(base).SVC_ACK_LINGER_MS).toBe(20);
    expect(workersConfig({ ...base, SVC_ACK_LINGER_MS: '0' }).SVC_ACK_LINGER_MS).toBe(0);
    expect(workersConfig({ ...base, SVC_ACK_LINGER_MS: '1000' }).SVC_ACK_LINGER_MS).toBe(1000);
    for (const bad of ['-1', '1001', '2.5', 'soon']) expect(problems({ ...base, SVC_ACK_LINGER_MS: bad }).map((x) => x.variable)).toEqual(['SVC_ACK_LINGER_MS']);
  });

  it('R-SCH-01 SVC_LOCAL_SCHEDULER=true is refused when NODE_ENV=production', () => {
    expect(workersConfig({ ...base, SVC_LOCAL_SCHEDULER: 'true' }).SVC_LOCAL_SCHEDULER).toBe(true);
    expect(workersConfig({ ...base, SVC_LOCAL_SCHEDULER: 'false', NODE_ENV: 'production' }).SVC_LOCAL_SCHEDULER).toBe(false);
    const p = problems({ ...base, SVC_LOCAL_SCHEDULER: 'true', NODE_ENV: 'production' });
    expect(p).toEqual([expect.objectContaining({ variable: 'SVC_LOCAL_SCHEDULER', rule: expect.stringContaining('NODE_ENV=production') })]);
  });

  it('R-CFG-03 queue location: region default, prefix required unless an endpoint gives it', () => {
    const c = workersConfig(base);
    expect(c.SVC_SQS_REGION).toBe('us-east-1');
    expect(c.SVC_SQS_QUEUE_URL_PREFIX).toBe(base.SVC_SQS_QUEUE_URL_PREFIX);
    expect(c.SVC_SQS_ENDPOINT).toBeUndefined();
    expect(problems({ QUEUES: 'bulk' })).toEqual([expect.objectContaining({ variable: 'SVC_SQS_QUEUE_URL_PREFIX' })]);
    const local = workersConfig({ QUEUES: 'bulk', SVC_SQS_ENDPOINT: 'http://127.0.0.1:9324/' });
    expect(local.SVC_SQS_QUEUE_URL_PREFIX).toBe('http://127.0.0.1:9324/000000000000/');
    expect(problems({ ...base, SVC_SQS_ENDPOINT: 'not a url' })[0]!.variable).toBe('SVC_SQS_ENDPOINT');
    expect(problems({ ...base, SVC_SQS_QUEUE_URL_PREFIX: 'ftp://x/' })[0]!.variable).toBe('SVC_SQS_QUEUE_URL_PREFIX');
    expect(problems({ ...base, SVC_SQS_QUEUE_URL_PREFIX: 'http://x/000000000000/q1' })[0]!.variable).toBe('SVC_SQS_QUEUE_URL_PREFIX');
  });

  it('R-CFG-04 SVC_SQS_LOCAL_CREDENTIALS is a boolean defaulting to false', () => {
    expect(workersConfig(base).SVC_SQS_LOCAL_CREDENTIALS).toBe(false);
    expect(workersConfig({ ...base, SVC_SQS_LOCAL_CREDENTIALS: 'true' }).SVC_SQS_LOCAL_CREDENTIALS).toBe(true);
  });

  it('R-CFG-05 SVC_SQS_WAIT_SECONDS accepts 1 to 20 and defaults to 20', () => {
    expect(workersConfig(base).SVC_SQS_WAIT_SECONDS).toBe(20);
    expect(workersConfig({ ...base, SVC_SQS_WAIT_SECONDS: '1' }).SVC_SQS_WAIT_SECONDS).toBe(1);
    for (const bad of ['0', '21', '2.5', 'ten']) {
      expect(problems({ ...base, SVC_SQS_WAIT_SECONDS: bad }).map((x) => x.variable)).toEqual(['SVC_SQS_WAIT_SECONDS']);
    }
  });

  it('R-CFG-06 the drain window (SVC_STOP_TIMEOUT_MS - 5 s) must exceed the wait, naming both variables', () => {
    const c = workersConfig(base);
    expect(c.SVC_STOP_TIMEOUT_MS).toBe(30_000);
    expect(c.drainMs).toBe(25_000);
    expect(workersConfig({ ...base, SVC_STOP_TIMEOUT_MS: '25001' }).drainMs).toBe(20_001);
    const p = problems({ ...base, SVC_STOP_TIMEOUT_MS: '25000' });
    expect(p).toHaveLength(1);
    expect(`${p[0]!.variable} ${p[0]!.rule}`).toContain('SVC_STOP_TIMEOUT_MS');
    expect(`${p[0]!.variable} ${p[0]!.rule}`).toContain('SVC_SQS_WAIT_SECONDS');
    // A short wait allows a short budget (tests use this).
    expect(workersConfig({ ...base, SVC_SQS_WAIT_SECONDS: '1', SVC_STOP_TIMEOUT_MS: '6001' }).drainMs).toBe(1001);
    expect(problems({ ...base, SVC_SQS_WAIT_SECONDS: '1', SVC_STOP_TIMEOUT_MS: '6000' })[0]!.rule).toContain('SVC_SQS_WAIT_SECONDS');
  });

  it('R-CFG-07 SVC_HEALTH_PORT defaults to 8081', () => {
    expect(workersConfig(base).SVC_HEALTH_PORT).toBe(8081);
    expect(workersConfig({ ...base, SVC_HEALTH_PORT: '9000' }).SVC_HEALTH_PORT).toBe(9000);
    expect(problems({ ...base, SVC_HEALTH_PORT: '70000' })[0]!.variable).toBe('SVC_HEALTH_PORT');
  });

  it('R-CFG-09 R-CFG-10 SVC_SCHEMA_VERSION and REDIS_URL have defaults and rules', () => {
    const c = workersConfig(base);
    expect(c.SVC_SCHEMA_VERSION).toBe('dist/schema-version.json');
    expect(c.REDIS_URL).toBe('redis://127.0.0.1:6379');
    expect(problems({ ...base, REDIS_URL: 'http://x' })[0]!.variable).toBe('REDIS_URL');
    expect(problems({ ...base, DATABASE_URL: 'mysql://x' })[0]!.variable).toBe('DATABASE_URL');
  });

  it('R-LIM-01 every runtime timing is configuration with the spec value as default', () => {
    const c = workersConfig(base);
    expect(c.visibilitySeconds).toEqual({ critical: 60, default: 120, bulk: 900, maintenance: 300 });
    expect(c.SVC_RELAY_SWEEP_INTERVAL_MS).toBe(5000);
    expect(c.SVC_HEARTBEAT_INTERVAL_MS).toBeLessThan(60_000);
    expect(c.SVC_BACKOFF_BASE_MS).toBeGreaterThan(0);
    expect(c.SVC_BACKOFF_CAP_MS).toBeGreaterThanOrEqual(c.SVC_BACKOFF_BASE_MS);
    const short = workersConfig({
      ...base,
      SVC_VISIBILITY_CRITICAL_S: '2',
      SVC_HEARTBEAT_INTERVAL_MS: '500',
      SVC_BACKOFF_BASE_MS: '10',
      SVC_BACKOFF_CAP_MS: '100',
      SVC_RELAY_SWEEP_INTERVAL_MS: '50',
      SVC_IDEMPOTENCY_LEASE_MARGIN_MS: '100',
    });
    expect(short.visibilitySeconds.critical).toBe(2);
    expect(short.SVC_RELAY_SWEEP_INTERVAL_MS).toBe(50);
    expect(problems({ ...base, SVC_BACKOFF_BASE_MS: '1000', SVC_BACKOFF_CAP_MS: '10' })[0]!.variable).toBe('SVC_BACKOFF_CAP_MS');
    expect(problems({ ...base, SVC_VISIBILITY_BULK_S: '0' })[0]!.variable).toBe('SVC_VISIBILITY_BULK_S');
  });

  it('SVC_STAGE_TIMEOUT_MS bounds each wait of a delivery: 15 s by default, under the shortest visibility; short in tests', () => {
    expect(workersConfig(base).SVC_STAGE_TIMEOUT_MS).toBe(15_000);
    expect(workersConfig(base).SVC_STAGE_TIMEOUT_MS).toBeLessThan(60_000);
    expect(workersConfig({ ...base, SVC_STAGE_TIMEOUT_MS: '500' }).SVC_STAGE_TIMEOUT_MS).toBe(500);
    expect(problems({ ...base, SVC_STAGE_TIMEOUT_MS: '0' })[0]!.variable).toBe('SVC_STAGE_TIMEOUT_MS');
  });

  it('R-WRK-11 DATABASE_POOL_SIZE defaults to and may not be below 2 x slots + 2', () => {
    expect(workersConfig(base).DATABASE_POOL_SIZE).toBeUndefined();
    expect(checkPoolSize(undefined, 3)).toBe(8);
    expect(checkPoolSize(8, 3)).toBe(8);
    expect(checkPoolSize(20, 3)).toBe(20);
    expect(() => checkPoolSize(7, 3)).toThrow(ConfigError);
    try {
      checkPoolSize(7, 3);
    } catch (error) {
      expect((error as ConfigError).problems[0]!.variable).toBe('DATABASE_POOL_SIZE');
      expect((error as ConfigError).message).toContain('at least 8');
    }
    expect(problems({ ...base, DATABASE_POOL_SIZE: 'many' })[0]!.variable).toBe('DATABASE_POOL_SIZE');
  });

  it('R-CFG-01 every bad variable is named in one message that never echoes a value', () => {
    const secret = 'postgres-password-s3cr3t';
    let error: ConfigError | undefined;
    try {
      workersConfig({
        QUEUES: secret,
        SVC_SQS_WAIT_SECONDS: secret,
        SVC_RELAY: secret,
        DATABASE_URL: `mysql://u:${secret}@h/db`,
        REDIS_URL: secret,
        SVC_SQS_ENDPOINT: secret,
      });
    } catch (e) {
      error = e as ConfigError;
    }
    expect(error?.code).toBe('CONFIG_INVALID');
    const names = error!.problems.map((p) => p.variable).sort();
    expect(names).toEqual(['DATABASE_URL', 'QUEUES', 'REDIS_URL', 'SVC_RELAY', 'SVC_SQS_ENDPOINT', 'SVC_SQS_WAIT_SECONDS']);
    expect(error!.message).not.toContain(secret);
    for (const name of names) expect(error!.message).toContain(name);
  });

  it('R-CFG-01 empty values count as unset', () => {
    expect(workersConfig({ ...base, SVC_SQS_WAIT_SECONDS: '', SVC_RELAY: '' }).SVC_SQS_WAIT_SECONDS).toBe(20);
  });

  it('R-CFG-01 a cross-variable rule is reported even when another variable also fails', () => {
    const p = configProblems(() => workersConfig({ QUEUES: 'bogus', SVC_LOCAL_SCHEDULER: 'true', NODE_ENV: 'production' }));
    expect(p.map((x) => x.variable).sort()).toEqual(['QUEUES', 'SVC_LOCAL_SCHEDULER', 'SVC_SQS_QUEUE_URL_PREFIX']);
    const drain = configProblems(() => workersConfig({ ...base, SVC_RELAY: 'maybe', SVC_STOP_TIMEOUT_MS: '6000', SVC_SQS_WAIT_SECONDS: '5' }));
    expect(drain.map((x) => x.variable).sort()).toEqual(['SVC_RELAY', 'SVC_STOP_TIMEOUT_MS']);
  });

  it('R-CFG-01 a malformed DATABASE_URL or REDIS_URL does not hide the cross-variable rules', () => {
    for (const bad of [{ DATABASE_URL: 'postgres://u:s3cret@[bad/x' }, { REDIS_URL: 'redis://:s3cret@[::1/0' }, { DATABASE_URL: 'mysql://x' }, { REDIS_URL: 'http://x' }]) {
      const p = configProblems(() => workersConfig({ QUEUES: 'default', ...bad, SVC_LOCAL_SCHEDULER: 'true', NODE_ENV: 'production' }));
      expect(p.map((x) => x.variable).sort(), JSON.stringify(bad)).toEqual([...Object.keys(bad), 'SVC_LOCAL_SCHEDULER', 'SVC_SQS_QUEUE_URL_PREFIX'].sort());
    }
  });

  it('R-CFG-01 a percent sign not followed by two hex digits in a URL is CONFIG_INVALID naming the variable, never the password', () => {
    for (const [variable, url] of [
      ['DATABASE_URL', 'postgres://svc:50%off-s3cret@db:5432/svc'],
      ['DATABASE_URL', 'postgres://svc:s3cret%@db:5432/svc'],
      ['DATABASE_URL', 'postgres://svc:s3cret@db:5432/sv%zz'],
      ['REDIS_URL', 'redis://:s3cret%g1@cache:6379/0'],
      // Hex digits, but not UTF-8: decoding it fails the same way.
      ['DATABASE_URL', 'postgres://svc:s3cret%c0@db:5432/svc'],
    ] as const) {
      let error: ConfigError | undefined;
      try {
        workersConfig({ ...base, [variable]: url });
      } catch (e) {
        error = e as ConfigError;
      }
      expect(error?.code, url).toBe('CONFIG_INVALID');
      expect(error!.problems.map((x) => x.variable)).toEqual([variable]);
      expect(error!.problems[0]!.rule).toMatch(/percent/);
      expect(error!.message).not.toContain('s3cret');
    }
    // Well-formed escapes pass.
    expect(workersConfig({ ...base, DATABASE_URL: 'postgres://svc:50%25off%40x@db:5432/svc' }).DATABASE_URL).toBe('postgres://svc:50%25off%40x@db:5432/svc');
  });

  it('R-CFG-01 numbers parse strictly: hex, exponent, padding and decimals are refused', () => {
    for (const value of ['0x10', '1e1', ' 5', '5 ', '5.0', '+5', '1_000', 'Infinity']) {
      const p = configProblems(() => workersConfig({ ...base, SVC_HEALTH_PORT: value, SVC_SQS_WAIT_SECONDS: value }));
      expect(p.map((x) => x.variable).sort(), JSON.stringify(value)).toEqual(['SVC_HEALTH_PORT', 'SVC_SQS_WAIT_SECONDS']);
    }
    expect(workersConfig({ ...base, SVC_HEALTH_PORT: '9000', SVC_SQS_WAIT_SECONDS: '5' }).SVC_HEALTH_PORT).toBe(9000);
  });
});
