-- FROZEN: loaded by migration 0022_work-rescue and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
-- The rescuer (src/work/runtime/maintain/rescuer.ts): a run whose message or worker was lost is sent
-- again through its outbox row, with a `queued` event on its trail whose detail says why (`rescue`: the
-- how-many-th, `reason`). The trail's twelve event values stay as the spec lists them.

-- The rescuer's scan: active runs by their last change, oldest first. Holds the active runs only (a
-- final run leaves it in the UPDATE that finishes it), never the finished history.
CREATE INDEX task_runs_active_by_change ON task_runs (updated_at, run_id) WHERE status IN ('queued', 'running', 'retrying');
CREATE INDEX platform_task_runs_active_by_change ON platform_task_runs (updated_at, run_id) WHERE status IN ('queued', 'running', 'retrying');
