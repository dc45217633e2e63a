-- FROZEN: loaded by migration 0021_work-fair-due-order and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
-- The relay's fair pass takes each group's oldest due rows (src/work/tenant-inflight.ts). 0018's
-- pending-by-group indexes hold a group's rows in dispatch (id) order with the delayed ones among them
-- (delaySeconds, a failed send backing off), so every pass read every row not yet due ahead of the due
-- ones. These order a group's pending rows by the instant they become due: the due rows are the front of
-- the range (available_at <= now), and a pass reads only the room it fills. A row dispatched without
-- delay becomes due at its insert instant, so among those the order is still dispatch order. They
-- replace 0018's indexes (same leading columns: the relay's loose scan of the groups uses them too).
-- Indexes only: the whole-database figures of the baseline still hold.
CREATE INDEX outbox_messages_due_by_tenant ON outbox_messages (tenant_id, queue, available_at, id) WHERE sent_at IS NULL;
CREATE INDEX platform_outbox_messages_due_by_queue ON platform_outbox_messages (queue, available_at, id) WHERE sent_at IS NULL;
DROP INDEX outbox_messages_pending_by_tenant;
DROP INDEX platform_outbox_messages_pending_by_queue;
