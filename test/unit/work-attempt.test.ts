// openAttempt (src/work/runtime/execute/attempt.ts): the one owner of an attempt's lifetime. Its deadline
// aborts with UnitTimedOut, an operator's cancel with RunCancelled, a release with ReleasedOnShutdown
// (the reason settlement reads); end() lets go of the deadline, the cancel watch and the release once,
// and nothing aborts the attempt after it. Pure logic: fake timers, and a stand-in for postgres.js that
// answers the cancel check and records each statement cancel (no database).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Sql } from '../../src/db/client.ts';
import { AttemptEnded, openAttempt, type AttemptOptions, type AttemptStart } from '../../src/work/runtime/execute/attempt.ts';
import { EffectStatement } from '../../src/work/runtime/execute/cancel-statement.ts';
import type { CancelNotices } from '../../src/work/runtime/execute/cancel-notices.ts';
import { ReleasedOnShutdown } from '../../src/work/runtime/execute/context.ts';
import { RunCancelled } from '../../src/work/runtime/complete/cancellation.ts';
import { UnitTimedOut } from '../../src/work/define/unit-errors.ts';

const INTERVAL_MS = 1_000;
const START: AttemptStart = { unit: { name: 'send-invoice', timeoutSeconds: 5 }, scope: 'tenant', run: { runId: 'run-1', tenantId: 't-1' } };

/** What the stand-in database saw, and whether the run reads as cancelled. */
interface Db {
  cancelled: boolean;
  checks: number;
  statementCancels: number;
}

function fakeSql(db: Db): Sql {
  const tag = (first: unknown) => {
    if (!Array.isArray(first)) return first; // sql('task_runs'): an identifier
    const text = (first as string[]).join('?');
    if (text.includes('pg_cancel_backend')) {
      db.statementCancels += 1;
      return Promise.resolve([]);
    }
    if (text.includes('AS cancelled')) {
      db.checks += 1;
      return Promise.resolve([{ cancelled: db.cancelled }]);
    }
    return Promise.resolve([]); // a fragment
  };
  return tag as unknown as Sql;
}

/** A process listener that hands the test each watch's check, and counts the unsubscribes. */
function fakeNotices() {
  const checks = new Map<string, () => void>();
  let unsubscribes = 0;
  const notices: CancelNotices = {
    subscribe(runId, check) {
      checks.set(runId, check);
      return () => {
        unsubscribes += 1;
        checks.delete(runId);
      };
    },
    stop: async () => {},
  };
  return { notices, push: (runId: string) => checks.get(runId)?.(), unsubscribes: () => unsubscribes, subscribed: (runId: string) => checks.has(runId) };
}

