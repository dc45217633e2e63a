// Finishes of one worker runtime that meet share one statement and one commit, as its registrations
// do (start-coalescer.ts). Only a delivery whose handler sent nothing on its effect transaction comes
// here, with a key new to the ledger (execution.ts): its effect transaction holds its key's and its
// run's locks and nothing else, so its finish (key `completed`, run `succeeded`, `started` and
// `succeeded`) may commit in another transaction while that one stays open, and the finishes of
// several such deliveries commit together. Each run's rows still commit together, and only once its
// handler has returned; what is shared is the statement, its commit and its flush. A delivery whose
// handler wrote goes on finishing in its own effect transaction, with its effect.
//
// A finish comes here only while another finish of this runtime is under way: one alone is cheaper in
// its own effect transaction (the finish and the COMMIT in one round trip), so a quiet worker (one run
// at a time) pays nothing for this. While a statement of a group is out, the group's next finishes wait
// for it and then go together (shared-statements.ts): the busier the worker, the more finishes a commit
// carries.
import type { Logger } from 'pino';
import type { Sql } from '../../../db/client.ts';
import { FINISH_BATCH_MAX_RUNS, SHARED_STATEMENT_LINGER_MS } from '../../../config/limits.ts';
import { finishFreshDeliveries, isFinishTogetherRefused, type ActorSettings, type FreshFinish } from '../store/run-store.ts';
import type { RunScope } from '../store/scope-tables.ts';
import { passingFailure, SharedStatements } from './shared-statements.ts';

interface PendingFinish extends FreshFinish {
  resolve(committed: boolean): void;
}

/** What the finishes of one statement share. */
interface FinishGroup {
  scope: RunScope;
  actor: ActorSettings;
  tenantId: string | null;
  workerInstance: string;
  retentionMs: number;
}

/** The shared statement (run-store.ts's by default; a unit test passes its own). */
export type FinishStatement = typeof finishFreshDeliveries;

export class FinishCoalescer {
  private readonly statements: SharedStatements<FinishGroup, PendingFinish>;

  private readonly sql: Sql;

  private readonly statement: FinishStatement;

  private readonly log: Pick<Logger, 'warn'> | undefined;

  /** Finishes of this runtime under way: from a handler's return to the end of its effect transaction. */
  private underWay = 0;

  /** Whether the shared statement's own failure was reported (once per coalescer: one per process). */
  private reported = false;

  constructor(sql: Sql, log?: Pick<Logger, 'warn'>, statement: FinishStatement = finishFreshDeliveries) {
    this.sql = sql;
    this.log = log;
    this.statement = statement;
    this.statements = new SharedStatements(FINISH_BATCH_MAX_RUNS, (g, items) => this.commit(g, items), SHARED_STATEMENT_LINGER_MS);
  }

  /**
   * A delivery's finish starts (its handler has returned). `shared`: another finish is under way, so
   * this one may go through finish(); call `done` once the delivery's effect transaction has ended,
   * however it ended.
   */
  begin(): { shared: boolean; done(): void } {
    const shared = this.underWay > 0;
    this.underWay += 1;
    let ended = false;
    return {
      shared,
      done: () => {
        if (ended) return;
        ended = true;
        this.underWay -= 1;
      },
    };
  }

  /**
   * Commits the finish with the others of its scope, tenant, actor and worker that meet it. True once
   * committed; false when the shared statement failed (nothing of it committed): the delivery then
   * finishes in its own effect transaction, and meets its own error there. Never rejects.
   */
  finish(
    scope: RunScope,
    actor: ActorSettings,
    group: { tenantId: string | null; workerInstance: string; retentionMs: number },
    finish: FreshFinish,
  ): Promise<boolean> {
    const key = [scope, actor.tenantId, actor.userId, actor.process, group.tenantId ?? '', group.workerInstance, group.retentionMs].join('\u0000');
    // The run ids of one statement must be distinct (the run's execution lock already makes a repeat impossible).
    if (this.statements.waiting(key).some((i) => i.runId === finish.runId)) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      this.statements.add(key, () => ({ scope, actor, ...group }), { ...finish, resolve });
    });
  }

  /** One shared statement: each of its finishes hears whether it committed. */
  private async commit(g: FinishGroup, items: PendingFinish[]): Promise<void> {
    let committed = true;
    try {
      await this.statement(this.sql, g.scope, g.actor, { tenantId: g.tenantId, workerInstance: g.workerInstance, retentionMs: g.retentionMs }, items);
    } catch (error) {
      // Nothing of it committed: each delivery finishes in its own transaction and meets its own error.
      committed = false;
      // A refusal (a run moved on, a key taken) or a failure in passing is a delivery's or the moment's.
      // Anything else is the statement's own: every finish then goes alone, which looks like a slower
      // worker and nothing else, so it is said, once.
      if (!isFinishTogetherRefused(error) && !passingFailure(error) && !this.reported) {
        this.reported = true;
        this.log?.warn(
          { err: error, code: (error as { code?: unknown } | null)?.code, deliveries: items.length },
          'finishes that met could not be committed in one statement; each was finished in its own transaction (said once per process)',
        );
      }
    }
    for (const i of items) i.resolve(committed);
  }
}
