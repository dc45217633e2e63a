-- FROZEN: loaded by migration 0027_work-check-literals and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
-- The CHECK constraints of the work tables that name a list of values (status, queue, trigger, actor
-- kind, event), rewritten with the list as one array constant: `x = ANY ('{a,b}'::text[])` where 0015
-- and 0016 wrote `x IN ('a', 'b')`, which PostgreSQL stores as an ARRAY[...] expression of one constant
-- per value. Same names, same values, same refusals (SQLSTATE 23514 naming the constraint); the
-- whole-database figures of the baseline still hold.
--
-- Why: PostgreSQL reads a table's CHECK constraints back from their stored text and prepares them once
-- per statement that writes the table (not once per session), and an ARRAY[...] of constants is both
-- long to read (a node per value) and folded into an array again each time. Measured on PostgreSQL 18
-- (loops of 30,000 single-row inserts): a task_runs insert 53-68 µs with the old forms, 42-45 µs with
-- these (11 µs without any CHECK); every registration, finish, dispatch and relay pass writes these tables.
--
-- NOT VALID here, so this migration holds its table locks only for the catalog change: the new
-- constraints bind every row written from now on, and the rows already there obeyed the identical
-- constraints they replace. 0028 validates them, which reads each table without blocking its writes.

ALTER TABLE idempotency_keys
  DROP CONSTRAINT idempotency_keys_status_known, ADD CONSTRAINT idempotency_keys_status_known CHECK ((status = ANY ('{processing,completed,failed_retryable,failed_permanent}'::text[]))) NOT VALID;

ALTER TABLE platform_idempotency_keys
  DROP CONSTRAINT platform_idempotency_keys_status_known, ADD CONSTRAINT platform_idempotency_keys_status_known CHECK ((status = ANY ('{processing,completed,failed_retryable,failed_permanent}'::text[]))) NOT VALID;

ALTER TABLE outbox_messages
  DROP CONSTRAINT outbox_messages_queue_known, ADD CONSTRAINT outbox_messages_queue_known CHECK ((queue = ANY ('{critical,default,bulk,maintenance}'::text[]))) NOT VALID;

ALTER TABLE platform_outbox_messages
  DROP CONSTRAINT platform_outbox_messages_queue_known, ADD CONSTRAINT platform_outbox_messages_queue_known CHECK ((queue = ANY ('{critical,default,bulk,maintenance}'::text[]))) NOT VALID;

ALTER TABLE task_runs
  DROP CONSTRAINT task_runs_actor_kind_known, ADD CONSTRAINT task_runs_actor_kind_known CHECK ((actor_kind = ANY ('{user,system}'::text[]))) NOT VALID,
  DROP CONSTRAINT task_runs_finished_at_iff_final, ADD CONSTRAINT task_runs_finished_at_iff_final CHECK (((status = ANY ('{succeeded,failed,skipped}'::text[])) = (finished_at IS NOT NULL))) NOT VALID,
  DROP CONSTRAINT task_runs_queue_known, ADD CONSTRAINT task_runs_queue_known CHECK ((queue = ANY ('{critical,default,bulk,maintenance}'::text[]))) NOT VALID,
  DROP CONSTRAINT task_runs_status_known, ADD CONSTRAINT task_runs_status_known CHECK ((status = ANY ('{queued,running,retrying,succeeded,failed,skipped}'::text[]))) NOT VALID,
  DROP CONSTRAINT task_runs_trigger_known, ADD CONSTRAINT task_runs_trigger_known CHECK ((trigger = ANY ('{dispatch,event,redrive}'::text[]))) NOT VALID;

ALTER TABLE task_run_events
  DROP CONSTRAINT task_run_events_event_known, ADD CONSTRAINT task_run_events_event_known CHECK ((event = ANY ('{queued,sent,received,started,progress,retry_scheduled,succeeded,failed,skipped,dead_lettered,released_on_shutdown,redriven}'::text[]))) NOT VALID;

ALTER TABLE platform_task_runs
  DROP CONSTRAINT platform_task_runs_actor_kind_known, ADD CONSTRAINT platform_task_runs_actor_kind_known CHECK ((actor_kind = ANY ('{system,scheduler}'::text[]))) NOT VALID,
  DROP CONSTRAINT platform_task_runs_finished_at_iff_final, ADD CONSTRAINT platform_task_runs_finished_at_iff_final CHECK (((status = ANY ('{succeeded,failed,skipped}'::text[])) = (finished_at IS NOT NULL))) NOT VALID,
  DROP CONSTRAINT platform_task_runs_queue_known, ADD CONSTRAINT platform_task_runs_queue_known CHECK ((queue = ANY ('{critical,default,bulk,maintenance}'::text[]))) NOT VALID,
  DROP CONSTRAINT platform_task_runs_status_known, ADD CONSTRAINT platform_task_runs_status_known CHECK ((status = ANY ('{queued,running,retrying,succeeded,failed,skipped}'::text[]))) NOT VALID,
  DROP CONSTRAINT platform_task_runs_trigger_known, ADD CONSTRAINT platform_task_runs_trigger_known CHECK ((trigger = ANY ('{dispatch,event,redrive,schedule}'::text[]))) NOT VALID;

ALTER TABLE platform_task_run_events
  DROP CONSTRAINT platform_task_run_events_event_known, ADD CONSTRAINT platform_task_run_events_event_known CHECK ((event = ANY ('{queued,sent,received,started,progress,retry_scheduled,succeeded,failed,skipped,dead_lettered,released_on_shutdown,redriven}'::text[]))) NOT VALID;
