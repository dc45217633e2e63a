-- FROZEN: loaded by migration 0020_work-actor-checks-when and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
-- The deferred actor checks of the run tables (R-RUN-12), evaluated only for the runs they concern.
--
-- 0016 fires work_require_user_actor() at COMMIT for every inserted task run and
-- work_require_schedule_origin() for every inserted platform run: a plpgsql call per row that returns
-- at once unless the run's actor is a user (resp. the scheduler). A bulk dispatch of 1,000 system runs
-- paid ~13.6 ms of its commit for those calls (bench/results/dispatch-2026-11-23.md). A WHEN condition on
-- the actor kind is evaluated when the row is inserted, without plpgsql, and queues the deferred check
-- only for the runs it concerns. Same names, same functions, same timing (deferred to COMMIT) and the
-- same refusal: the whole-database figures of the baseline still hold. Constraint triggers take no
-- OR REPLACE, so each is dropped and created again in this migration's transaction.
DROP TRIGGER task_runs_user_actor_required ON task_runs;
CREATE CONSTRAINT TRIGGER task_runs_user_actor_required AFTER INSERT ON task_runs
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (NEW.actor_kind = 'user')
  EXECUTE FUNCTION work_require_user_actor();

DROP TRIGGER platform_task_runs_schedule_origin_required ON platform_task_runs;
CREATE CONSTRAINT TRIGGER platform_task_runs_schedule_origin_required AFTER INSERT ON platform_task_runs
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (NEW.actor_kind = 'scheduler')
  EXECUTE FUNCTION work_require_schedule_origin();
