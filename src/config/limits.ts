// Fixed limits of the service, as named constants. Values the spec states as limits but that tests must
// shorten (timings) are configuration instead: see src/config/workers.ts, whose defaults come from here.

/** The four queues, in priority order. Each has a dead-letter queue. */
export const QUEUE_NAMES = ['critical', 'default', 'bulk', 'maintenance'] as const;
export type QueueName = (typeof QUEUE_NAMES)[number];

/** Queue visibility timeout per queue, in seconds (critical 60 s, default 120 s, bulk 15 min, maintenance 5 min). */
export const DEFAULT_VISIBILITY_SECONDS: Readonly<Record<QueueName, number>> = {
  critical: 60,
  default: 120,
  bulk: 900,
  maintenance: 300,
};

/** Receives the runtime allows before a failing message takes the permanent-failure path. */
export const RUNTIME_MAX_RECEIVES = 5;
/** Receive count at which the queue's own redrive moves a message to its dead-letter queue (5 + 2 margin). */
export const NATIVE_REDRIVE_MAX_RECEIVES = 7;

/**
 * Failed relay passes after which a row the queue refuses (a per-entry sender fault of SendMessageBatch,
 * or a message over the size limit) ends its run `failed` with OUTBOX_SEND_FAILED: such a refusal is
 * of the row itself and comes back on every pass. With the relay's step-aside after each refusal (1 s,
 * doubling, at most 60 s) 20 passes take about 15 minutes.
 */
export const DEFAULT_OUTBOX_MAX_ATTEMPTS = 20;
/** Relay outbox sweep interval when no wake signal arrives. */
export const DEFAULT_RELAY_SWEEP_INTERVAL_MS = 5_000;
/** Rescuer (src/work/runtime/maintain/rescuer.ts): pause between passes. */
export const DEFAULT_RESCUE_INTERVAL_MS = 30_000;
/**
 * Rescuer: margin past a run's window before it is sent again. Two minutes: well past a sweep of the
 * relay, a heartbeat and a long poll, so a delivery that is merely slow is never duplicated.
 */
export const DEFAULT_RESCUE_MARGIN_MS = 120_000;
/** Rescuer: rescues of one run before it ends failed (RESCUE_LIMIT). */
export const DEFAULT_RESCUE_MAX = 5;

/** Long-polling wait accepted range and default, in seconds. */
export const SQS_WAIT_SECONDS_MIN = 1;
export const SQS_WAIT_SECONDS_MAX = 20;
export const DEFAULT_SQS_WAIT_SECONDS = 20;
/** Stop budget default; the drain gets the budget minus STOP_BUDGET_RESERVE_MS. */
export const DEFAULT_STOP_TIMEOUT_MS = 30_000;
/** Part of the stop budget kept back to return unfinished messages and close pools after the drain. */
export const STOP_BUDGET_RESERVE_MS = 5_000;
/**
 * Last part of the stop budget, kept for closing the pools: the workers' parts (relay, rescuer,
 * listeners) that have not stopped by then are left to the closing of their connections.
 */
export const STOP_CLOSE_RESERVE_MS = 2_000;

/** Ports. */
export const DEFAULT_API_PORT = 3000;
export const DEFAULT_HEALTH_PORT = 8081;

/** Heartbeat that extends visibility while a message is processed; well under the shortest visibility (60 s). */
export const DEFAULT_HEARTBEAT_INTERVAL_MS = 20_000;
/**
 * SVC_STAGE_TIMEOUT_MS: deadline of each wait of a delivery outside its handler (a connection, BEGIN, the
 * registration, COMMIT...). Far above their usual milliseconds, and under the shortest visibility (60 s).
 */
