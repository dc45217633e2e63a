-- FROZEN: loaded by migration 0023_work-unique-dispatch and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
-- Unique dispatch (src/work/runtime/produce/unique-dispatch.ts): a dispatch with a unique key records
-- the key in the detail of its run's `queued` trail event ({"unique_key": ...}); a later dispatch with
-- the key finds that run through these indexes and returns it instead of writing a new one. The key
-- lives on the append-only trail, so the run tables keep the spec's columns and the trail its event
-- values; concurrent dispatchers of one key serialize on a transaction-level advisory lock, taken
-- before the lookup. Only keyed `queued` events are indexed: unkeyed dispatches cost nothing here.
CREATE INDEX task_run_events_unique_key ON task_run_events (tenant_id, (detail ->> 'unique_key'))
  WHERE event = 'queued' AND detail ? 'unique_key';
CREATE INDEX platform_task_run_events_unique_key ON platform_task_run_events ((detail ->> 'unique_key'))
  WHERE event = 'queued' AND detail ? 'unique_key';
