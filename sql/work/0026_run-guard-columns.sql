-- FROZEN: loaded by migration 0026_work-run-guard-columns and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
-- The column guard of the run tables (R-RUN-11), made a column trigger: it fires only for an UPDATE
-- whose SET list names a fixed column.
--
-- 0019 gave the guard a WHEN condition comparing the fixed columns of OLD and NEW. PostgreSQL reads a
-- trigger's WHEN condition back from its stored text and prepares it once per statement that updates
-- the table (not once per session), and this one, twenty column references, cost about 20-30 µs of
-- PostgreSQL CPU per UPDATE statement (a loop of 20,000 single-row updates: 39-50 µs a statement
-- with it, 18-22 µs with the trigger below), paid by every registration, finish and in-flight stamp.
-- A column trigger (UPDATE OF) is skipped by comparing the statement's target columns with its
-- column list, before any condition is read: an update of progress columns only (every update the
-- runtime makes) reads none. A column can only change if the UPDATE names it (there is no rule, and
-- no other BEFORE trigger that could change NEW on these tables), so the guard still sees every
-- change of a fixed column; the WHEN condition stays, so naming a fixed column without changing it
-- (SET name = name) still does not call the function. Same names, same function, no new object: the
-- whole-database figures of the baseline still hold.
--
-- A column added to a run table later must be added to both lists by the migration that adds it;
-- test/integration/work-tables.test.ts changes every column of both tables outside the progress set
-- read from the catalog and expects a refusal, so a forgotten one fails the tests.
CREATE OR REPLACE TRIGGER task_runs_only_progress_columns_change
  BEFORE UPDATE OF run_id, tenant_id, name, queue, trigger, actor_kind, actor_label, correlation_id, causation_id, queued_at
  ON task_runs
  FOR EACH ROW
  WHEN ((OLD.run_id, OLD.tenant_id, OLD.name, OLD.queue, OLD.trigger, OLD.actor_kind, OLD.actor_label,
         OLD.correlation_id, OLD.causation_id, OLD.queued_at)
        IS DISTINCT FROM
        (NEW.run_id, NEW.tenant_id, NEW.name, NEW.queue, NEW.trigger, NEW.actor_kind, NEW.actor_label,
         NEW.correlation_id, NEW.causation_id, NEW.queued_at))
  EXECUTE FUNCTION work_guard_run_update();

CREATE OR REPLACE TRIGGER platform_task_runs_only_progress_columns_change
  BEFORE UPDATE OF run_id, name, queue, trigger, actor_kind, actor_label, correlation_id, causation_id, queued_at
  ON platform_task_runs
  FOR EACH ROW
  WHEN ((OLD.run_id, OLD.name, OLD.queue, OLD.trigger, OLD.actor_kind, OLD.actor_label,
         OLD.correlation_id, OLD.causation_id, OLD.queued_at)
        IS DISTINCT FROM
        (NEW.run_id, NEW.name, NEW.queue, NEW.trigger, NEW.actor_kind, NEW.actor_label,
         NEW.correlation_id, NEW.causation_id, NEW.queued_at))
  EXECUTE FUNCTION work_guard_run_update();