export const DEFAULT_STAGE_TIMEOUT_MS = 15_000;
/** SVC_RECEIVE_LINGER_MS: 10 ms took the bench's burn-down from 562 to 664–688 runs/s, CPU per run 2.81 to 2.10–2.24 ms (bench/results/hot-path-levers-2026-11-24.md). */
export const DEFAULT_RECEIVE_LINGER_MS = 10;
/**
 * SVC_ACK_LINGER_MS: how long a settled message's delete waits for others to share its
 * DeleteMessageBatch call. 20 ms (against 2) took the steady round at 200 runs/s from 8.4 to 7.7 ms of
 * CPU per run and its p50 from 12.2 to 8.1 ms, because its slot is free meanwhile
 * (bench/results/hot-path-levers-2026-11-24.md).
 */
export const DEFAULT_ACK_LINGER_MS = 20;
/** Exponential backoff of transient failures, through visibility: base x 2^(attempt-1), capped. */
export const DEFAULT_BACKOFF_BASE_MS = 2_000;
export const DEFAULT_BACKOFF_CAP_MS = 300_000;
/** Idempotency lease: the unit timeout plus this margin, so a live holder never loses its lease. */
export const DEFAULT_IDEMPOTENCY_LEASE_MARGIN_MS = 30_000;
/** How long a finished idempotency result is kept for replay before maintenance.purge deletes it. */
export const DEFAULT_IDEMPOTENCY_RETENTION_MS = 7 * 86_400_000;
/**
 * How long the Redis copy of a finished result lives (the fast replay path). Short on purpose: the
 * ledger row is authoritative for the whole retention and a miss falls back to it, so Redis holds
 * about an hour of results instead of a week of every run's.
 */
export const DEFAULT_IDEMPOTENCY_CACHE_TTL_MS = 3_600_000;
/** Sent outbox rows older than this are purged; pending rows never are. */
export const DEFAULT_OUTBOX_RETENTION_MS = 7 * 86_400_000;
/** How often workers re-check that the schema holds their build's newest migration before consuming. */
export const DEFAULT_SCHEMA_POLL_INTERVAL_MS = 5_000;
/** Tick of the in-process (development) scheduler. */
export const DEFAULT_LOCAL_SCHEDULER_TICK_MS = 1_000;

/** Database pool floor for workers: each slot may hold an effect and a registration transaction, plus relay and scheduler. */
export function minimumPoolSize(slots: number): number {
  return 2 * slots + 2;
}

/**
 * Most runs in one group commit (a unit with `groupCommit`): four receives' worth. A group's statements
 * cost PostgreSQL mostly per statement, not per row: 20 runs per group instead of 10 cut the burn-down's
 * CPU per run by 13-15 %, and 40 instead of 20 by a further 11-15 %, at 13-18 % more runs/s
 * (bench/results/hot-path-levers-2026-11-25.md). Its handlers run one
 * after another, which is why the unit option is for handlers that finish in milliseconds.
 */
export const GROUP_COMMIT_MAX_RUNS = 40;
/**
 * Most finishes in one shared statement of a default unit's deliveries whose handlers sent nothing
 * (src/work/runtime/execute/finish-coalescer.ts): as many as group commit's groups, whose statements
 * cost PostgreSQL mostly per statement, not per row.
 */
export const FINISH_BATCH_MAX_RUNS = 40;
/** Most registrations in one shared statement (src/work/runtime/execute/start-coalescer.ts): as many as a finish's. */
export const START_BATCH_MAX_RUNS = 40;
/**
 * How long a worker's next shared registration or finish statement waits for more deliveries once its
 * last one carried several (a busy worker), ms: fewer, larger statements and commits. A quiet worker's
 * statements carry one delivery each and never wait (bench/results/deferred-commit-and-linger-2026-11-29.md).
 */
export const SHARED_STATEMENT_LINGER_MS = 2;
/**
 * A group commit member's registration (`running`, attempts + 1, `received`) goes into the group's
 * finish, one statement and one commit with its effect; a member whose handler runs longer than this,
 * or reports progress, is registered on its own first, so a poller sees its run `running` meanwhile
 * (docs/group-commit.md, "What a poller sees"). Short enough that a poller misses `running` only for runs this short.
 */
export const RUNNING_VISIBLE_AFTER_MS = 100;
/** Run `outcome` and trail `detail`: JSON objects of at most 2048 bytes. */
export const RUN_JSON_MAX_BYTES = 2048;

