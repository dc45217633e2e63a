// Shared by the operate-* tests: the `svc` CLI as a real child process against the harness's
// database, Redis and SQS server, and units whose failure the test switches on and off ("fixed").
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import { ValidationFailure } from '../../src/work/define/unit-errors.ts';
import type { WorkHarness } from '../fixtures/work-harness.ts';
import { runNodeProcess } from '../support/node-process.ts';
import { RUNTIME_UNITS } from '../fixtures/units/runtime-units.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `svc <args>` (src/main/cli.ts on this Node) without blocking the in-process workers. */
export async function svc(h: WorkHarness, args: string[], timeoutMs = 60_000): Promise<CliResult> {
  const { code, stdout, stderr, timedOut } = await runNodeProcess([path.join(ROOT, 'src/main/cli.ts'), ...args], {
    env: {
      ...process.env,
      DATABASE_URL: h.db.url,
      REDIS_URL: h.redisUrl ?? 'redis://127.0.0.1:1',
      SVC_SQS_ENDPOINT: h.endpoint,
      SVC_SQS_QUEUE_URL_PREFIX: h.queueUrlPrefix,
      SVC_SQS_LOCAL_CREDENTIALS: 'true',
      LOG_LEVEL: 'info',
    },
    timeoutMs,
  });
  if (timedOut) throw new Error(`svc ${args.join(' ')} did not finish within ${timeoutMs} ms; stderr: ${stderr}`);
  return { status: code, stdout, stderr };
}

/** Runs several `svc` commands, at most `concurrency` at a time (the machine's cores are shared). */
export async function svcAll(h: WorkHarness, argsList: string[][], concurrency = 3): Promise<CliResult[]> {
  const results: CliResult[] = new Array(argsList.length);
  let next = 0;
  const worker = async () => {
    while (next < argsList.length) {
      const i = next++;
      results[i] = await svc(h, argsList[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, argsList.length) }, worker));
  return results;
}

/** JSON lines of a `--json` output. */
export function jsonLines(out: string): Array<Record<string, unknown>> {
  return out.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** Switch of the "broken" units: true makes them fail permanently, false is the fix. */
export const fault = { broken: true };

const flakyPayload = z.object({ key: z.string().min(1) });

/** A system unit that writes its effect, then fails permanently while `fault.broken`. */
const brokenHandler = async (p: z.infer<typeof flakyPayload>, run: Parameters<WorkUnit['handler']>[1]) => {
  await run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`;
  if (fault.broken) throw new ValidationFailure(`the unit is broken for ${p.key}`);
  return { key: p.key };
};

export const brokenUntilFixed = defineTask({
  name: 'fixture.broken_until_fixed',
  queue: 'default',
  context: 'system',
  concurrency: 2,
  timeoutSeconds: 10,
  payload: flakyPayload,
  handler: brokenHandler,
});

/** The same for a tenant. */
export const tenantBrokenUntilFixed = defineTask({
  name: 'fixture.tenant_broken_until_fixed',
  queue: 'default',
  context: 'tenant',
  concurrency: 2,
  timeoutSeconds: 10,
  payload: flakyPayload,
  handler: brokenHandler,
});

/** brokenUntilFixed with a business idempotency key (one execution per order). */
export const brokenBusinessKey = defineTask({
  name: 'fixture.broken_business_key',
  queue: 'default',
  context: 'system',
  concurrency: 2,
  timeoutSeconds: 10,
  payload: flakyPayload,
  idempotencyKey: (p) => `order:${p.key}`,
  handler: brokenHandler,
});

/** A system unit that writes its effect and then waits (honouring run.signal) for `sleepMs`. */
export const slowTask = defineTask({
  name: 'fixture.slow',
  queue: 'default',
  context: 'system',
  concurrency: 2,
  timeoutSeconds: 60,
  payload: z.object({ key: z.string(), sleepMs: z.number().int() }),
  async handler(p, run) {
    await run.transaction`INSERT INTO fixture_effects (run_id, key, attempt) VALUES (${run.runId}, ${p.key}, ${run.attempt})`;
    await sleep(p.sleepMs, undefined, { signal: run.signal });
    return { key: p.key };
  },
});

export const OPERATE_UNITS: ReadonlyMap<string, WorkUnit> = new Map([
  ...RUNTIME_UNITS,
  ...[brokenUntilFixed, tenantBrokenUntilFixed, brokenBusinessKey, slowTask].map((u) => [u.name, u] as [string, WorkUnit]),
]);
