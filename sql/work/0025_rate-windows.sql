-- FROZEN: loaded by migration 0025_work-rate-windows and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
-- Rate limits while Redis is down (rateLimit in defineTask; src/work/runtime/execute/rate-window.ts): a
-- delivery of a limited unit admitted by the database records its window in the detail of its
-- `received` trail event ({"rate_window": "<unit>" or "<unit>/<tenant id>"}); the next delivery of the
-- window counts, through these indexes, the `received` events of the window's last `perSeconds`. As for
-- unique dispatch (0023) and serial keys (0024), the record lives on the append-only trail, and only
-- events that carry a window are indexed: a delivery admitted by Redis, or of a unit without a limit,
-- costs nothing here.
CREATE INDEX task_run_events_rate_window ON task_run_events ((detail ->> 'rate_window'), occurred_at)
  WHERE event = 'received' AND detail ? 'rate_window';
CREATE INDEX platform_task_run_events_rate_window ON platform_task_run_events ((detail ->> 'rate_window'), occurred_at)
  WHERE event = 'received' AND detail ? 'rate_window';
