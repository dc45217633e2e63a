// Which commits on the delivery path wait for the disk (src/db/commit-without-flush.ts), on real
// PostgreSQL: the relay's pass and a worker's registration written on its own (a late one, after a
// failure or past 100 ms of its handler) commit without waiting for their WAL flush; the usual
// registration commits with its effect (deferred to its finish); a dispatch, a run's effect transaction (alone or in a group), every settlement (retry, failure,
// dead letter) and the general registration path keep the server's setting (`on`, as in production), so
// what they commit is never taken back by a crash. A constraint trigger of this test, deferred to the
// commit, records for every trail row the synchronous_commit in force when its transaction commits.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { relayPass } from '../../src/work/runtime/produce/relay.ts';
import { defineTask, type WorkUnit } from '../../src/work/define/unit.ts';
import { effectPayload, effectTask, RUNTIME_UNITS } from '../fixtures/units/runtime-units.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { createTenant } from './work-tables-support.ts';

/** The same handler in a group commit (several runs, one effect transaction). */
const groupEffect = defineTask({
  name: 'fixture.group_effect',
  queue: 'default',
  context: 'tenant',
  concurrency: 10,
  timeoutSeconds: 5,
  groupCommit: true,
  payload: effectPayload,
  handler: effectTask.handler as never,
});
const units: ReadonlyMap<string, WorkUnit> = new Map([...RUNTIME_UNITS, [groupEffect.name, groupEffect]]);

let h: WorkHarness;

