// The contract every system under test implements, so the harness drives all of them through the
// same workloads with the same concurrency. An adapter owns its connections and workers; the harness
// owns the services, the clock, the tallies and the report.
import type { Sql } from '../../src/db/client.ts';
import type { JobPayload, TallyBook } from './tally.ts';

/** (a) burn-down, (b) steady producer, (c) effect: burn-down whose handler writes one row. */
export type Workload = 'burn' | 'steady' | 'effect';

/** A job of the effect workload writes one row to `bench_effects` inside its handler. */
export interface BenchJob extends JobPayload {
  /** 1 when the handler must write its effect row (workload c). */
  e?: 1;
}

export interface SystemContext {
  /** A database of its own on the shared PostgreSQL 18 cluster (created empty by the harness). */
  pgUrl: string;
  /** A small pool on that database for the harness's own checks (counts, ANALYZE). */
  sql: Sql;
  /** A logical database of its own on the shared Redis server. */
  redisUrl: string;
  redisPort: number;
  sqs: { endpoint: string; queueUrlPrefix: string };
  /** Jobs a worker process may run at once: the same for every system. */
  concurrency: number;
  /** Every handler start and return is recorded here. */
  book: TallyBook;
  log: (line: string) => void;
}

export interface SystemAdapter {
  /** The name printed in INTERVAL and SUMMARY lines. */
  readonly name: string;
  /** False for systems that keep jobs without durable commits (BullMQ on Redis by default). */
  readonly durable: boolean;
  /** The settings used, in one line, for the results file. */
  readonly settings: string;
  /**
   * Where the handler runs: `in-process` adapters call book.start/finish themselves; `external`
   * ones run workers in other processes and report starts through `collect()`.
   */
  readonly workers: 'in-process' | 'external';
  /**
   * Jobs per second the system can sustain at most by its own documented design (for example one
   * fetch per polling interval per worker), when that is far below what the machine could do; the
   * harness then shrinks the job count and the steady rate so a round ends in bounded time, and
   * says so in the results. Undefined: no design ceiling.
   */
  designCeiling?(concurrency: number): number;
  /** Installs the schema, creates queues, opens producer connections. Called once. */
  setup(ctx: SystemContext): Promise<void>;
  /** Enqueues a burst in as few calls as the system's bulk API allows (workers not running). */
  enqueueBulk(jobs: readonly BenchJob[]): Promise<void>;
  /** Enqueues one job, as a producer of the steady workload does. */
  enqueueOne(job: BenchJob): Promise<void>;
  /** Runs ANALYZE on the system's tables (a stale planner estimate after a burst is not the system's fault). */
  analyze?(): Promise<void>;
  /** Starts consuming; `effect` tells adapters whose handler shape differs for workload (c). */
  startWorkers(workload: Workload): Promise<void>;
  stopWorkers(): Promise<void>;
  /** How many jobs of the round the system's own store does not yet hold as completed. */
  incomplete(round: number, size: number): Promise<number>;
  /**
   * External adapters: for every job of the round that started, call `record(payload, startedAtMs,
   * executions)`; also returns how many of the round's jobs completed (for the INTERVAL lines).
   */
  collect?(round: number, record?: (job: JobPayload, startedAtMs: number, executions: number) => void): Promise<number>;
  /**
   * External adapters: the instant (epoch ms) the store recorded the round's last completion, which
   * is more exact than the moment the harness's poll noticed it.
   */
  lastCompletion?(round: number): Promise<number>;
  /** Removes every job so the next round starts from an empty store. */
  reset(): Promise<void>;
  /** Process ids (besides PostgreSQL and Redis) whose CPU time belongs to this system. */
  externalPids?(): number[];
  close(): Promise<void>;
}

/** The row a job of the effect workload writes; counted per (system, round, seq) at the end. */
export const EFFECTS_TABLE_DDL = `CREATE TABLE IF NOT EXISTS bench_effects (
  system text NOT NULL,
  round integer NOT NULL,
  seq integer NOT NULL,
  at timestamptz NOT NULL DEFAULT clock_timestamp()
)`;
