-- FROZEN: loaded by migration 0016_work and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
-- Background work: the two outboxes, the two run tables, the user actor of tenant runs, the schedule
-- origin of scheduler runs and the two append-only trails. Runs and trails are permanent audit:
-- triggers refuse DELETE/TRUNCATE (and UPDATE outside the progress columns of a run).

-- ───────────────────────── outboxes ─────────────────────────
-- run_id is unique but deliberately not a foreign key: the relay and the purge treat the outbox alone.

CREATE TABLE outbox_messages (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id bigint NOT NULL,
  run_id uuid NOT NULL,
  queue text NOT NULL,
  envelope jsonb NOT NULL,
  available_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  sent_at timestamptz,
  attempts integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT outbox_messages_tenant_fk FOREIGN KEY (tenant_id) REFERENCES tenants (id),
  CONSTRAINT outbox_messages_run_unique UNIQUE (run_id),
  CONSTRAINT outbox_messages_queue_known CHECK (queue IN ('critical', 'default', 'bulk', 'maintenance')),
  CONSTRAINT outbox_messages_envelope_object CHECK (jsonb_typeof(envelope) = 'object'),
  CONSTRAINT outbox_messages_attempts_not_negative CHECK (attempts >= 0)
);

-- The relay reads pending rows, fewest failed attempts first so a stuck row never blocks newer ones.
CREATE INDEX outbox_messages_pending ON outbox_messages (attempts, available_at, id) WHERE sent_at IS NULL;
-- maintenance.purge deletes sent rows older than the retention.
CREATE INDEX outbox_messages_sent_at ON outbox_messages (sent_at) WHERE sent_at IS NOT NULL;

CREATE TABLE platform_outbox_messages (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  run_id uuid NOT NULL,
  queue text NOT NULL,
  envelope jsonb NOT NULL,
  available_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  sent_at timestamptz,
  attempts integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT platform_outbox_messages_run_unique UNIQUE (run_id),
  CONSTRAINT platform_outbox_messages_queue_known CHECK (queue IN ('critical', 'default', 'bulk', 'maintenance')),
  CONSTRAINT platform_outbox_messages_envelope_object CHECK (jsonb_typeof(envelope) = 'object'),
  CONSTRAINT platform_outbox_messages_attempts_not_negative CHECK (attempts >= 0)
);

CREATE INDEX platform_outbox_messages_pending ON platform_outbox_messages (attempts, available_at, id) WHERE sent_at IS NULL;
CREATE INDEX platform_outbox_messages_sent_at ON platform_outbox_messages (sent_at) WHERE sent_at IS NOT NULL;

-- ───────────────────────── tenant runs ─────────────────────────

CREATE TABLE task_runs (
  run_id uuid PRIMARY KEY,
  tenant_id bigint NOT NULL,
  name text NOT NULL,
  queue text NOT NULL,
  trigger text NOT NULL,
  actor_kind text NOT NULL,
  actor_label text NOT NULL,
  correlation_id uuid NOT NULL,
  causation_id uuid NOT NULL,
  status text NOT NULL DEFAULT 'queued',
  attempts integer NOT NULL DEFAULT 0,
  progress smallint NOT NULL DEFAULT 0,
  outcome jsonb NOT NULL DEFAULT '{}'::jsonb,
  queued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  started_at timestamptz,
  finished_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT task_runs_tenant_fk FOREIGN KEY (tenant_id) REFERENCES tenants (id),
  CONSTRAINT task_runs_run_tenant_unique UNIQUE (run_id, tenant_id),
  CONSTRAINT task_runs_name_format CHECK (name ~ '^[a-z][a-z0-9._-]{1,63}$'),
  CONSTRAINT task_runs_queue_known CHECK (queue IN ('critical', 'default', 'bulk', 'maintenance')),
  CONSTRAINT task_runs_trigger_known CHECK (trigger IN ('dispatch', 'event', 'redrive')),
  -- A platform operator as actor does not exist yet: the value is not accepted.
  CONSTRAINT task_runs_actor_kind_known CHECK (actor_kind IN ('user', 'system')),
  CONSTRAINT task_runs_actor_label_length CHECK (char_length(actor_label) BETWEEN 1 AND 128),
  CONSTRAINT task_runs_status_known CHECK (status IN ('queued', 'running', 'retrying', 'succeeded', 'failed', 'skipped')),
  CONSTRAINT task_runs_attempts_not_negative CHECK (attempts >= 0),
  CONSTRAINT task_runs_progress_percent CHECK (progress BETWEEN 0 AND 100),
  CONSTRAINT task_runs_outcome_object_max_2048_bytes CHECK (jsonb_typeof(outcome) = 'object' AND octet_length(outcome::text) <= 2048),
  CONSTRAINT task_runs_finished_at_iff_final CHECK ((status IN ('succeeded', 'failed', 'skipped')) = (finished_at IS NOT NULL))
);