beforeAll(async () => {
  h = await workHarness({ units });
  // The test cluster runs with synchronous_commit off (a throwaway cluster): this database gets the
  // production default, and every open connection is ended so that the pool reopens it under it.
  const [{ db }] = (await h.sql`SELECT current_database() AS db`) as unknown as [{ db: string }];
  await h.sql.unsafe(`ALTER DATABASE "${db}" SET synchronous_commit = on`);
  await h.sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`;
  await h.sql`SELECT pg_terminate_backend(pg_backend_pid())`.catch(() => {});
  await h.sql`CREATE TABLE test_commit_modes (run_id uuid, event text, detail jsonb, mode text)`;
  await h.sql`CREATE FUNCTION test_record_commit_mode() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO test_commit_modes VALUES (NEW.run_id, NEW.event, NEW.detail, current_setting('synchronous_commit'));
      RETURN NULL;
    END $$`;
  for (const table of ['task_run_events', 'platform_task_run_events']) {
    await h.sql.unsafe(`CREATE CONSTRAINT TRIGGER test_record_commit_mode AFTER INSERT ON ${table}
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_record_commit_mode()`);
  }
});
afterAll(async () => h?.close());

/**
 * The commit modes seen per event for the given runs, e.g. { sent: ['off'], started: ['on'] }; a
 * `received` of the general path (it has a detail) and a `sent` recorded by a delivery are keyed `event+`.
 */
async function modesByEvent(runIds: readonly string[]): Promise<Record<string, string[]>> {
  const rows = await h.sql<{ event: string; modes: string[] }[]>`
    SELECT event || CASE WHEN (event = 'received' AND detail <> '{}'::jsonb) OR (event = 'sent' AND detail ? 'recorded_by') THEN '+' ELSE '' END AS event,
           array_agg(DISTINCT mode ORDER BY mode) AS modes
      FROM test_commit_modes WHERE run_id = ANY(${runIds as string[]}::uuid[]) GROUP BY 1`;
  return Object.fromEntries(rows.map((r) => [r.event, r.modes]));
}

describe('commits that wait for the disk', () => {
  it('the relay and a registration written on its own commit without a flush; dispatches, effects (alone and grouped) with their usual registrations, settlements and the general registration wait for it', async () => {
    expect((await h.sql`SHOW synchronous_commit`)[0]!.synchronous_commit).toBe('on');
    const tenantId = await createTenant(h.sql);
    const actor = { kind: 'system' as const, tenantId, label: 'commit-modes' };
    const alone = [
      (await h.dispatch('fixture.effect', { key: `cm-p-${randomUUID()}` })).runId,
      (await h.dispatch('fixture.tenant_effect', { key: `cm-t-${randomUUID()}` }, actor)).runId,
    ];
    const grouped: string[] = [];
    for (let i = 0; i < 6; i++) grouped.push((await h.dispatch('fixture.group_effect', { key: `cm-g-${i}-${randomUUID()}` }, actor)).runId);
    // One pass with fairness off (the harness's), then the rest of the group's rows with fairness on.
    const fairLater = grouped.splice(3);
    await h.sql`UPDATE outbox_messages SET available_at = clock_timestamp() + interval '1 hour' WHERE run_id = ANY(${fairLater}::uuid[])`;
    await h.relay();
    await h.sql`UPDATE outbox_messages SET available_at = clock_timestamp() WHERE run_id = ANY(${fairLater}::uuid[])`;
    const fair = await relayPass(h.sql, h.sqs, h.queueUrlPrefix, { instance: 'test-relay-fair', tenantInflightMax: 10 }, ['tenant']);
    expect(fair.sent).toBe(3);
    grouped.push(...fairLater);

    // Settlements: a transient failure retried, a permanent one dead-lettered; and a duplicate of a
    // finished run, which the general registration path records.
    const retried = (await h.dispatch('fixture.effect', { key: `cm-r-${randomUUID()}`, fail: 'transient', failUntilAttempt: 1 })).runId;
    const failed = (await h.dispatch('fixture.effect', { key: `cm-f-${randomUUID()}`, fail: 'permanent' })).runId;
    const duplicated = await h.dispatch('fixture.effect', { key: `cm-d-${randomUUID()}` });
    await h.relay();

    await h.startWorkers();
    for (const runId of [...alone, ...grouped, retried, duplicated.runId]) await h.waitForStatus(runId, ['succeeded']);
    await h.waitForEvent(failed, 'dead_lettered');
    await h.sendRaw('default', duplicated.envelope);
    await h.waitForReceives(duplicated.runId, 2);
    // The group's runs executed together: at least two of them share the transaction of their finish.
    const [together] = await h.sql<{ n: number }[]>`
      SELECT max(c)::int AS n FROM (SELECT count(*) AS c FROM task_run_events WHERE run_id = ANY(${grouped}::uuid[]) AND event = 'succeeded' GROUP BY xmin) x`;
    expect(together!.n).toBeGreaterThan(1);

    const all = [...alone, ...grouped, retried, failed, duplicated.runId];
    // A group member's `received` commits with its effect (its registration deferred to the group's
    // finish), and so does a run's alone (deferred to its own finish); a failed attempt's is written on
    // its own after the failure, and a retry's before its handler (its key has a ledger row), both
    // without a flush.
    const [deferred] = await h.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM test_commit_modes WHERE run_id = ANY(${grouped}::uuid[]) AND event = 'received' AND mode = 'on'`;
    expect(deferred!.n).toBeGreaterThan(1);
    expect(await modesByEvent(alone)).toMatchObject({ received: ['on'] });
    expect(await modesByEvent([failed, retried])).toMatchObject({ received: ['off'] });
    expect(await modesByEvent(all)).toEqual({
      queued: ['on'],
      sent: ['off'],
      received: ['off', 'on'],
      'received+': ['on'],
      started: ['on'],
      retry_scheduled: ['on'],
      succeeded: ['on'],
      failed: ['on'],
      dead_lettered: ['on'],
    });
    // Every run's `sent` came from a relay pass (none recorded by its delivery), each counted once.
    const [sentByRelay] = await h.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM test_commit_modes WHERE run_id = ANY(${all}::uuid[]) AND event = 'sent' AND NOT (detail ? 'recorded_by')`;
    expect(sentByRelay!.n).toBe(all.length);
  });
});
