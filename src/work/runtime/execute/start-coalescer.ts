// Registrations of one event-loop turn share one statement and one commit. The coalescer is state
// of one worker runtime (created with its RunnerDeps), never module state shared across runtimes.
import type { Sql } from '../../../db/client.ts';
import { startDeliveries, startDelivery, type ActorSettings, type StartedDelivery } from '../store/run-store.ts';
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

interface StartGroup {
  scope: RunScope;
  actor: ActorSettings;
  tenantId: string | null;
  workerInstance: string;
  items: PendingStart[];
}

export class StartCoalescer {
  /** Registrations waiting for the end of the current event-loop turn, per shared actor. */
  private readonly groups = new Map<string, StartGroup>();

  private readonly sql: Sql;

  constructor(sql: Sql) {
    this.sql = sql;
  }

  /**
   * Registers a delivery through startDelivery, sharing ONE statement (and one commit) with the other
   * deliveries of the same scope, tenant and actor that reach this point in the same event-loop turn
   * (typically the messages of one receive). Each run's transition still commits with its own
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
    const one = () => startDelivery(this.sql, scope, actor, { ...delivery, tenantId, workerInstance });
    const key = [scope, actor.tenantId, actor.userId, actor.process, tenantId ?? '', workerInstance].join('\u0000');
    const group = this.groups.get(key);
    // The run ids of one statement must be distinct (the advisory lock already makes a repeat impossible).
    if (group?.items.some((i) => i.runId === delivery.runId)) return one();
    return new Promise<Started>((resolve, reject) => {
      const item: PendingStart = { ...delivery, resolve, reject };
      if (group) {
        group.items.push(item);
        return;
      }
      const fresh: StartGroup = { scope, actor, tenantId, workerInstance, items: [item] };
      this.groups.set(key, fresh);
      setImmediate(() => {
        this.groups.delete(key);
        void this.flush(fresh);
      });
    });
  }

  private async flush(g: StartGroup): Promise<void> {
    const alone = (i: PendingStart) =>
      startDelivery(this.sql, g.scope, g.actor, {
        runId: i.runId,
        receiveCount: i.receiveCount,
        messageId: i.messageId,
        receivedAt: i.receivedAt,
        key: i.key,
        tenantId: g.tenantId,
        workerInstance: g.workerInstance,
      }).then(
        i.resolve,
        i.reject,
      );
    if (g.items.length === 1) return alone(g.items[0]!);
    let started: Map<string, Exclude<Started, null>>;
    try {
      started = await startDeliveries(this.sql, g.scope, g.actor, g.tenantId, g.workerInstance, g.items);
    } catch {
      // Nothing of the shared statement committed: each delivery goes alone and meets its own error.
      await Promise.all(g.items.map(alone));
      return;
    }
    for (const i of g.items) i.resolve(started.get(i.runId) ?? null);
  }
}