CREATE INDEX task_runs_tenant_queued_at ON task_runs (tenant_id, queued_at);

CREATE TABLE task_run_user_actors (
  run_id uuid PRIMARY KEY,
  tenant_id bigint NOT NULL,
  user_id bigint NOT NULL,
  membership_id bigint NOT NULL,
  CONSTRAINT task_run_user_actors_user_fk FOREIGN KEY (user_id) REFERENCES users (id),
  CONSTRAINT task_run_user_actors_run_fk FOREIGN KEY (run_id, tenant_id) REFERENCES task_runs (run_id, tenant_id),
  CONSTRAINT task_run_user_actors_membership_fk FOREIGN KEY (membership_id, user_id, tenant_id)
    REFERENCES memberships (id, user_id, tenant_id)
);

CREATE TABLE task_run_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  run_id uuid NOT NULL,
  tenant_id bigint NOT NULL,
  event text NOT NULL,
  attempt integer NOT NULL,
  receive_count integer NOT NULL DEFAULT 0,
  queue text NOT NULL,
  worker_instance text NOT NULL,
  error_code text NOT NULL DEFAULT '',
  error_type text NOT NULL DEFAULT '',
  detail jsonb NOT NULL DEFAULT '{}'::jsonb,
  occurred_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT task_run_events_run_fk FOREIGN KEY (run_id, tenant_id) REFERENCES task_runs (run_id, tenant_id),
  CONSTRAINT task_run_events_event_known CHECK (event IN ('queued', 'sent', 'received', 'started', 'progress',
    'retry_scheduled', 'succeeded', 'failed', 'skipped', 'dead_lettered', 'released_on_shutdown', 'redriven')),
  CONSTRAINT task_run_events_attempt_not_negative CHECK (attempt >= 0),
  CONSTRAINT task_run_events_receive_count_not_negative CHECK (receive_count >= 0),
  CONSTRAINT task_run_events_worker_instance_length CHECK (char_length(worker_instance) BETWEEN 1 AND 128),
  CONSTRAINT task_run_events_detail_object_max_2048_bytes CHECK (jsonb_typeof(detail) = 'object' AND octet_length(detail::text) <= 2048)
);

CREATE INDEX task_run_events_run ON task_run_events (run_id, id);

-- ───────────────────────── platform runs ─────────────────────────

CREATE TABLE platform_task_runs (
  run_id uuid PRIMARY KEY,
  name text NOT NULL,
  queue text NOT NULL,
  trigger text NOT NULL,
  actor_kind text NOT NULL,
  actor_label text NOT NULL,
  correlation_id uuid NOT NULL,
  causation_id uuid NOT NULL,
  status text NOT NULL DEFAULT 'queued',
  attempts integer NOT NULL DEFAULT 0,
  progress smallint NOT NULL DEFAULT 0,
  outcome jsonb NOT NULL DEFAULT '{}'::jsonb,
  queued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  started_at timestamptz,
  finished_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT platform_task_runs_name_format CHECK (name ~ '^[a-z][a-z0-9._-]{1,63}$'),
  CONSTRAINT platform_task_runs_queue_known CHECK (queue IN ('critical', 'default', 'bulk', 'maintenance')),
  CONSTRAINT platform_task_runs_trigger_known CHECK (trigger IN ('dispatch', 'event', 'redrive', 'schedule')),
  CONSTRAINT platform_task_runs_actor_kind_known CHECK (actor_kind IN ('system', 'scheduler')),
  CONSTRAINT platform_task_runs_actor_label_length CHECK (char_length(actor_label) BETWEEN 1 AND 128),
  CONSTRAINT platform_task_runs_status_known CHECK (status IN ('queued', 'running', 'retrying', 'succeeded', 'failed', 'skipped')),
  CONSTRAINT platform_task_runs_attempts_not_negative CHECK (attempts >= 0),
  CONSTRAINT platform_task_runs_progress_percent CHECK (progress BETWEEN 0 AND 100),
  CONSTRAINT platform_task_runs_outcome_object_max_2048_bytes CHECK (jsonb_typeof(outcome) = 'object' AND octet_length(outcome::text) <= 2048),
  CONSTRAINT platform_task_runs_finished_at_iff_final CHECK ((status IN ('succeeded', 'failed', 'skipped')) = (finished_at IS NOT NULL)),
  CONSTRAINT platform_task_runs_scheduler_iff_schedule CHECK ((actor_kind = 'scheduler') = (trigger = 'schedule'))
);

