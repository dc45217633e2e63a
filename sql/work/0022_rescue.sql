-- FROZEN: loaded by migration 0022_work-rescue and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
-- The rescuer (src/work/rescuer.ts): a run whose message or worker was lost is sent again through its
-- outbox row, with a `rescued` event on its trail saying why. The event lists gain `rescued`; the
-- constraints keep their names, so the whole-database figures of the baseline still hold.
ALTER TABLE task_run_events DROP CONSTRAINT task_run_events_event_known;
ALTER TABLE task_run_events ADD CONSTRAINT task_run_events_event_known CHECK (event IN ('queued', 'sent', 'received', 'started', 'progress',
  'retry_scheduled', 'succeeded', 'failed', 'skipped', 'dead_lettered', 'released_on_shutdown', 'redriven', 'rescued'));
ALTER TABLE platform_task_run_events DROP CONSTRAINT platform_task_run_events_event_known;
ALTER TABLE platform_task_run_events ADD CONSTRAINT platform_task_run_events_event_known CHECK (event IN ('queued', 'sent', 'received', 'started', 'progress',
  'retry_scheduled', 'succeeded', 'failed', 'skipped', 'dead_lettered', 'released_on_shutdown', 'redriven', 'rescued'));

-- The rescuer's scan: active runs by their last change, oldest first. Holds the active runs only (a
-- final run leaves it in the UPDATE that finishes it), never the finished history.
CREATE INDEX task_runs_active_by_change ON task_runs (updated_at, run_id) WHERE status IN ('queued', 'running', 'retrying');
CREATE INDEX platform_task_runs_active_by_change ON platform_task_runs (updated_at, run_id) WHERE status IN ('queued', 'running', 'retrying');
