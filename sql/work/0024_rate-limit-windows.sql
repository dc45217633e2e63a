-- FROZEN: loaded by migration 0024_work-rate-limit-windows and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
-- Rate limits of work units (`rateLimit` in a unit definition): Redis holds the shared windows
-- (src/kv/rate-limit.ts); this table is where the workers count while Redis is down or slow
-- (src/work/runtime/store/rate-windows.ts). One row per unit, scope key ('' for a limit of the whole
-- unit, the tenant id for a per-tenant one), window length and window start, counted with an UPSERT;
-- rows older than two windows are deleted by the worker that opens a new window of the unit. Not
-- authoritative for anything but the pace of executions: losing it costs at most one window's count.
CREATE TABLE work_rate_windows (
  unit text NOT NULL,
  scope_key text NOT NULL,
  window_ms integer NOT NULL,
  window_start timestamptz NOT NULL,
  admitted integer NOT NULL,
  PRIMARY KEY (unit, scope_key, window_ms, window_start)
);