CREATE INDEX platform_task_runs_name_queued_at ON platform_task_runs (name, queued_at);

CREATE TABLE platform_task_run_schedule_origins (
  run_id uuid PRIMARY KEY,
  schedule_name text NOT NULL,
  execution_id text NOT NULL,
  scheduled_for timestamptz NOT NULL,
  CONSTRAINT platform_task_run_schedule_origins_run_fk FOREIGN KEY (run_id) REFERENCES platform_task_runs (run_id),
  -- One scheduled moment yields one run.
  CONSTRAINT platform_task_run_schedule_origins_moment_unique UNIQUE (schedule_name, scheduled_for),
  CONSTRAINT platform_task_run_schedule_origins_execution_id_length CHECK (char_length(execution_id) BETWEEN 1 AND 128)
);

CREATE TABLE platform_task_run_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  run_id uuid NOT NULL,
  event text NOT NULL,
  attempt integer NOT NULL,
  receive_count integer NOT NULL DEFAULT 0,
  queue text NOT NULL,
  worker_instance text NOT NULL,
  error_code text NOT NULL DEFAULT '',
  error_type text NOT NULL DEFAULT '',
  detail jsonb NOT NULL DEFAULT '{}'::jsonb,
  occurred_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT platform_task_run_events_run_fk FOREIGN KEY (run_id) REFERENCES platform_task_runs (run_id),
  CONSTRAINT platform_task_run_events_event_known CHECK (event IN ('queued', 'sent', 'received', 'started', 'progress',
    'retry_scheduled', 'succeeded', 'failed', 'skipped', 'dead_lettered', 'released_on_shutdown', 'redriven')),
  CONSTRAINT platform_task_run_events_attempt_not_negative CHECK (attempt >= 0),
  CONSTRAINT platform_task_run_events_receive_count_not_negative CHECK (receive_count >= 0),
  CONSTRAINT platform_task_run_events_worker_instance_length CHECK (char_length(worker_instance) BETWEEN 1 AND 128),
  CONSTRAINT platform_task_run_events_detail_object_max_2048_bytes CHECK (jsonb_typeof(detail) = 'object' AND octet_length(detail::text) <= 2048)
);

CREATE INDEX platform_task_run_events_run ON platform_task_run_events (run_id, id);

-- ───────────────────────── guards ─────────────────────────

-- Statement-level refusal for the append-only tables (UPDATE, DELETE, TRUNCATE) and for DELETE/TRUNCATE
-- on the run tables. The message names the table so an operator knows which audit row they touched.
CREATE FUNCTION work_refuse_trail_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME IN ('task_runs', 'platform_task_runs') THEN
    RAISE EXCEPTION '% is an append-only trail of runs: % is refused, runs are permanent audit and are never deleted',
      TG_TABLE_NAME, TG_OP
      USING ERRCODE = 'restrict_violation', TABLE = TG_TABLE_NAME,
            HINT = 'Record a new status through UPDATE of the status columns instead.';
  END IF;
  RAISE EXCEPTION '% is an append-only trail: it accepts INSERT only (% refused)', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'restrict_violation', TABLE = TG_TABLE_NAME,
          HINT = 'Insert a new row instead of changing or removing an existing one.';
END;
$$;

