-- FROZEN: loaded by migration 0028_work-check-literals-validated and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
-- Validates the constraints 0027 rewrote NOT VALID. VALIDATE CONSTRAINT takes SHARE UPDATE EXCLUSIVE:
-- reads and writes of the table go on while it reads the rows written before 0027 (which obeyed the
-- identical constraints they replace). A migration of its own, so it runs in a transaction of its own,
-- after 0027's has committed and released its locks.

ALTER TABLE idempotency_keys VALIDATE CONSTRAINT idempotency_keys_status_known;
ALTER TABLE platform_idempotency_keys VALIDATE CONSTRAINT platform_idempotency_keys_status_known;
ALTER TABLE outbox_messages VALIDATE CONSTRAINT outbox_messages_queue_known;
ALTER TABLE platform_outbox_messages VALIDATE CONSTRAINT platform_outbox_messages_queue_known;
ALTER TABLE task_runs VALIDATE CONSTRAINT task_runs_actor_kind_known;
ALTER TABLE task_runs VALIDATE CONSTRAINT task_runs_finished_at_iff_final;
ALTER TABLE task_runs VALIDATE CONSTRAINT task_runs_queue_known;
ALTER TABLE task_runs VALIDATE CONSTRAINT task_runs_status_known;
ALTER TABLE task_runs VALIDATE CONSTRAINT task_runs_trigger_known;
ALTER TABLE task_run_events VALIDATE CONSTRAINT task_run_events_event_known;
ALTER TABLE platform_task_runs VALIDATE CONSTRAINT platform_task_runs_actor_kind_known;
ALTER TABLE platform_task_runs VALIDATE CONSTRAINT platform_task_runs_finished_at_iff_final;
ALTER TABLE platform_task_runs VALIDATE CONSTRAINT platform_task_runs_queue_known;
ALTER TABLE platform_task_runs VALIDATE CONSTRAINT platform_task_runs_status_known;
ALTER TABLE platform_task_runs VALIDATE CONSTRAINT platform_task_runs_trigger_known;
ALTER TABLE platform_task_run_events VALIDATE CONSTRAINT platform_task_run_events_event_known;
