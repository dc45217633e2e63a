-- FROZEN: loaded by migration 0015_idempotency and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
-- Idempotency ledgers. A key is claimed by INSERT ... ON CONFLICT DO NOTHING inside the effect transaction;
-- the row is authoritative, Redis only gates concurrent duplicates and caches the replay.

CREATE TABLE idempotency_keys (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id bigint NOT NULL,
  idempotency_key bytea NOT NULL,
  request_fingerprint bytea NOT NULL,
  status text NOT NULL DEFAULT 'processing',
  attempt integer NOT NULL DEFAULT 1,
  outcome jsonb NOT NULL DEFAULT '{}'::jsonb,
  -- Lease deadline while processing, retention deadline afterwards: always chosen by the caller.
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT idempotency_keys_tenant_fk FOREIGN KEY (tenant_id) REFERENCES tenants (id),
  CONSTRAINT idempotency_keys_tenant_key_unique UNIQUE (tenant_id, idempotency_key),
  CONSTRAINT idempotency_keys_key_is_32_bytes CHECK (octet_length(idempotency_key) = 32),
  CONSTRAINT idempotency_keys_fingerprint_is_32_bytes CHECK (octet_length(request_fingerprint) = 32),
  CONSTRAINT idempotency_keys_status_known CHECK (status IN ('processing', 'completed', 'failed_retryable', 'failed_permanent')),
  CONSTRAINT idempotency_keys_attempt_positive CHECK (attempt > 0),
  CONSTRAINT idempotency_keys_outcome_object_max_4096_bytes CHECK (jsonb_typeof(outcome) = 'object' AND octet_length(outcome::text) <= 4096),
  CONSTRAINT idempotency_keys_outcome_empty_while_processing CHECK (status <> 'processing' OR outcome = '{}'::jsonb)
);

-- maintenance.purge deletes by expiry in batches.
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);

CREATE TABLE platform_idempotency_keys (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  idempotency_key bytea NOT NULL,
  request_fingerprint bytea NOT NULL,
  status text NOT NULL DEFAULT 'processing',
  attempt integer NOT NULL DEFAULT 1,
  outcome jsonb NOT NULL DEFAULT '{}'::jsonb,
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT platform_idempotency_keys_key_unique UNIQUE (idempotency_key),
  CONSTRAINT platform_idempotency_keys_key_is_32_bytes CHECK (octet_length(idempotency_key) = 32),
  CONSTRAINT platform_idempotency_keys_fingerprint_is_32_bytes CHECK (octet_length(request_fingerprint) = 32),
  CONSTRAINT platform_idempotency_keys_status_known CHECK (status IN ('processing', 'completed', 'failed_retryable', 'failed_permanent')),
  CONSTRAINT platform_idempotency_keys_attempt_positive CHECK (attempt > 0),
  CONSTRAINT platform_idempotency_keys_outcome_object_max_4096_bytes CHECK (jsonb_typeof(outcome) = 'object' AND octet_length(outcome::text) <= 4096),
  CONSTRAINT platform_idempotency_keys_outcome_empty_while_processing CHECK (status <> 'processing' OR outcome = '{}'::jsonb)
);

CREATE INDEX platform_idempotency_keys_expires_at ON platform_idempotency_keys (expires_at);
