-- FROZEN: loaded by migration 0019_work-run-guard-when and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
-- The column guard of the run tables (R-RUN-11), made cheap for the updates it lets through.
--
-- 0016 fired work_guard_run_update() for every UPDATE of a run: a plpgsql call that turns OLD and NEW
-- into jsonb and joins their keys, ~70 µs of PostgreSQL CPU per update, and every run is updated three
-- times on its way (relay, registration, finish). The triggers below keep their names and their
-- function, and gain a WHEN condition: a row comparison of the columns that are fixed after insert,
-- evaluated by the executor without calling plpgsql. An update that changes only progress columns never
-- calls the function; one that changes a fixed column calls it, and it refuses with the same message
-- naming the table and the column(s) as before. Same triggers, same functions, no new object: the
-- whole-database figures of the baseline still hold.
--
-- The fixed columns are listed here, where 0016 derived them (every column but the progress ones). A
-- column added to a run table later must be added to its condition by the migration that adds it;
-- test/integration/work-tables.test.ts changes every column of both tables outside the progress set
-- read from the catalog and expects a refusal, so a forgotten one fails the tests.
CREATE OR REPLACE TRIGGER task_runs_only_progress_columns_change BEFORE UPDATE ON task_runs
  FOR EACH ROW
  WHEN ((OLD.run_id, OLD.tenant_id, OLD.name, OLD.queue, OLD.trigger, OLD.actor_kind, OLD.actor_label,
         OLD.correlation_id, OLD.causation_id, OLD.queued_at)
        IS DISTINCT FROM
        (NEW.run_id, NEW.tenant_id, NEW.name, NEW.queue, NEW.trigger, NEW.actor_kind, NEW.actor_label,
         NEW.correlation_id, NEW.causation_id, NEW.queued_at))
  EXECUTE FUNCTION work_guard_run_update();

CREATE OR REPLACE TRIGGER platform_task_runs_only_progress_columns_change BEFORE UPDATE ON platform_task_runs
  FOR EACH ROW
  WHEN ((OLD.run_id, OLD.name, OLD.queue, OLD.trigger, OLD.actor_kind, OLD.actor_label,
         OLD.correlation_id, OLD.causation_id, OLD.queued_at)
        IS DISTINCT FROM
        (NEW.run_id, NEW.name, NEW.queue, NEW.trigger, NEW.actor_kind, NEW.actor_label,
         NEW.correlation_id, NEW.causation_id, NEW.queued_at))
  EXECUTE FUNCTION work_guard_run_update();
