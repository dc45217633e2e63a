-- FROZEN: loaded by migration 0024_work-serial-runs and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
-- Runs in order per key (serialKey in defineTask; src/work/runtime/execute/serial-turn.ts): a dispatch of
-- a unit with a serial key records the key's value in the detail of its run's `queued` trail event
-- ({"serial_key": ...}); a delivery of such a run looks through these indexes for an earlier run of the
-- same unit and key that is not final yet, and waits its turn while one is. As for unique dispatch
-- (0023), the key lives on the append-only trail: the run tables keep the spec's columns and the trail
-- its event values. Only keyed `queued` events are indexed: other dispatches cost nothing here.
CREATE INDEX task_run_events_serial_key ON task_run_events (tenant_id, (detail ->> 'serial_key'))
  WHERE event = 'queued' AND detail ? 'serial_key';
CREATE INDEX platform_task_run_events_serial_key ON platform_task_run_events ((detail ->> 'serial_key'))
  WHERE event = 'queued' AND detail ? 'serial_key';
