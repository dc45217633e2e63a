// Waiting on a condition, never on time: polls `check` every `stepMs` until it holds, bounded by
// `timeoutMs`. Resolves with the milliseconds it took (some tests report or bound them).
import { setTimeout as sleep } from 'node:timers/promises';

export async function waitFor(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  options: { stepMs?: number; what?: string } = {},
): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < timeoutMs) {
    if (await check()) return performance.now() - started;
    await sleep(options.stepMs ?? 10);
  }
  throw new Error(`${options.what ?? 'condition'} not met within ${timeoutMs} ms`);
}

/** `work`, or a failure saying `what` did not happen within `ms` (a bound on a wait that must end, never a pause). */
export async function within<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([work, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