-- Row-level guard of the run tables: only the progress columns may change after insert.
CREATE FUNCTION work_guard_run_update() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  mutable constant text[] := ARRAY['status', 'attempts', 'progress', 'outcome', 'started_at', 'finished_at', 'updated_at'];
  changed text;
BEGIN
  SELECT string_agg(o.key, ', ' ORDER BY o.key) INTO changed
    FROM jsonb_each(to_jsonb(OLD) - mutable) AS o
    JOIN jsonb_each(to_jsonb(NEW) - mutable) AS n USING (key)
   WHERE o.value IS DISTINCT FROM n.value;
  IF changed IS NOT NULL THEN
    RAISE EXCEPTION '% is an append-only trail of runs: column(s) % cannot change after insert; only status, attempts, progress, outcome, started_at, finished_at and updated_at may change',
      TG_TABLE_NAME, changed
      USING ERRCODE = 'restrict_violation', TABLE = TG_TABLE_NAME;
  END IF;
  RETURN NEW;
END;
$$;

CREATE TRIGGER task_runs_only_progress_columns_change BEFORE UPDATE ON task_runs
  FOR EACH ROW EXECUTE FUNCTION work_guard_run_update();
CREATE TRIGGER task_runs_never_deleted BEFORE DELETE OR TRUNCATE ON task_runs
  FOR EACH STATEMENT EXECUTE FUNCTION work_refuse_trail_change();
CREATE TRIGGER platform_task_runs_only_progress_columns_change BEFORE UPDATE ON platform_task_runs
  FOR EACH ROW EXECUTE FUNCTION work_guard_run_update();
CREATE TRIGGER platform_task_runs_never_deleted BEFORE DELETE OR TRUNCATE ON platform_task_runs
  FOR EACH STATEMENT EXECUTE FUNCTION work_refuse_trail_change();

CREATE TRIGGER task_run_user_actors_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON task_run_user_actors
  FOR EACH STATEMENT EXECUTE FUNCTION work_refuse_trail_change();
CREATE TRIGGER platform_task_run_schedule_origins_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON platform_task_run_schedule_origins
  FOR EACH STATEMENT EXECUTE FUNCTION work_refuse_trail_change();
CREATE TRIGGER task_run_events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON task_run_events
  FOR EACH STATEMENT EXECUTE FUNCTION work_refuse_trail_change();
CREATE TRIGGER platform_task_run_events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON platform_task_run_events
  FOR EACH STATEMENT EXECUTE FUNCTION work_refuse_trail_change();

-- Checked at COMMIT: a user run carries its user actor row; a scheduler run carries its schedule origin.
CREATE FUNCTION work_require_user_actor() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.actor_kind = 'user' AND NOT EXISTS (
    SELECT 1 FROM task_run_user_actors a WHERE a.run_id = NEW.run_id AND a.tenant_id = NEW.tenant_id
  ) THEN
    RAISE EXCEPTION 'task_runs: run % has actor_kind user but no task_run_user_actors row was inserted in the same transaction', NEW.run_id
      USING ERRCODE = 'integrity_constraint_violation', TABLE = 'task_runs', CONSTRAINT = 'task_runs_user_actor_required';
  END IF;
  RETURN NULL;
END;
$$;

CREATE FUNCTION work_require_schedule_origin() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.actor_kind = 'scheduler' AND NOT EXISTS (
    SELECT 1 FROM platform_task_run_schedule_origins o WHERE o.run_id = NEW.run_id
  ) THEN
    RAISE EXCEPTION 'platform_task_runs: run % has actor_kind scheduler but no platform_task_run_schedule_origins row was inserted in the same transaction', NEW.run_id
      USING ERRCODE = 'integrity_constraint_violation', TABLE = 'platform_task_runs', CONSTRAINT = 'platform_task_runs_schedule_origin_required';
  END IF;
  RETURN NULL;
END;
$$;

CREATE CONSTRAINT TRIGGER task_runs_user_actor_required AFTER INSERT ON task_runs
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION work_require_user_actor();
CREATE CONSTRAINT TRIGGER platform_task_runs_schedule_origin_required AFTER INSERT ON platform_task_runs
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION work_require_schedule_origin();
