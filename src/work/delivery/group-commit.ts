// Group commit (the unit option `groupCommit`): the deliveries of one unit, tenant and actor that
// reach execution together (typically the messages of one receive) share ONE effect transaction. Its
// statements are per group, not per run: one opens it (actor context, deadline, every key's advisory
// lock), one registers them (the start coalescer), one claims every fresh key, and one finishes them
// all (ledger `completed`, runs `succeeded`, `started` and `succeeded` rows) before the one COMMIT.
// Each handler runs in its own savepoint, one after another; group-execution.ts says what happens
// when one of them fails. A group of one is an ordinary delivery (execution.ts).
//
// When a group forms, the deliveries still in their checks (stage 1: the Redis gate) are the rest of
// its receive: the group waits for them to reach execution (or to settle otherwise), never for later
// ones, so its size does not depend on how Redis happened to split its replies. The checks are bounded
// (the Redis command timeout), and so is this wait.
import { GROUP_COMMIT_MAX_RUNS } from '../../config/limits.ts';
import { recordGroupCommit } from '../../observe/delivery-metrics.ts';
import type { GateState } from '../idempotency.ts';
import { actorSettingsOf, type DeliveryContext, type DeliveryResult, type Failure } from './context.ts';
import { deliverAlone } from './execution.ts';
import { executeGroup, type GroupMember } from './group-execution.ts';

/** A delivery may join a group when it will claim its key and run its handler: no early failure, a key, a gate it may pass. */
export function groupCommitEligible(c: DeliveryContext, early: Failure | null, gate: GateState): boolean {
  return c.unit?.groupCommit === true && early === null && c.key !== undefined && c.fingerprint !== undefined && (gate.state === 'acquired' || gate.state === 'unavailable');
}

interface Forming {
  key: string;
  members: GroupMember[];
  /** Deliveries that were in their checks when the group formed and have not left them yet. */
  awaited: Set<object>;
}

/** The groups forming now. One per worker runtime (created with its RunnerDeps). */
export class GroupCommits {
  private readonly forming = new Map<string, Forming>();

  private readonly inChecks = new Set<object>();

  private poked = false;

  /** Units with a group in its commit tail (see enterTail). */
  private readonly tails = new Set<string>();

  /** Marks a delivery entering its checks; call the returned function when they end (however they end). */
  enterChecks(): () => void {
    const token = {};
    this.inChecks.add(token);
    return () => {
      this.inChecks.delete(token);
      if (this.forming.size > 0) this.poke();
    };
  }

  /**
   * Executes a delivery in the forming group of its unit, tenant and actor; settles with the
   * delivery's own result. A delivery whose key is already in the group (a duplicate) goes alone: the
   * advisory lock is re-entrant within one transaction, so it could not keep the two apart.
   */
  join(member: { c: DeliveryContext; gate: GateState; payload: unknown; leaseMs: number }): Promise<DeliveryResult> {
    const { c } = member;
    const alone = () => deliverAlone(c, null, member.gate, member.payload, member.leaseMs);
    const settings = actorSettingsOf(c.actor);
    const key = [c.scope, c.unit!.name, c.tenantId ?? '', settings.tenantId, settings.userId, settings.process].join('\u0000');
    const group = this.forming.get(key);
    if (group?.members.some((m) => m.c.key!.equals(c.key!))) return alone();
    return new Promise<DeliveryResult>((resolve, reject) => {
      const joined: GroupMember = { ...member, resolve, reject };
      if (group) {
        group.members.push(joined);
        if (group.members.length >= GROUP_COMMIT_MAX_RUNS) this.start(group);
        return;
      }
      this.forming.set(key, { key, members: [joined], awaited: new Set(this.inChecks) });
      this.poke();
    });
  }

  /**
   * A group whose handlers have all returned enters its commit tail (its finish and COMMIT, no unit
   * code) and gives its members' slots back for it, so the next receive runs while it commits. One
   * group of a unit at a time: false when another is there, and the caller's group then keeps its
   * slots until it settles. This bounds a unit to twice its concurrency in `running` runs and one
   * connection beyond its slots. A true answer must be matched by leaveTail: at the commit, or, when a
   * member given back settles as a failed attempt, once the members have settled.
   */
  enterTail(unit: string): boolean {
    if (this.tails.has(unit)) return false;
    this.tails.add(unit);
    return true;
  }

  /** The group has committed, or its members given back have settled (see enterTail). */
  leaveTail(unit: string): void {
    this.tails.delete(unit);
  }

  /** After the current turn (the deliveries resolved with this one join first), starts every group no longer waiting. */
  private poke(): void {
    if (this.poked) return;
    this.poked = true;
    setImmediate(() => {
      this.poked = false;
      for (const group of [...this.forming.values()]) {
        for (const token of group.awaited) if (!this.inChecks.has(token)) group.awaited.delete(token);
        if (group.awaited.size === 0) this.start(group);
      }
    });
  }

  private start(group: Forming): void {
    if (this.forming.get(group.key) === group) this.forming.delete(group.key);
    const [first, ...rest] = group.members;
    recordGroupCommit(first!.c.unit!.name, group.members.length); // svc_group_commit_runs (src/observe)
    if (rest.length === 0) {
      deliverAlone(first!.c, null, first!.gate, first!.payload, first!.leaseMs).then(first!.resolve, first!.reject);
      return;
    }
    void executeGroup(first!.c.deps, group.members);
  }
}
