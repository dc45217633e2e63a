// What a finished statement or an answered command leaves behind. A steady 200 runs/s
// promoted about 37 KB per run to the workers' old generation: postgres.js kept two arrow functions on
// each Query, ioredis on each Command (and a getter on each Pipeline), and with them every finished one
// outlived young-generation collections (scavenges), to be copied and kept until a full collection.
// patches/postgres+3.4.9.patch and patches/ioredis+6.0.0.patch share those functions instead. The
// fixture watches 50 operations among 750 through WeakRefs and asks for three scavenges: unpatched, all
// 50 survive them (measured); patched, none but possibly the last one still referenced survives.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runNodeProcess } from '../support/node-process.ts';
import { freshDatabase, freshRedisUrl, type TestDatabase } from '../support/services.ts';

const FIXTURE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'young-generation.ts');

let db: TestDatabase;
beforeAll(async () => {
  db = await freshDatabase({ max: 1 });
});
afterAll(async () => {
  await db?.drop();
});

async function survivors(kind: 'postgres' | 'redis', url: string): Promise<{ survived: number; watched: number }> {
  const { code, stdout, stderr } = await runNodeProcess(['--expose-gc', FIXTURE, kind, url]);
  expect(code, stderr).toBe(0);
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as { survived: number; watched: number };
}

describe('finished statements and answered commands', () => {
  it('a postgres.js query dies young once it has been answered and dropped', async () => {
    const result = await survivors('postgres', db.url);
    expect(result.watched).toBe(50);
    expect(result.survived, JSON.stringify(result)).toBeLessThanOrEqual(1);
  });

  it('an ioredis command (auto-pipelined, with its timeout) dies young once it has been answered and dropped', async () => {
    const result = await survivors('redis', await freshRedisUrl());
    expect(result.watched).toBe(50);
    expect(result.survived, JSON.stringify(result)).toBeLessThanOrEqual(1);
  });
});
