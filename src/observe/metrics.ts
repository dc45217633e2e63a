// The service's Prometheus metrics: one registry per process, every metric defined here with its
// labels. Labels only carry bounded values (unit names the build registers, queue names, outcomes,
// route templates, HTTP methods and statuses): never a tenant id, a run id or a raw path, so the
// number of series stays fixed however many tenants and runs there are.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** The registry both /metrics endpoints (workers' health port, API metrics port) expose. */
export const metricsRegistry = new Registry();
// Default process metrics (CPU, memory, event-loop lag, GC, handles), prefixed like ours.
collectDefaultMetrics({ register: metricsRegistry, prefix: 'svc_' });

/** Seconds buckets for runs: from a fast handler (5 ms) to a bulk unit's 15 minutes. */
const RUN_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900];
/** Seconds buckets for HTTP requests. */
const HTTP_SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export const runsFinished = new Counter({
  name: 'svc_runs_finished_total',
  help: 'Runs that reached a final status (succeeded, failed, cancelled by an operator), by unit, queue and status.',
  labelNames: ['unit', 'queue', 'status'] as const,
  registers: [metricsRegistry],
});

export const runDuration = new Histogram({
  name: 'svc_run_duration_seconds',
  help: 'Seconds from a run first starting to its final status, retries included.',
  labelNames: ['unit', 'queue'] as const,
  buckets: RUN_SECONDS_BUCKETS,
  registers: [metricsRegistry],
});

export const runPickup = new Histogram({
  name: 'svc_run_pickup_seconds',
  help: 'Seconds from a run being queued to its first start.',
  labelNames: ['unit', 'queue'] as const,
  buckets: RUN_SECONDS_BUCKETS,
  registers: [metricsRegistry],
});

export const groupCommitRuns = new Histogram({
  name: 'svc_group_commit_runs',
  help: 'Runs per effect transaction of a unit with groupCommit (1: the delivery had its transaction to itself).',
  labelNames: ['unit'] as const,
  // Up to GROUP_COMMIT_MAX_RUNS (40): a full group has a bucket of its own.
  buckets: [1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 35, 39, 40],
  registers: [metricsRegistry],
});

export const deliveries = new Counter({
  name: 'svc_deliveries_total',
  help: 'Queue deliveries by result: succeeded, replayed, retrying, failed, held, released, settled.',
  labelNames: ['unit', 'queue', 'result'] as const,
  registers: [metricsRegistry],
});

export const deliveryStageTimeouts = new Counter({
  name: 'svc_delivery_stage_timeouts_total',
  help: 'Waits of a delivery (checks, reserve, begin, registration, claim, transaction, commit, rollback) that outlived SVC_STAGE_TIMEOUT_MS: the delivery was released.',
  labelNames: ['stage'] as const,
  registers: [metricsRegistry],
});

// The relay's metrics are exported only by a process that relays (exportRelayMetrics): a worker or
// API process that does not relay would otherwise show a backlog of 0 and a relay that sends nothing.
export const outboxPending = new Gauge({
  name: 'svc_outbox_pending',
  help: 'Outbox rows not yet sent (both outboxes), sampled by the relay.',
  registers: [],
});

export const outboxOldestPending = new Gauge({
  name: 'svc_outbox_oldest_pending_seconds',
  help: 'Age in seconds of the oldest unsent outbox row (0 when none), sampled by the relay.',
  registers: [],
});

export const relaySent = new Counter({
  name: 'svc_relay_sent_total',
  help: 'Outbox messages the relay sent to their queue.',
  registers: [],
});

export const relaySendFailures = new Counter({
  name: 'svc_relay_send_failures_total',
  help: 'Outbox messages the relay failed to send (they stay pending and are retried).',
  registers: [],
});

export const queueMessages = new Gauge({
  name: 'svc_queue_messages',
  help: 'Messages per queue and state (visible, in_flight, dead_letter), sampled from the SQS API by the relay.',
  labelNames: ['queue', 'state'] as const,
  registers: [],
});

export const runsRescued = new Counter({
  name: 'svc_runs_rescued_total',
  help: 'Runs the rescuer sent again (or gave up on, reason rescue_limit / payload_gone) because their message or worker was lost, by queue and reason.',
  labelNames: ['queue', 'reason'] as const,
  registers: [metricsRegistry],
});

export const runsOverdue = new Gauge({
  name: 'svc_runs_overdue',
  help: 'Active runs past their due with no live delivery (state sent: sent but not received; running: running without a lease; retrying: retry overdue), by queue and state, sampled by the rescuer.',
  labelNames: ['queue', 'state'] as const,
  registers: [metricsRegistry],
});

export const runsOverdueOldest = new Gauge({
  name: 'svc_runs_overdue_oldest_seconds',
  help: 'Seconds the oldest overdue run has waited since its last progress (0 when none), sampled by the rescuer.',
  registers: [metricsRegistry],
});
export const queueDepthReadErrors = new Counter({
  name: 'svc_queue_depth_read_errors_total',
  help: 'Failed reads of a queue\'s depth (GetQueueAttributes); meanwhile its svc_queue_messages series are removed, not frozen.',
  labelNames: ['queue'] as const,
  registers: [],
});

const RELAY_METRICS = [outboxPending, outboxOldestPending, relaySent, relaySendFailures, queueMessages, queueDepthReadErrors];
let relayMetricsExported = false;

/** Adds the relay's metrics to this process' registry; called where the relay works (idempotent). */
export function exportRelayMetrics(): void {
  if (relayMetricsExported) return;
  relayMetricsExported = true;
  for (const metric of RELAY_METRICS) metricsRegistry.registerMetric(metric);
}

export const redisFallbacks = new Counter({
  name: 'svc_redis_fallbacks_total',
  help: 'Times a Redis operation failed and the service fell back (database ledger, database read, sweep).',
  labelNames: ['operation'] as const,
  registers: [metricsRegistry],
});

export const httpRequests = new Counter({
  name: 'svc_http_requests_total',
  help: 'HTTP requests answered by the API, by route template, method and status.',
  labelNames: ['route', 'method', 'status'] as const,
  registers: [metricsRegistry],
});

export const httpRequestDuration = new Histogram({
  name: 'svc_http_request_duration_seconds',
  help: 'Seconds from receiving an HTTP request to its response, by route template, method and status.',
  labelNames: ['route', 'method', 'status'] as const,
  buckets: HTTP_SECONDS_BUCKETS,
  registers: [metricsRegistry],
});

/** Prometheus text exposition of every metric of this process. */
export async function metricsText(): Promise<{ contentType: string; body: string }> {
  return { contentType: metricsRegistry.contentType, body: await metricsRegistry.metrics() };
}