/** Lets the cancel check's promise chain run (setImmediate is not faked). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

function setUp(overrides: Partial<AttemptOptions> = {}, { pushed = true } = {}) {
  const db: Db = { cancelled: false, checks: 0, statementCancels: 0 };
  const sql = fakeSql(db);
  const log = { warn: vi.fn() };
  const listener = fakeNotices();
  const statement = new EffectStatement(sql, log);
  statement.open({ pid: 4242, xactStart: '1700000000000000' });
  const lifetime = openAttempt({
    deps: { sql, cancelNotices: pushed ? listener.notices : undefined, cancelCheckIntervalMs: INTERVAL_MS },
    log,
    statement,
    cancelsStatement: true,
    ...overrides,
  });
  return { db, log, listener, statement, lifetime };
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
});

afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

describe('an attempt’s lifetime', () => {
  it('R-UNT-03 the unit’s deadline, from start(), aborts with UnitTimedOut, and cancels no statement', () => {
    const { lifetime, db } = setUp();
    lifetime.start(START);
    vi.advanceTimersByTime(4_999);
    expect(lifetime.signal.aborted).toBe(false);
    expect(lifetime.abortReason).toBeUndefined();
    vi.advanceTimersByTime(1);
    expect(lifetime.signal.aborted).toBe(true);
    expect(lifetime.abortReason).toBeInstanceOf(UnitTimedOut);
    expect(lifetime.abortReason).toMatchObject({ code: 'UNIT_TIMED_OUT' });
    // The transaction's statement_timeout bounds the statement; the deadline only aborts the signal.
    expect(db.statementCancels).toBe(0);
  });

  it('no deadline runs before start(): an attempt that waits for its turn is not timed out', () => {
    const { lifetime } = setUp();
    vi.advanceTimersByTime(60_000);
    expect(lifetime.signal.aborted).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a pushed cancel aborts with RunCancelled and cancels the statement once', async () => {
    const { lifetime, db, listener } = setUp();
    lifetime.start(START);
    db.cancelled = true;
    listener.push('run-1');
    await settle();
    expect(lifetime.abortReason).toBeInstanceOf(RunCancelled);
    expect(lifetime.abortReason).toMatchObject({ code: 'CANCELLED' });
    expect(db.statementCancels).toBe(1);
    // The deadline that follows changes nothing: the first reason stands.
    vi.advanceTimersByTime(5_000);
    expect(lifetime.abortReason).toBeInstanceOf(RunCancelled);
  });

  it('a cancel seen by the poll aborts with RunCancelled; a group member with neighbours cancels no statement', async () => {
    const { lifetime, db } = setUp({ cancelsStatement: false }, { pushed: false });
    db.cancelled = true;
    lifetime.start(START);
    await settle();
    expect(db.checks).toBe(0);
    expect(lifetime.signal.aborted).toBe(false);
    vi.advanceTimersByTime(INTERVAL_MS);
    await settle();
    expect(db.checks).toBe(1);
    expect(lifetime.abortReason).toBeInstanceOf(RunCancelled);
    expect(db.statementCancels).toBe(0);
  });

  it('R-WRK-10 a release aborts with ReleasedOnShutdown and cancels the statement; one already given aborts at start()', () => {
    const release = new AbortController();
    const { lifetime, db } = setUp({ releaseSignal: release.signal });
    lifetime.start(START);
    expect(lifetime.signal.aborted).toBe(false);
    release.abort();
    expect(lifetime.abortReason).toBeInstanceOf(ReleasedOnShutdown);
    expect(db.statementCancels).toBe(1);

    const late = setUp({ releaseSignal: release.signal });
    expect(late.lifetime.signal.aborted).toBe(false); // listened to from start() on
    late.lifetime.start(START);
    expect(late.lifetime.abortReason).toBeInstanceOf(ReleasedOnShutdown);
    expect(late.db.statementCancels).toBe(1);
  });

  it('end() clears the deadline and stops the watch once; a second end() changes nothing', () => {
    const release = new AbortController();
    const { lifetime, listener } = setUp({ releaseSignal: release.signal });
    const setTimer = vi.spyOn(globalThis, 'setTimeout');
    const clearTimer = vi.spyOn(globalThis, 'clearTimeout');
    const removeListener = vi.spyOn(release.signal, 'removeEventListener');
    lifetime.start(START);
    const deadline = setTimer.mock.results.find((_, i) => setTimer.mock.calls[i]![1] === 5_000)!.value as unknown;
    expect(deadline).toBeDefined();
    expect(vi.getTimerCount()).toBe(2); // the deadline and the watch's poll
    expect(listener.subscribed('run-1')).toBe(true);

    lifetime.end();
    expect(vi.getTimerCount()).toBe(0);
    expect(clearTimer.mock.calls.filter(([t]) => t === deadline)).toHaveLength(1);
    expect(listener.unsubscribes()).toBe(1);
    expect(listener.subscribed('run-1')).toBe(false);
    expect(removeListener).toHaveBeenCalledTimes(1);

    lifetime.end();
    expect(clearTimer.mock.calls.filter(([t]) => t === deadline)).toHaveLength(1);
    expect(listener.unsubscribes()).toBe(1);
    expect(removeListener).toHaveBeenCalledTimes(1);
    expect(lifetime.signal.aborted).toBe(false);
  });

  it('nothing aborts the attempt after end(): not the deadline, a cancel, a release, nor abort()', async () => {
    const release = new AbortController();
    const { lifetime, db, listener } = setUp({ releaseSignal: release.signal });
    lifetime.start(START);
    lifetime.end();
    db.cancelled = true;
    listener.push('run-1');
    vi.advanceTimersByTime(60_000);
    await settle();
    release.abort();
    lifetime.abort(new ReleasedOnShutdown());
    expect(lifetime.signal.aborted).toBe(false);
    expect(lifetime.abortReason).toBeUndefined();
    expect(db.checks).toBe(0);
    expect(db.statementCancels).toBe(0);
  });

  it('the reason an attempt was aborted before end() is still read after it (settlement reads it then)', () => {
    const { lifetime } = setUp();
    lifetime.start(START);
    vi.advanceTimersByTime(5_000);
    lifetime.end();
    expect(lifetime.abortReason).toBeInstanceOf(UnitTimedOut);
  });

  it('stop() ends a group member’s turn (deadline and watch) while its group’s release may still abort it until end()', () => {
    const { lifetime, listener } = setUp();
    lifetime.start(START);
    lifetime.stop();
    expect(vi.getTimerCount()).toBe(0);
    expect(listener.unsubscribes()).toBe(1);
    vi.advanceTimersByTime(60_000);
    expect(lifetime.signal.aborted).toBe(false);
    lifetime.abort(new ReleasedOnShutdown());
    expect(lifetime.abortReason).toBeInstanceOf(ReleasedOnShutdown);
    lifetime.end();
    expect(listener.unsubscribes()).toBe(1);
  });

  it('start() after end() throws and arms nothing: an attempt whose transaction was given up never runs', () => {
    const { lifetime, listener } = setUp();
    lifetime.end();
    expect(() => lifetime.start(START)).toThrow(AttemptEnded);
    expect(vi.getTimerCount()).toBe(0);
    expect(listener.subscribed('run-1')).toBe(false);
  });
});
