// The rescuer (src/work/runtime/maintain/rescuer.ts) on real services: PostgreSQL 18, Redis and an SQS-protocol server
// (the shared fauxqs, or one of the test's own that it restarts). A run whose message is lost (deleted
// through the SDK, as retention expiry or a purge does; a queue server restarted empty) is sent again
// and ends with one effect; lost runs stop holding their tenant's fairness cap; a run lost too often
// ends failed with RESCUE_LIMIT; `svc runs list --stuck` shows a stranded run.
import path from 'node:path';
import { DeleteMessageCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/db/unit-of-work.ts';
import { metricsText } from '../../src/observe/metrics.ts';
import { createSqsClient } from '../../src/queue/client.ts';
import { startLocalSqsServer, type LocalSqsServer } from '../../src/queue/local-sqs-server.ts';
import { queueUrl, type QueueName } from '../../src/queue/names.ts';
import { provisionQueues } from '../../src/queue/provision.ts';
import { relayPass } from '../../src/work/runtime/produce/relay.ts';
import { RESCUE_LIMIT, RESCUE_PAYLOAD_GONE, rescuePass, type RescuePassOptions } from '../../src/work/runtime/maintain/rescuer.ts';
import { startDelivery } from '../../src/work/runtime/store/run-store.ts';
import { inFlightByGroup } from '../../src/work/runtime/produce/tenant-inflight.ts';
import { events, workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { causalProblems } from '../fixtures/trail-causality.ts';
import { RESCUE_UNITS } from '../fixtures/units/rescue-units.ts';
import { sampleValue } from '../support/prometheus-text.ts';
import { waitFor } from '../support/wait-for.ts';
import { jsonLines, svc } from './operate-support.ts';
import { createTenant } from './work-tables-support.ts';

const VISIBILITY_SECONDS = 1;
/** Short rescue timings: a run is overdue 1 s (visibility) + 1 s (unit timeout) + 500 ms after its last progress. */
const RESCUE = { intervalMs: 200, marginMs: 500, maxRescues: 5 };
const ROOT = path.resolve(import.meta.dirname, '..', '..');
/** The rescuer's trail row: `queued` again, its detail saying which rescue and why. */
const isRescue = (e: { event: string; detail: Record<string, unknown> }) => e.event === 'queued' && e.detail.rescue !== undefined;

let h: WorkHarness;
beforeAll(async () => {
  h = await workHarness({ units: RESCUE_UNITS, visibilitySeconds: VISIBILITY_SECONDS });
});
afterAll(async () => {
  await h?.close();
});

function passOptions(overrides: Partial<RescuePassOptions> = {}): RescuePassOptions {
  const v = VISIBILITY_SECONDS;
  return {
    sql: h.sql,
    sqs: h.sqs,
    queueUrlPrefix: h.queueUrlPrefix,
    windows: {
      visibilitySeconds: { critical: v, default: v, bulk: v, maintenance: v },
      unitTimeoutSeconds: new Map([...RESCUE_UNITS.values()].map((u) => [u.name, u.timeoutSeconds])),
      marginMs: RESCUE.marginMs,
    },
    instance: 'test-rescuer',
    ...overrides,
  };
}

/** Deletes the messages of these runs from their queue through the SDK (what retention expiry or a purge does). */
async function deleteMessages(sqs: SQSClient, prefix: string, queue: QueueName, runIds: readonly string[]): Promise<void> {
  const wanted = new Set(runIds);
  const url = queueUrl(prefix, queue);
  await waitFor(
    async () => {
      const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 30 }));
      for (const m of got.Messages ?? []) {
        const runId = (JSON.parse(m.Body ?? '{}') as { run_id?: string }).run_id;
        if (runId && wanted.has(runId)) {
          await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle! }));
          wanted.delete(runId);
        }
      }
      return wanted.size === 0;
    },
    20_000,
    { stepMs: 0, what: `the messages of ${runIds.length} run(s) deleted` },
  );
}

