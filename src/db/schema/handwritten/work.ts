// Typed-query view of the background-work tables (outboxes, runs, actors, origins, trails). The tables
// are created by the frozen hand-written SQL sql/work/0016_work.sql (CHECKs, guard triggers, deferred
// checks); this file is excluded from drizzle-kit generation and kept equal to the database by
// test/integration/work-tables-parity.test.ts.
import { integer, jsonb, pgTable, smallint, text, unique, uuid } from 'drizzle-orm/pg-core';
import { bigintRef, clockInstant, identityId, instant, jsonObject } from '../../columns.ts';

type QueueName = 'critical' | 'default' | 'bulk' | 'maintenance';
type RunStatus = 'queued' | 'running' | 'retrying' | 'succeeded' | 'failed' | 'skipped';
type TrailEvent =
  | 'queued' | 'sent' | 'received' | 'started' | 'progress' | 'retry_scheduled' | 'succeeded' | 'failed'
  | 'skipped' | 'dead_lettered' | 'released_on_shutdown' | 'redriven';

const outboxColumns = () => ({
  id: identityId(),
  runId: uuid('run_id').notNull(),
  queue: text('queue').$type<QueueName>().notNull(),
  envelope: jsonb('envelope').$type<Record<string, unknown>>().notNull(),
  availableAt: clockInstant('available_at'),
  sentAt: instant('sent_at'),
  attempts: integer('attempts').notNull().default(0),
  createdAt: clockInstant('created_at'),
});

export const outboxMessages = pgTable(
  'outbox_messages',
  { ...outboxColumns(), tenantId: bigintRef('tenant_id').notNull() },
  (t) => [unique('outbox_messages_run_unique').on(t.runId)],
);

export const platformOutboxMessages = pgTable('platform_outbox_messages', { ...outboxColumns() }, (t) => [
  unique('platform_outbox_messages_run_unique').on(t.runId),
]);

const runColumns = () => ({
  runId: uuid('run_id').primaryKey(),
  name: text('name').notNull(),
  queue: text('queue').$type<QueueName>().notNull(),
  correlationId: uuid('correlation_id').notNull(),
  causationId: uuid('causation_id').notNull(),
  actorLabel: text('actor_label').notNull(),
  status: text('status').$type<RunStatus>().notNull().default('queued'),
  attempts: integer('attempts').notNull().default(0),
  progress: smallint('progress').notNull().default(0),
  outcome: jsonObject('outcome'),
  queuedAt: clockInstant('queued_at'),
  startedAt: instant('started_at'),
  finishedAt: instant('finished_at'),
  updatedAt: clockInstant('updated_at'),
});

export const taskRuns = pgTable(
  'task_runs',
  {
    ...runColumns(),
    tenantId: bigintRef('tenant_id').notNull(),
    trigger: text('trigger').$type<'dispatch' | 'event' | 'redrive'>().notNull(),
    actorKind: text('actor_kind').$type<'user' | 'system'>().notNull(),
  },
  (t) => [unique('task_runs_run_tenant_unique').on(t.runId, t.tenantId)],
);

export const platformTaskRuns = pgTable('platform_task_runs', {
  ...runColumns(),
  trigger: text('trigger').$type<'dispatch' | 'event' | 'redrive' | 'schedule'>().notNull(),
  actorKind: text('actor_kind').$type<'system' | 'scheduler'>().notNull(),
});

export const taskRunUserActors = pgTable('task_run_user_actors', {
  runId: uuid('run_id').primaryKey(),
  tenantId: bigintRef('tenant_id').notNull(),
  userId: bigintRef('user_id').notNull(),
  membershipId: bigintRef('membership_id').notNull(),
});

export const platformTaskRunScheduleOrigins = pgTable(
  'platform_task_run_schedule_origins',
  {
    runId: uuid('run_id').primaryKey(),
    scheduleName: text('schedule_name').notNull(),
    executionId: text('execution_id').notNull(),
    scheduledFor: instant('scheduled_for').notNull(),
  },
  (t) => [unique('platform_task_run_schedule_origins_moment_unique').on(t.scheduleName, t.scheduledFor)],
);

const trailColumns = () => ({
  id: identityId(),
  runId: uuid('run_id').notNull(),
  event: text('event').$type<TrailEvent>().notNull(),
  attempt: integer('attempt').notNull(),
  receiveCount: integer('receive_count').notNull().default(0),
  queue: text('queue').notNull(),
  workerInstance: text('worker_instance').notNull(),
  errorCode: text('error_code').notNull().default(''),
  errorType: text('error_type').notNull().default(''),
  detail: jsonObject('detail'),
  occurredAt: clockInstant('occurred_at'),
});

export const taskRunEvents = pgTable('task_run_events', { ...trailColumns(), tenantId: bigintRef('tenant_id').notNull() });

export const platformTaskRunEvents = pgTable('platform_task_run_events', { ...trailColumns() });
