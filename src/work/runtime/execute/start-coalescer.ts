// Registrations of one event-loop turn share one statement and one commit, and while a group's
// statement is out, its next registrations wait for it and then go together (shared-statements.ts: the
// messages of one receive reach registration over several turns, as Redis answers their gates). The
// coalescer is state of one worker runtime (created with its RunnerDeps), never module state shared
// across runtimes.
import type { Logger } from 'pino';
import { START_BATCH_MAX_RUNS, SHARED_STATEMENT_LINGER_MS } from '../../../config/limits.ts';
import { passingFailure, SharedStatements } from './shared-statements.ts';
import type { Sql } from '../../../db/client.ts';
import { startDeliveries, startDelivery, type ActorSettings, type DeliveryStart, type StartedDelivery } from '../store/run-store.ts';
import type { RunScope } from '../store/scope-tables.ts';

/** A registration on the usual path (StartedDelivery), or null: the run is missing or final. */
export type Started = StartedDelivery | null;

interface PendingStart {
  runId: string;
  receiveCount: number;
  messageId: string;
  receivedAt?: string | null;
  key?: Buffer;
  resolve(started: Started): void;
  reject(error: unknown): void;
}

/** What the registrations of one statement share. */
interface StartGroup {
  scope: RunScope;
  actor: ActorSettings;
  tenantId: string | null;
  workerInstance: string;
}

/** The two registration statements (run-store.ts's by default; a unit test passes its own). */
export interface StartStatements {
  one(sql: Sql, scope: RunScope, actor: ActorSettings, d: DeliveryStart): Promise<Started>;
  shared: typeof startDeliveries;
}

const STORE_STATEMENTS: StartStatements = { one: startDelivery, shared: startDeliveries };

export class StartCoalescer {
  /** Registrations waiting for their group's next statement, per shared actor. */
  private readonly shared: SharedStatements<StartGroup, PendingStart>;

  private readonly sql: Sql;

  private readonly log: Pick<Logger, 'warn'> | undefined;

  private readonly statements: StartStatements;

  /** Whether the shared statement's own failure was reported (once per coalescer: one per process). */
  private reported = false;

  constructor(sql: Sql, log?: Pick<Logger, 'warn'>, statements: StartStatements = STORE_STATEMENTS) {
    this.sql = sql;
    this.log = log;
    this.statements = statements;
    this.shared = new SharedStatements(START_BATCH_MAX_RUNS, (g, items) => this.flush(g, items), SHARED_STATEMENT_LINGER_MS);
  }

  /**
   * Registers a delivery through startDelivery, sharing ONE statement (and one commit) with the other
   * deliveries of the same scope, tenant and actor that reach this point in the same event-loop turn,
   * or while the group's previous statement is out (typically the messages of one receive, or of the
   * receives of a busy worker). Each run's transition still commits with its own
   * `received` event; only statement and commit overheads are shared. If the shared statement fails,
   * each delivery is retried alone, so one delivery's error never becomes another's.
   */
  start(
    scope: RunScope,
    actor: ActorSettings,
    tenantId: string | null,
    workerInstance: string,
    delivery: { runId: string; receiveCount: number; messageId: string; receivedAt?: string | null; key?: Buffer },
  ): Promise<Started> {
    const one = () => this.statements.one(this.sql, scope, actor, { ...delivery, tenantId, workerInstance });
    const key = [scope, actor.tenantId, actor.userId, actor.process, tenantId ?? '', workerInstance].join('\u0000');
    // The run ids of one statement must be distinct (the advisory lock already makes a repeat impossible).
    if (this.shared.waiting(key).some((i) => i.runId === delivery.runId)) return one();
    return new Promise<Started>((resolve, reject) => {
      this.shared.add(key, () => ({ scope, actor, tenantId, workerInstance }), { ...delivery, resolve, reject });
    });
  }

  /** One statement for these registrations (shared, or one alone), each of them settled. */
  private async flush(g: StartGroup, items: PendingStart[]): Promise<void> {
    const alone = (i: PendingStart) =>
      this.statements.one(this.sql, g.scope, g.actor, {
        runId: i.runId,
        receiveCount: i.receiveCount,
        messageId: i.messageId,
        receivedAt: i.receivedAt,
        key: i.key,
        tenantId: g.tenantId,
        workerInstance: g.workerInstance,
      }).then(
        (started) => {
          i.resolve(started);
          return true;
        },
        (error: unknown) => {
          i.reject(error);
          return false;
        },
      );
    if (items.length === 1) return void (await alone(items[0]!));
    let started: Map<string, Exclude<Started, null>>;
    try {
      started = await this.statements.shared(this.sql, g.scope, g.actor, g.tenantId, g.workerInstance, items);
    } catch (error) {
      // Nothing of the shared statement committed: each delivery goes alone and meets its own error.
      const each = await Promise.all(items.map(alone));
      // Every delivery registered alone: the failure was the shared statement's own, not one delivery's.
      // A passing one (a deadlock, a lost connection, a cancel) is not said; a broken statement is, once:
      // it otherwise looks like a slower worker and nothing else (each delivery one statement and commit).
      if (each.every(Boolean) && !passingFailure(error) && !this.reported) {
        this.reported = true;
        this.log?.warn(
          { err: error, code: (error as { code?: unknown } | null)?.code, deliveries: items.length },
          'deliveries received together could not be registered in one statement; each was registered alone (said once per process)',
        );
      }
      return;
    }
    for (const i of items) i.resolve(started.get(i.runId) ?? null);
  }
}
