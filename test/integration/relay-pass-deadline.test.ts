// The relay and the rescuer keep going when the database stops answering. After a restart of
// PostgreSQL a reserve or a BEGIN can stay pending for ever (a driver fault), and a relay whose pass
// waited on it sent nothing more, ever. Each pass is bounded (passDeadlineMs): a wait past it abandons
// the pass, the loop starts the next one, and once the database answers again the rows go out.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../src/db/client.ts';
import { captureLogger } from '../../src/logging/logger.ts';
import { startRelay } from '../../src/work/runtime/produce/relay.ts';
import { startRescuer } from '../../src/work/runtime/maintain/rescuer.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { effectTask } from '../fixtures/units/runtime-units.ts';
import type { WorkUnit } from '../../src/work/define/unit.ts';
import { stallingProxy, type StallingProxy } from '../support/stalling-proxy.ts';
import { waitFor } from '../support/wait-for.ts';

let h: WorkHarness;
let proxy: StallingProxy;
let relaySql: Sql;

beforeAll(async () => {
  h = await workHarness({ redis: false, units: new Map<string, WorkUnit>([[effectTask.name, effectTask]]) });
  proxy = await stallingProxy(h.db.url);
  relaySql = createSql(proxy.url, { max: 4 });
}, 60_000);

afterAll(async () => {
  proxy?.resume();
  await relaySql?.end({ timeout: 1 }).catch(() => {});
  await proxy?.close();
  await h?.close();
});

describe('a background pass whose database wait never settles', () => {
  it('the relay abandons a stuck pass at its deadline and starts the next, and sends once the database answers', async () => {
    const { logger, text: output } = captureLogger('warn');
    const relay = startRelay({ sql: relaySql, redis: undefined, sqs: h.sqs, queueUrlPrefix: h.queueUrlPrefix, sweepIntervalMs: 100, passDeadlineMs: 300, instance: 'relay-stall', log: logger });
    try {
      const abandoned = () => output().split('\n').filter((l) => l.includes('a relay pass did not finish its wait')).length;
      proxy.stall();
      const { runId } = await h.dispatch(effectTask.name, { key: 'relay-stall' });
      // Passes go on while nothing answers: each is abandoned at its deadline.
      await waitFor(() => abandoned() >= 2, 15_000, { what: 'two relay passes abandoned during the stall' });
      proxy.resume();
      await waitFor(async () => (await h.sql`SELECT 1 FROM outbox_messages WHERE run_id = ${runId} AND sent_at IS NOT NULL
                                              UNION ALL SELECT 1 FROM platform_outbox_messages WHERE run_id = ${runId} AND sent_at IS NOT NULL`).length === 1, 15_000, { what: 'the row sent after the stall' });
      expect(abandoned()).toBeGreaterThanOrEqual(2);
    } finally {
      proxy.resume();
      await relay.stop();
    }
  });

  it('the rescuer abandons a stuck pass at its deadline and starts the next', async () => {
    const { logger, text: output } = captureLogger('warn');
    const v = 1;
    const rescuer = startRescuer({
      sql: relaySql,
      sqs: h.sqs,
      queueUrlPrefix: h.queueUrlPrefix,
      windows: { visibilitySeconds: { critical: v, default: v, bulk: v, maintenance: v }, unitTimeoutSeconds: new Map(), marginMs: 100 },
      intervalMs: 50,
      passDeadlineMs: 300,
      log: logger,
    });
    try {
      proxy.stall();
      await waitFor(() => output().split('\n').filter((l) => l.includes('a rescue pass did not finish its wait')).length >= 2, 15_000, {
        what: 'two rescue passes abandoned during the stall',
      });
    } finally {
      proxy.resume();
      await rescuer.stop();
    }
  });
});