async function outboxSent(runId: string): Promise<boolean | null> {
  const [row] = await h.sql<{ sent: boolean }[]>`
    SELECT sent_at IS NOT NULL AS sent FROM platform_outbox_messages WHERE run_id = ${runId}
    UNION ALL SELECT sent_at IS NOT NULL FROM outbox_messages WHERE run_id = ${runId}`;
  return row ? row.sent : null;
}

describe('the rescuer sends again runs whose message was lost', () => {
  it('a sent message deleted from the queue through the SDK: the run is rescued and succeeds once, its trail causal with the rescue\'s `queued`', async () => {
    const { runId } = await h.dispatch('rescue.effect', { key: 'deleted-1' });
    await h.relay();
    expect(await outboxSent(runId)).toBe(true);
    await deleteMessages(h.sqs, h.queueUrlPrefix, 'default', [runId]);

    const workers = await h.startWorkers({ relay: { sweepIntervalMs: 200, rescue: RESCUE } });
    expect((await h.waitForStatus(runId, ['succeeded', 'failed'], 20_000)).status).toBe('succeeded');
    await workers.stop();
    expect(await h.effects('deleted-1')).toBe(1);
    const trail = await h.trail(runId);
    const rescued = trail.filter((e) => isRescue(e));
    expect(rescued.length).toBe(1);
    expect(rescued[0]!.detail).toMatchObject({ reason: 'sent_not_received', status: 'queued', rescue: 1 });
    expect(rescued[0]!.detail.waited_seconds).toBeGreaterThanOrEqual(2);
    // queued, sent, queued again by the rescue, sent again, received, started, succeeded.
    expect(events(trail).slice(0, 4)).toEqual(['queued', 'sent', 'queued', 'sent']);
    const causal = await causalProblems(h.sql, runId);
    expect(causal.problems, causal.events.join(' ')).toEqual([]);
    const metrics = (await metricsText()).body;
    expect(sampleValue(metrics, 'svc_runs_rescued_total', { queue: 'default', reason: 'sent_not_received' })).toBeGreaterThanOrEqual(1);
  });

  it('npm start (the queue server started empty with the workers): a run sent before the start is rescued at once, whatever the margin', async () => {
    const { runId } = await h.dispatch('rescue.effect', { key: 'started-empty' });
    await h.relay();
    await deleteMessages(h.sqs, h.queueUrlPrefix, 'default', [runId]);
    const workers = await h.startWorkers({ relay: { sweepIntervalMs: 200, rescue: { ...RESCUE, marginMs: 600_000, queueStartedEmpty: true } } });
    expect((await h.waitForStatus(runId, ['succeeded', 'failed'], 15_000)).status).toBe('succeeded');
    await workers.stop();
    expect(await h.effects('started-empty')).toBe(1);
    expect((await h.trail(runId)).find((e) => isRescue(e))?.detail).toMatchObject({ reason: 'queue_restarted' });
  });

  it('a run whose worker died after registering it while the queue lost its message (running, no lease) is rescued and succeeds once', async () => {
    const { runId } = await h.dispatch('rescue.effect', { key: 'dead-worker' });
    await h.relay();
    // A worker receives it, registers it (`running`, `received`) and dies; the queue loses the message.
    await startDelivery(h.sql, 'platform', { tenantId: '', userId: '', process: 'test-worker' }, { runId, receiveCount: 1, workerInstance: 'dead-worker' });
    expect((await h.run(runId))?.status).toBe('running');
    await deleteMessages(h.sqs, h.queueUrlPrefix, 'default', [runId]);

    // Overdue as `running` (1 s visibility + 1 s timeout + 500 ms since `received`): the gauges show it.
    await waitFor(async () => (await rescuePass(passOptions({ batchSize: 0 }))).overdue === 1, 15_000, { stepMs: 100, what: 'the run overdue' });
    const metrics = (await metricsText()).body;
    expect(sampleValue(metrics, 'svc_runs_overdue', { queue: 'default', state: 'running' })).toBe(1);
    expect(sampleValue(metrics, 'svc_runs_overdue_oldest_seconds')).toBeGreaterThanOrEqual(2);

    const workers = await h.startWorkers({ relay: { sweepIntervalMs: 200, rescue: RESCUE } });
    expect((await h.waitForStatus(runId, ['succeeded', 'failed'], 20_000)).status).toBe('succeeded');
    await workers.stop();
    expect(await h.effects('dead-worker')).toBe(1);
    const trail = await h.trail(runId);
    expect(trail.find((e) => isRescue(e))?.detail).toMatchObject({ reason: 'running_without_lease', status: 'running' });
    const causal = await causalProblems(h.sql, runId);
    expect(causal.problems, causal.events.join(' ')).toEqual([]);
    expect((await rescuePass(passOptions())).overdue).toBe(0);
  });

  it('lost runs stop holding their tenant\'s fairness cap: the later runs of that tenant are sent after the rescue', async () => {
    const tenantId = await createTenant(h.sql);
    const actor: Actor = { kind: 'system', tenantId, label: 'rescuer-test' };
    const cap = 3;
    const runs: string[] = [];
    for (let n = 0; n < 5; n++) runs.push((await h.dispatch('rescue.tenant_effect', { key: `cap-${n}` }, actor)).runId);
    // The fair relay sends the cap's worth; the queue then loses those messages.
    expect((await relayPass(h.sql, h.sqs, h.queueUrlPrefix, { tenantInflightMax: cap, instance: 'test-relay' })).sent).toBe(cap);
    expect((await relayPass(h.sql, h.sqs, h.queueUrlPrefix, { tenantInflightMax: cap, instance: 'test-relay' })).sent).toBe(0);
    const lost = runs.slice(0, cap);
    await deleteMessages(h.sqs, h.queueUrlPrefix, 'default', lost);
    const inFlight = async () => (await h.sql.begin((tx) => inFlightByGroup(tx, 'tenant'))).find((g) => g.group === tenantId)?.inFlight ?? 0;
    expect(await inFlight()).toBe(cap);

    // Once overdue, the rescue puts their rows back to pending: they no longer count in flight.
    let resent = 0;
    await waitFor(async () => (resent += (await rescuePass(passOptions())).resent) >= cap, 15_000, { stepMs: 100, what: 'the lost runs rescued' });
    expect(resent).toBe(cap);
    expect(await inFlight()).toBe(0);
    for (const runId of lost) expect(await outboxSent(runId)).toBe(false);

    const workers = await h.startWorkers({ relay: { sweepIntervalMs: 200, tenantInflightMax: cap, rescue: RESCUE } });
    for (const runId of runs) expect((await h.waitForStatus(runId, ['succeeded', 'failed'], 20_000)).status).toBe('succeeded');
    await workers.stop();
    for (let n = 0; n < 5; n++) expect(await h.effects(`cap-${n}`)).toBe(1);
    for (const runId of lost) expect((await h.trail(runId)).some(isRescue)).toBe(true);
  });

  it('a run lost more often than SVC_RESCUE_MAX ends failed with RESCUE_LIMIT, without an effect', async () => {
    const { runId } = await h.dispatch('rescue.effect', { key: 'too-often' });
    const options = passOptions({ maxRescues: 1 });
    // Lost once: rescued.
    await h.relay();
    await deleteMessages(h.sqs, h.queueUrlPrefix, 'default', [runId]);
    await waitFor(async () => (await rescuePass(options)).resent === 1, 15_000, { stepMs: 100, what: 'the first rescue' });
    // Sent again and lost again: given up.
    await h.relay();
    expect(await outboxSent(runId)).toBe(true);
    await deleteMessages(h.sqs, h.queueUrlPrefix, 'default', [runId]);
    await waitFor(async () => (await rescuePass(options)).gaveUp === 1, 15_000, { stepMs: 100, what: 'the run given up' });

    const run = await h.run(runId);
    expect(run?.status).toBe('failed');
    expect((run?.outcome as { error?: { code?: string } }).error?.code).toBe(RESCUE_LIMIT);
    const trail = await h.trail(runId);
    expect(events(trail)).toEqual(['queued', 'sent', 'queued', 'sent', 'failed']);
    expect(trail.at(-1)!.error_code).toBe(RESCUE_LIMIT);
    const causal = await causalProblems(h.sql, runId);
    expect(causal.problems, causal.events.join(' ')).toEqual([]);
    expect(await h.effects('too-often')).toBe(0);
    // Final: a later pass leaves it alone.
    expect((await rescuePass(options)).overdue).toBe(0);
  });

  it('a lost run whose outbox row was purged (its payload gone) ends failed with RESCUE_PAYLOAD_GONE', async () => {
    const { runId } = await h.dispatch('rescue.effect', { key: 'purged' });
    await h.relay();
    await deleteMessages(h.sqs, h.queueUrlPrefix, 'default', [runId]);
    await h.sql`DELETE FROM platform_outbox_messages WHERE run_id = ${runId}`;
    await waitFor(async () => (await rescuePass(passOptions())).gaveUp === 1, 15_000, { stepMs: 100, what: 'the run given up' });
    const run = await h.run(runId);
    expect(run?.status).toBe('failed');
    expect((run?.outcome as { error?: { code?: string } }).error?.code).toBe(RESCUE_PAYLOAD_GONE);
    expect(events(await h.trail(runId))).toEqual(['queued', 'sent', 'failed']);
  });

  it('two rescuers at once (two relays) rescue each lost run once', async () => {
    const runs: string[] = [];
    for (let n = 0; n < 10; n++) runs.push((await h.dispatch('rescue.effect', { key: `two-${n}` })).runId);
    await h.relay();
    await deleteMessages(h.sqs, h.queueUrlPrefix, 'default', runs);
    await waitFor(async () => (await rescuePass(passOptions({ batchSize: 0 }))).overdue === runs.length, 15_000, { stepMs: 100, what: 'the runs overdue' });
    const [a, b] = await Promise.all([rescuePass(passOptions({ instance: 'rescuer-a' })), rescuePass(passOptions({ instance: 'rescuer-b' }))]);
    // A run the other rescuer holds or has just rescued is skipped; whatever is left goes on the next pass.
    const more = (await rescuePass(passOptions())).resent;
    expect(a.resent + b.resent + more).toBe(runs.length);
    const rows = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM platform_task_run_events WHERE run_id = ANY(${runs}::uuid[]) AND event = 'queued' AND detail ? 'rescue' GROUP BY run_id`;
    expect(rows.map((r) => r.n)).toEqual(runs.map(() => 1));
    // Sent again, each one succeeds once.
    const workers = await h.startWorkers({ relay: { sweepIntervalMs: 200, rescue: RESCUE } });
    for (const runId of runs) expect((await h.waitForStatus(runId, ['succeeded', 'failed'], 20_000)).status).toBe('succeeded');
    await workers.stop();
    for (let n = 0; n < 10; n++) expect(await h.effects(`two-${n}`)).toBe(1);
  });

  it('svc runs list --stuck shows a stranded run (sent, its message gone) and not one the relay has yet to send', async () => {
    const { runId } = await h.dispatch('rescue.effect', { key: 'stuck-cli' });
    await h.relay();
    // Dispatched after the relay's pass: its row is pending, the relay's to send, never stuck.
    const { runId: pending } = await h.dispatch('rescue.effect', { key: 'stuck-cli-pending' });
    await deleteMessages(h.sqs, h.queueUrlPrefix, 'default', [runId]);
    // Past its window: 1 s visibility + 1 s unit timeout + 500 ms margin after it was sent.
    await waitFor(async () => (await rescuePass(passOptions({ maxRescues: 0, batchSize: 0 }))).overdue >= 1, 15_000, { stepMs: 100, what: 'the run overdue' });
    const env = {
      SVC_VISIBILITY_DEFAULT_S: String(VISIBILITY_SECONDS),
      SVC_RESCUE_MARGIN_MS: String(RESCUE.marginMs),
      SVC_UNITS_ROOT: path.join(ROOT, 'test/fixtures/units/rescue'),
      SVC_UNITS_DIR: 'units',
    };
    const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
    Object.assign(process.env, env);
    try {
      const json = await svc(h, ['runs', 'list', '--stuck', '--json']);
      expect(json.stderr).toBe('');
      const line = jsonLines(json.stdout).find((l) => l.runId === runId);
      expect(line).toMatchObject({ runId, tenant: null, unit: 'rescue.effect', queue: 'default', status: 'queued', state: 'sent', reason: 'sent_not_received', rescues: 0 });
      expect(line!.waitedSeconds as number).toBeGreaterThanOrEqual(2);
      expect(jsonLines(json.stdout).some((l) => l.runId === pending)).toBe(false);
      const text = await svc(h, ['runs', 'list', '--stuck']);
      expect(text.stdout.split('\n')[0]).toMatch(/^RUN\s+TENANT\s+UNIT\s+QUEUE\s+STATUS\s+STATE\s+REASON/);
      expect(text.stdout).toContain(runId);
      const refused = await svc(h, ['runs', 'list', '--stuck', '--status', 'failed']);
      expect(refused.status).not.toBe(0);
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});

describe('the queue server restarted empty mid-burst', () => {
  let server: LocalSqsServer | undefined;
  afterAll(async () => {
    await server?.stop();
  });

  it('every run of a burst of 60 ends succeeded with one effect', async () => {
    server = await startLocalSqsServer();
    const port = server.port;
    const sqs = createSqsClient({ region: 'us-east-1', endpoint: server.endpoint, localCredentials: true });
    const v = VISIBILITY_SECONDS;
    const visibility = { critical: v, default: v, bulk: v, maintenance: v };
    await provisionQueues(sqs, server.queueUrlPrefix, visibility);
    try {
      const runs: string[] = [];
      for (let n = 0; n < 60; n++) runs.push((await h.dispatch('rescue.effect', { key: `burst-${n}`, sleepMs: 100 })).runId);
      const workers = await h.startWorkers({ sqs, queueUrlPrefix: server.queueUrlPrefix, relay: { sweepIntervalMs: 200, rescue: RESCUE } });
      const finished = async () => {
        const [row] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM platform_task_runs WHERE run_id = ANY(${runs}::uuid[]) AND status = 'succeeded'`;
        return row!.n;
      };
      // Mid-burst: some runs done, messages of others sent and waiting.
      await waitFor(async () => (await finished()) >= 5, 20_000, { stepMs: 20, what: 'the burst under way' });
      expect(await finished()).toBeLessThan(60);
      await server.stop();
      server = await startLocalSqsServer({ port });
      await provisionQueues(sqs, server.queueUrlPrefix, visibility);

      await waitFor(async () => (await finished()) === 60, 45_000, { stepMs: 100, what: 'every run of the burst succeeded' });
      await workers.stop();
      for (let n = 0; n < 60; n++) expect(await h.effects(`burst-${n}`), `burst-${n}`).toBe(1);
      const [rescued] = await h.sql<{ n: number }[]>`SELECT count(DISTINCT run_id)::int AS n FROM platform_task_run_events WHERE run_id = ANY(${runs}::uuid[]) AND event = 'queued' AND detail ? 'rescue'`;
      expect(rescued!.n).toBeGreaterThan(0);
      for (const runId of runs) {
        const causal = await causalProblems(h.sql, runId);
        expect(causal.problems, `${runId}: ${causal.events.join(' ')}`).toEqual([]);
      }
    } finally {
      sqs.destroy();
    }
  });
});
