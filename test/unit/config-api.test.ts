import { describe, expect, it } from 'vitest';
import { apiConfig, cookieDomainProblem, isExactOrigin } from '../../src/config/api.ts';
import { configProblems } from '../support/config-problems.ts';

const problems = (env: Record<string, string | undefined>) => configProblems(() => apiConfig(env));

describe('api configuration', () => {
  it('R-EXE-02 R-CFG-08 R-CFG-09 R-CFG-10 defaults: port 3000, catalog and schema version in dist/, Redis on loopback', () => {
    const c = apiConfig({});
    expect(c.SVC_API_PORT).toBe(3000);
    expect(c.SVC_TASKS_CATALOG).toBe('dist/tasks.json');
    expect(c.SVC_SCHEMA_VERSION).toBe('dist/schema-version.json');
    expect(c.REDIS_URL).toBe('redis://127.0.0.1:6379');
    expect(c.DATABASE_URL).toBeUndefined();
    expect(c.CORS_ORIGINS).toEqual([]);
    expect(c.CORS_CREDENTIALS).toBe(false);
    expect(c.SESSION_COOKIE_DOMAIN).toBeUndefined();
    expect(c.LOG_LEVEL).toBe('info');
    expect(c.NODE_ENV).toBe('development');
  });

  it('R-AUTH-23 CORS_ORIGINS takes a comma-separated list of exact origins', () => {
    const c = apiConfig({ CORS_ORIGINS: 'https://app.example.com, http://localhost:5173,https://app.example.com' });
    expect(c.CORS_ORIGINS).toEqual(['https://app.example.com', 'http://localhost:5173']);
  });

  it('R-AUTH-25 refuses * and every non-exact origin', () => {
    const bad = [
      '*',
      'https://*.example.com',
      'https://app.example.com/',
      'https://app.example.com/path',
      'app.example.com',
      'https://App.Example.com',
      'https://app.example.com:443',
      'ftp://app.example.com',
      'https://user:pw@app.example.com',
      'null',
      'https://app.example.com?x=1',
      'https://app.example.com, *',
    ];
    const sentinel = problems({ CORS_ORIGINS: 'QZX-SENTINEL' });
    expect(sentinel[0]!.rule).not.toContain('QZX');
    for (const value of bad) {
      const p = problems({ CORS_ORIGINS: value });
      expect(p.map((x) => x.variable), value).toEqual(['CORS_ORIGINS']);
      // No echo, short values ('*', 'null') included: the rule text is the same whatever the value.
      expect(p[0]!.rule, value).toBe(sentinel[0]!.rule);
      expect(p[0]!.rule).not.toContain(value.trim());
    }
    expect(isExactOrigin('https://app.example.com:8443')).toBe(true);
    expect(isExactOrigin('http://127.0.0.1:3000')).toBe(true);
  });

  it('R-AUTH-24 refuses CORS_CREDENTIALS=true with an empty CORS_ORIGINS', () => {
    const p = problems({ CORS_CREDENTIALS: 'true' });
    expect(p).toEqual([expect.objectContaining({ variable: 'CORS_CREDENTIALS', rule: expect.stringContaining('CORS_ORIGINS') })]);
    expect(apiConfig({ CORS_CREDENTIALS: 'true', CORS_ORIGINS: 'https://app.example.com' }).CORS_CREDENTIALS).toBe(true);
    expect(problems({ CORS_CREDENTIALS: 'true', CORS_ORIGINS: ' , ' })[0]!.variable).toBe('CORS_CREDENTIALS');
  });

  it('R-AUTH-19 SESSION_COOKIE_DOMAIN must be a plain lowercase host of two or more labels, not a public suffix', () => {
    for (const ok of ['example.com', 'api.example.com', 'api.example.co.uk', 'foo.github.io', 'a-b.example.org']) {
      expect(cookieDomainProblem(ok), ok).toBeUndefined();
      expect(apiConfig({ SESSION_COOKIE_DOMAIN: ok }).SESSION_COOKIE_DOMAIN).toBe(ok);
    }
    const bad = [
      'localhost',
      'com',
      'co.uk',
      'github.io', // private section of the public-suffix list
      'compute.amazonaws.com',
      'Example.com',
      '.example.com',
      'example.com.',
      'example.com:8080',
      'https://example.com',
      '10.0.0.1',
      'exa mple.com',
      '-bad.example.com',
      'a..example.com',
      '*.example.com',
    ];
    // No echo, short values included: every refusal carries the same rule text as a sentinel value that
    // cannot appear in it by chance, so the text does not depend on the value at all.
    const sentinel = problems({ SESSION_COOKIE_DOMAIN: 'QZX.SENTINEL' });
    expect(sentinel[0]!.rule).not.toContain('QZX');
    for (const value of bad) {
      expect(cookieDomainProblem(value), value).toBeDefined();
      const p = problems({ SESSION_COOKIE_DOMAIN: value });
      expect(p.map((x) => x.variable), value).toEqual(['SESSION_COOKIE_DOMAIN']);
      expect(p[0]!.rule, value).toBe(sentinel[0]!.rule);
      expect(p[0]!.rule, value).not.toContain(value);
    }
  });

  it('R-CFG-10 rules of ports, URLs and levels name each bad variable once', () => {
    const p = problems({ SVC_API_PORT: '0', REDIS_URL: 'localhost:6379', LOG_LEVEL: 'loud', NODE_ENV: 'prod', DATABASE_URL: 'x' });
    expect(p.map((x) => x.variable).sort()).toEqual(['DATABASE_URL', 'LOG_LEVEL', 'NODE_ENV', 'REDIS_URL', 'SVC_API_PORT']);
  });

  it('R-CFG-10 a URL with the right scheme that does not parse is refused at start, without its value', () => {
    const p = problems({ DATABASE_URL: 'postgres://u:s3cret@[bad/x', REDIS_URL: 'redis://:s3cret@[::1/0' });
    expect(p.map((x) => x.variable).sort()).toEqual(['DATABASE_URL', 'REDIS_URL']);
    expect(JSON.stringify(p)).not.toContain('s3cret');
    expect(apiConfig({ DATABASE_URL: 'postgres://u:p%40ss@db:5432/x' }).DATABASE_URL).toBe('postgres://u:p%40ss@db:5432/x');
  });

  it('R-AUTH-15 a refused configuration never echoes a value', () => {
    const secret = 'redis://:hunter2-secret@cache:6379';
    try {
      apiConfig({ REDIS_URL: secret.replace('redis', 'http'), DATABASE_URL: 'mysql://u:hunter2-secret@h/db' });
      throw new Error('expected a ConfigError');
    } catch (error) {
      expect((error as Error).message).not.toContain('hunter2');
      expect((error as Error).message).toContain('REDIS_URL');
      expect((error as Error).message).toContain('DATABASE_URL');
    }
  });

  it('R-CFG-01 numbers parse strictly: SVC_API_PORT=0x10 and DATABASE_POOL_SIZE=1e1 are refused', () => {
    const p = problems({ SVC_API_PORT: '0x10', DATABASE_POOL_SIZE: '1e1', SVC_EMBEDDED_PG_PORT: '5.0' });
    expect(p.map((x) => x.variable).sort()).toEqual(['DATABASE_POOL_SIZE', 'SVC_API_PORT', 'SVC_EMBEDDED_PG_PORT']);
    expect(apiConfig({ SVC_API_PORT: '8080', DATABASE_POOL_SIZE: '10' }).SVC_API_PORT).toBe(8080);
  });

  it('R-CFG-01 the CORS_CREDENTIALS rule is reported even when another variable also fails', () => {
    const p = problems({ CORS_CREDENTIALS: 'true', SVC_API_PORT: 'x' });
    expect(p.map((x) => x.variable).sort()).toEqual(['CORS_CREDENTIALS', 'SVC_API_PORT']);
  });

  it('R-AUTH-19 SESSION_COOKIE_DOMAIN refuses a dotted number that is not an IP address', () => {
    for (const bad of ['1.2.3.4.5', '10.0.0.1', 'example.123']) {
      expect(cookieDomainProblem(bad), bad).toBeDefined();
      expect(problems({ SESSION_COOKIE_DOMAIN: bad }).map((x) => x.variable), bad).toEqual(['SESSION_COOKIE_DOMAIN']);
    }
  });
});
