-- FROZEN: loaded by migration 0018_work-tenant-fairness and pinned in sql/frozen-sql.json. Never edit after merge; put a change in a new file loaded by a new migration.
-- Fair share between tenants (src/work/tenant-inflight.ts, src/work/relay.ts). Indexes only: no table,
-- trigger or constraint, so the whole-database figures of the baseline still hold.
--
-- In flight = a run whose message the relay has sent and that is not final. The relay stamps
-- updated_at of a still-queued run when it sends its message (and insertRun writes queued_at =
-- updated_at), so "queued with updated_at > queued_at" means "sent, not yet received"; running and
-- retrying runs are in flight by their status. These partial indexes therefore hold only the runs in
-- flight (about SVC_TENANT_INFLIGHT_MAX per tenant and queue), never a tenant's backlog, and the
-- relay counts one group's in-flight runs in O(in flight). A run reaching a final status leaves the
-- index in the same UPDATE that finishes it: nothing else is written per run, and no shared counter
-- row serialises finishes.
CREATE INDEX task_runs_in_flight ON task_runs (tenant_id, queue)
  WHERE status IN ('running', 'retrying') OR (status = 'queued' AND updated_at > queued_at);
CREATE INDEX platform_task_runs_in_flight ON platform_task_runs (queue)
  WHERE status IN ('running', 'retrying') OR (status = 'queued' AND updated_at > queued_at);

-- The relay's fair pass walks the pending rows group by group (tenant and queue; platform: queue) in
-- dispatch order: the groups by a loose index scan, then the oldest rows of each group.
CREATE INDEX outbox_messages_pending_by_tenant ON outbox_messages (tenant_id, queue, id) WHERE sent_at IS NULL;
CREATE INDEX platform_outbox_messages_pending_by_queue ON platform_outbox_messages (queue, id) WHERE sent_at IS NULL;
