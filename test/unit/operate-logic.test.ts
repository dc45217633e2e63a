// Pure logic of the operator commands: filter parsing, run id and label checks, the public failure
// outcome, and the note a delivery meeting a final run leaves.
import { describe, expect, it } from 'vitest';
import { failedOutcome } from '../../src/work/runtime/complete/failure-outcome.ts';
import { finalDeliveryNote } from '../../src/work/runtime/complete/final-delivery.ts';
import { parseRunFilters, parseTimeBound } from '../../src/work/operate/list-runs.ts';
import { checkOperatorLabel, checkRunId } from '../../src/work/operate/operate-error.ts';

describe('operate filters', () => {
  it('parses every filter and refuses each malformed one with RUN_FILTER_INVALID', () => {
    expect(parseRunFilters({ tenant: 'acme-1', unit: 'billing.send_invoice', status: 'failed,retrying,failed', queue: 'bulk', since: '15m', until: '2026-11-23T10:00:00+01:00', limit: '7', errorCode: 'VALIDATION_FAILED' })).toEqual({
      tenant: 'acme-1',
      unit: 'billing.send_invoice',
      statuses: ['failed', 'retrying'],
      queue: 'bulk',
      since: { agoSeconds: 900 },
      until: { at: '2026-11-23T09:00:00.000Z' },
      limit: 7,
      errorCode: 'VALIDATION_FAILED',
    });
    for (const bad of [{ status: 'done' }, { status: '' }, { queue: 'fast' }, { limit: '0' }, { limit: '1001' }, { limit: '2.5' }, { unit: 'Bad Name' }, { tenant: "x'; drop" }, { since: 'yesterday' }, { until: '2026-11-23' }, { errorCode: 'a b' }]) {
      expect(() => parseRunFilters(bad), JSON.stringify(bad)).toThrow(expect.objectContaining({ code: 'RUN_FILTER_INVALID' }));
    }
  });

  it('durations are seconds, minutes, hours or days before the database clock', () => {
    expect(parseTimeBound('since', '30s')).toEqual({ agoSeconds: 30 });
    expect(parseTimeBound('since', '2h')).toEqual({ agoSeconds: 7200 });
    expect(parseTimeBound('since', '7d')).toEqual({ agoSeconds: 604_800 });
    expect(() => parseTimeBound('since', '7w')).toThrow(/--since must be an ISO instant/);
  });

  it('run ids must be uuids (lower-cased) and --by a non-empty printable label', () => {
    expect(checkRunId('0190C7D2-4B7E-4A59-9F8E-2F1F0C1E4D11')).toBe('0190c7d2-4b7e-4a59-9f8e-2f1f0c1e4d11');
    expect(() => checkRunId('42')).toThrow(expect.objectContaining({ code: 'RUN_ID_INVALID' }));
    expect(checkOperatorLabel(' alice@ops ')).toBe('alice@ops');
    for (const bad of [undefined, '', '   ', 'a\nb', 'x'.repeat(101)]) expect(() => checkOperatorLabel(bad)).toThrow(expect.objectContaining({ code: 'RUN_FILTER_INVALID' }));
  });
});

describe('failed outcome', () => {
  it('keeps a unit error\'s first line, at most 200 characters, never a stack', () => {
    expect(failedOutcome({ code: 'VALIDATION_FAILED', type: 'ValidationFailure', message: 'invoice 7 has no lines\n    at handler (x.ts:1:1)' })).toEqual({
      error: { code: 'VALIDATION_FAILED', type: 'ValidationFailure', message: 'invoice 7 has no lines' },
    });
    const long = failedOutcome({ code: 'X', type: 'PermanentFailure', message: 'y'.repeat(500) });
    expect(long.error.message).toHaveLength(200);
  });

  it('replaces the message of an error that is not a unit error (it may carry values) by a fixed text', () => {
    const pg = failedOutcome({ code: 'PG_23505', type: 'PostgresError', message: 'duplicate key value violates unique constraint "users_email" Key (email)=(a@b.c)' });
    expect(pg.error).toEqual({ code: 'PG_23505', type: 'PostgresError', message: "the handler failed with PostgresError (PG_23505): see the run's trail and the worker log" });
    expect(JSON.stringify(pg)).not.toContain('a@b.c');
  });
});

describe('a delivery meeting a final run', () => {
  it('notes a cancelled run quietly, warns about a dead-lettered one naming svc dlq redrive, and says nothing more otherwise', () => {
    expect(finalDeliveryNote({ status: 'failed', outcome: { error: { code: 'CANCELLED' } } }, false)).toEqual({ detail: { settled: 'failed', cancelled: true }, warning: null });
    const back = finalDeliveryNote({ status: 'failed', outcome: {} }, true);
    expect(back.warning).toContain('svc dlq redrive');
    expect(back.detail).toMatchObject({ settled: 'failed', note: expect.stringContaining('svc dlq redrive') });
    expect(finalDeliveryNote({ status: 'succeeded', outcome: {} }, true)).toEqual({ detail: { settled: 'succeeded' }, warning: null });
  });
});
