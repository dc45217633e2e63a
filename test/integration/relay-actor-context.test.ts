// The relay's writes (sent_at and the `sent` trail rows) run in a unit of work with its actor context:
// app.process = relay, as every operation applies one (spec: units of work).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';

let h: WorkHarness;

beforeAll(async () => {
  h = await workHarness({ redis: false });
  await h.sql.unsafe(`
    CREATE TABLE seen_writes (what text, process text, tenant text);
    CREATE FUNCTION record_write() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO seen_writes VALUES (TG_TABLE_NAME || ':' || TG_OP, current_setting('app.process', true), current_setting('app.tenant_id', true));
      RETURN NEW;
    END $$;
    CREATE TRIGGER record_sent AFTER INSERT ON platform_task_run_events FOR EACH ROW WHEN (NEW.event = 'sent') EXECUTE FUNCTION record_write();
    CREATE TRIGGER record_sent_at AFTER UPDATE ON platform_outbox_messages FOR EACH ROW EXECUTE FUNCTION record_write();`);
});
afterAll(async () => h?.close());

describe('relay actor context', () => {
  it('R-OBX-13 the relay marks rows sent and appends `sent` as the system actor relay', async () => {
    await h.dispatch('fixture.effect', { key: 'relay-actor' });
    await h.relay();
    const seen = await h.sql<{ what: string; process: string | null; tenant: string | null }[]>`SELECT * FROM seen_writes ORDER BY what`;
    expect(seen).toEqual([
      { what: 'platform_outbox_messages:UPDATE', process: 'relay', tenant: '' },
      { what: 'platform_task_run_events:INSERT', process: 'relay', tenant: '' },
    ]);
  });
});