/** A session credential (Bearer token or cookie value) longer than this many bytes is refused with 401. */
export const MAX_CREDENTIAL_BYTES = 1024;
/** Largest accepted HTTP request body (the spec leaves it open; 1 MiB keeps JSON bodies cheap to parse). */
export const HTTP_BODY_LIMIT_BYTES = 1_048_576;
/** Readiness probes give up on the database or Redis after this long, so /ready answers promptly. */
export const READINESS_PROBE_TIMEOUT_MS = 2_000;

/**
 * SQS refuses a visibility timeout above 12 hours, and more: a message's visibility can reach at most
 * 12 hours past its receipt (a new receive starts a new 12 hours), so a ChangeMessageVisibility of 12 h
 * a moment after the receive is refused too.
 */
export const SQS_MAX_VISIBILITY_SECONDS = 43_200;
/** Largest base or cap a unit's retry policy may name (12 h, the visibility limit). */
export const MAX_BACKOFF_MS = SQS_MAX_VISIBILITY_SECONDS * 1000;

/** Default bound on the answer of one call on the delivery path, past its long poll (SVC_SQS_REQUEST_TIMEOUT_MS). */
export const DEFAULT_SQS_REQUEST_TIMEOUT_MS = 10_000;

/**
 * How soon the relay looks again while due rows wait for room, when no signal comes, ms: the first run
 * to finish wakes it (src/kv/wake.ts signalRoom), and so does a new dispatch's wake signal. bench/fairness.ts at cap 50 on 2 cores: 20 ms
 * gave another tenant p99 204 ms and 3.70 ms CPU per run, 50 ms gave 116 ms and 3.41 ms (fewer, fuller
 * passes); the cap's margin over the running slots must cover one poll of finishes.
 */
export const DEFAULT_CAPPED_POLL_MS = 50;

/**
 * While the cap holds rows back, the least time from one pass to the next when a signal without the
 * `recent` mark (a finish's room signal, a scheduler's or an operator's dispatch) wakes the relay, ms (a
 * dispatch's `recent` signal does not wait): each capped pass counts the group's runs in
 * flight (up to the queue's lone room: 480 for 10 `groupCommit` slots), and at one pass per signal a default unit's burst made a pass for
 * every few finishes. A tenant's room of 40 takes longer than this to drain at any rate seen here.
 */
export const CAPPED_REFILL_MS = 20;

/**
 * CAPPED_REFILL_MS for a pass whose groups with rows pending were all alone on their queues (their lone room):
 * a lone burst's passes, each counting its runs in flight and stamping the runs it sends, come half as
 * often, and the lone room holds twice the cap's margin for the longer gap (loneRoomsOf). The runs of a
 * tenant that arrives meanwhile go out at once (its dispatch's signal ends the wait: relay.ts
 * waitForRefill), and from that pass on the burst is back to the cap and to CAPPED_REFILL_MS.
 */
export const LONE_REFILL_MS = 40;

/**
 * How long a tenant the relay sent rows for still contends for its queue, ms: meanwhile no other tenant
 * of that queue gets the lone room (tenant-inflight.ts loneRoomsOf). Longer than the gaps of a tenant that
 * trickles (one run every 50 ms is held in flight a fraction of the time), short enough that a burst
 * left alone gets the whole of the workers back within a couple of seconds.
 */
export const CONTENTION_MEMORY_MS = 2_000;

/**
 * The lone room's bound in time, ms (src/work/runtime/produce/tenant-inflight.ts): a tenant alone on its
 * queue gets more than SVC_TENANT_INFLIGHT_MAX in flight only while its oldest run sent and still queued
 * was sent less than this long ago. It is about what a newly arriving tenant's first runs wait behind the
 * burst: the number of runs that is depends on the workers' speed, the time does not.
 */
export const LONE_ROOM_MAX_WAIT_MS = 250;

/** Default deadline of each database wait of a relay or rescue pass, ms: far above a healthy pass (a few ms to a few hundred). */
export const DEFAULT_PASS_DEADLINE_MS = 60_000;
