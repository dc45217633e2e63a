// Group commit (the unit option `groupCommit`): the deliveries of one unit, tenant and actor that
// reach execution together (the messages of one receive, or of two while the unit's slots are busy)
// share ONE effect transaction. Its statements are per group, not per run: one opens it (actor context,
// deadline, every key's advisory lock, the runs read, every fresh key claimed: group-opening.ts), and one
// finishes them all (runs `succeeded`, ledger `completed`, the `received`, `started` and `succeeded`
// rows) before the one COMMIT. A member whose key was claimed fresh is registered by that finish, with
// its effect; any other registers first, as a lone delivery does (the start coalescer).
// Each handler runs in its own savepoint, one after another; group-execution.ts says what happens
// when one of them fails. A group of one takes the same path: its registration folds into its finish
// too, where a delivery alone (execution.ts) would pay a statement and a commit of its own before its
// claim. That is the usual case under steady traffic, one run at a time.
//
// When a group forms, the deliveries still in their checks (stage 1: the Redis gate) are the rest of
// its receive: the group waits for them to reach execution (or to settle otherwise), never for later
// ones, so its size does not depend on how Redis happened to split its replies. The checks are bounded
// (the Redis command timeout), and so is this wait.
//
// A unit's slots (its `concurrency`) bound the handlers running at once. A group runs its handlers one
// after another, so a group takes ONE slot of its unit, from before its transaction opens until its
// last handler has returned (or, when it cannot enter its commit tail, until it settles); a delivery
// that goes alone takes one too. The consumer holds up to GROUP_COMMIT_MAX_RUNS messages per slot of
// such a unit (worker-runtime.ts), so while a unit's slots are all running groups, the next receive's
// messages are already checked and form the next group, which starts the moment a slot frees. A
// forming group that waits for its slot keeps taking members until it is full. If the worker stops
// meanwhile, its members go back to the queue at once, untouched (nothing of them was written).
import { GROUP_COMMIT_MAX_RUNS } from '../../../config/limits.ts';
import { recordGroupCommit } from '../../../observe/delivery-metrics.ts';
import type { GateState } from '../store/idempotency.ts';
import { SlotLimit } from '../consume/slot-limit.ts';
import type { WorkUnit } from '../../define/unit.ts';
import { actorSettingsOf, type DeliveryContext, type DeliveryPort, type DeliveryResult, type Failure, type GroupCommitPort, type SlotRelease } from './context.ts';
import { deliverAlone } from './execution.ts';
import { executeGroup, type GroupMember } from './group-execution.ts';
import { giveBackUnstarted } from '../complete/settlement.ts';

/** A delivery may join a group when it will claim its key and run its handler: no early failure, a key, a gate it may pass. */
export function groupCommitEligible(c: DeliveryContext, early: Failure | null, gate: GateState): boolean {
  // A delivery whose rate window the database holds runs alone: its registration takes the place (rate-window.ts).
  return (
    c.unit?.groupCommit === true && early === null && c.key !== undefined && c.fingerprint !== undefined && (gate.state === 'acquired' || gate.state === 'unavailable') &&
    c.delivery.rateWindow === undefined
  );
}

interface Forming {
  key: string;
  members: GroupMember[];
  /** Deliveries that were in their checks when the group formed and have not left them yet. */
  awaited: Set<object>;
  /** It has asked for its unit's slot (it waits no more for deliveries in their checks). */
  asked: boolean;
  /** Its slot was not free when it asked: its members wait, kept for their unit's window (keepForUnit). */
  waiting?: boolean;
}

/** Once-only release of a unit slot taken for a group or a lone delivery (a no-op when none was taken). */

export interface GroupCommitsOptions {
  /** The slots of the `groupCommit` units (their `concurrency`), by unit name (a unit absent here runs without one). */
  slots?: ReadonlyMap<string, SlotLimit>;
  /** `tenantConcurrency` of the `groupCommit` units that have one: the most slots one tenant's groups take. */
  tenantShares?: ReadonlyMap<string, number>;
  /** Aborted when the worker stops fetching (or its drain window ends): members still waiting for a slot go back to the queue. */
  stopSignal?: AbortSignal;
}

/** The groups forming now. One per worker runtime (created with its RunnerDeps). */
export class GroupCommits implements GroupCommitPort {
  private readonly forming = new Map<string, Forming>();

  private readonly slots: ReadonlyMap<string, SlotLimit>;

  private readonly stopSignal: AbortSignal | undefined;

  private readonly tenantShares: ReadonlyMap<string, number>;

  /** One tenant's slots of a unit with a tenant share, while any is held or awaited (by unit and tenant). */
  private readonly tenantSlots = new Map<string, SlotLimit>();

  constructor(options: GroupCommitsOptions = {}) {
    this.slots = options.slots ?? new Map();
    this.stopSignal = options.stopSignal;
    this.tenantShares = options.tenantShares ?? new Map();
  }

  /** The slots (`concurrency`) and tenant shares (`tenantConcurrency`) of the `groupCommit` units among these consumed ones. */
  static forUnits(units: Iterable<WorkUnit>, stopSignal: AbortSignal): GroupCommits {
    const slots = new Map<string, SlotLimit>();
    const tenantShares = new Map<string, number>();
    for (const unit of units) {
      if (!unit.groupCommit) continue;
      slots.set(unit.name, new SlotLimit(unit.concurrency));
      if (unit.tenantConcurrency !== null) tenantShares.set(unit.name, unit.tenantConcurrency);
    }
    return new GroupCommits({ slots, tenantShares, stopSignal });
  }

  /**
   * A delivery of a `groupCommit` unit that does not join a group (an early failure, a replay, a held
   * key, a duplicate of a forming group's key) runs alone, in a slot of its unit all the same: the
   * consumer holds up to GROUP_COMMIT_MAX_RUNS messages per slot, and each delivery opens transactions.
   */
  alone(c: DeliveryContext, early: Failure | null, gate: GateState, payload: unknown, leaseMs: number): Promise<DeliveryResult> {
    return this.takeSlot(c, () => keepForUnit(c, leaseMs)).then((release) => (release ? runAlone(c, early, gate, payload, leaseMs, release) : giveBackUnstarted(c)));
  }

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
    const settings = actorSettingsOf(c.actor);
    const key = [c.scope, c.unit!.name, c.tenantId ?? '', settings.tenantId, settings.userId, settings.process].join('\u0000');
    const group = this.forming.get(key);
    if (group?.members.some((m) => m.c.key!.equals(c.key!))) return this.alone(c, null, member.gate, member.payload, member.leaseMs);
    return new Promise<DeliveryResult>((resolve, reject) => {
      const joined: GroupMember = { ...member, resolve, reject };
      if (group) {
        group.members.push(joined);
        if (group.waiting) keepForUnit(c, member.leaseMs);
        if (group.members.length >= GROUP_COMMIT_MAX_RUNS) this.close(group);
        return;
      }
      this.forming.set(key, { key, members: [joined], awaited: new Set(this.inChecks), asked: false });
      this.poke();
    });
  }

  /**
   * A group whose handlers have all returned enters its commit tail (its finish and COMMIT, no unit
   * code) and gives its unit slot and its members' places in the consumer back for it, so the next
   * group runs while it commits. One group of a unit at a time: false when another is there, and the
   * caller's group then keeps its slot and places until it settles. This bounds a unit to one
   * connection beyond its slots. A true answer must be matched by leaveTail: at the commit, or, when a
   * member given back settles as a failed attempt, once the members have settled.
   */
  enterTail(unit: string): boolean {
    if (this.tails.has(unit)) return false;
    this.tails.add(unit);
    return true;
  }

  /**
   * A slot of the unit for members of a group that gave its slot back and must run their handlers
   * again, each alone (group-execution.ts); null when the worker stopped first.
   */
  slotForRerun(c: DeliveryContext): Promise<SlotRelease | null> {
    return this.takeSlot(c);
  }

  /** The group has committed, or its members given back have settled (see enterTail). */
  leaveTail(unit: string): void {
    this.tails.delete(unit);
  }

  /** After the current turn (the deliveries resolved with this one join first), every group no longer waiting for checks asks for its slot. */
  private poke(): void {
    if (this.poked) return;
    this.poked = true;
    setImmediate(() => {
      this.poked = false;
      for (const group of [...this.forming.values()]) {
        for (const token of group.awaited) if (!this.inChecks.has(token)) group.awaited.delete(token);
        if (group.awaited.size === 0) this.ask(group);
      }
    });
  }

  /** A full group takes no more members; it asks for its slot if it has not yet. */
  private close(group: Forming): void {
    if (this.forming.get(group.key) === group) this.forming.delete(group.key);
    this.ask(group);
  }

  /** The group asks for its unit's slot once; until it gets it (and is not full), it keeps taking members. */
  private ask(group: Forming): void {
    if (group.asked) return;
    group.asked = true;
    // Every member shares the unit, tenant and actor: the first one's context stands for the group's.
    const waits = () => {
      group.waiting = true;
      for (const m of group.members) keepForUnit(m.c, m.leaseMs);
    };
    void this.takeSlot(group.members[0]!.c, waits).then((release) => {
      if (this.forming.get(group.key) === group) this.forming.delete(group.key);
      if (release) this.start(group.members, release);
      else this.giveBack(group.members);
    });
  }

  /**
   * A slot of the delivery's unit, and first one of its tenant's share when the unit has one; null when
   * the worker stopped first (nothing is then held). A unit without slots here gets a no-op release.
   */
  private async takeSlot(c: DeliveryContext, onWait?: () => void): Promise<SlotRelease | null> {
    const unit = c.unit!.name;
    const slot = this.slots.get(unit);
    if (!slot) return () => {};
    const share = this.tenantShares.get(unit);
    const tenantKey = share !== undefined && c.envelope.tenant_id !== undefined ? `${unit}\u0000${c.envelope.tenant_id}` : null;
    let tenantSlot: SlotLimit | undefined;
    if (tenantKey) {
      tenantSlot = this.tenantSlots.get(tenantKey) ?? new SlotLimit(share!);
      this.tenantSlots.set(tenantKey, tenantSlot);
      if (tenantSlot.held >= tenantSlot.limit) onWait?.();
      if (!(await tenantSlot.acquire(this.stopSignal))) {
        this.forgetIdle(tenantKey, tenantSlot);
        return null;
      }
    }
    const releaseTenant = () => {
      if (!tenantKey) return;
      tenantSlot!.release();
      this.forgetIdle(tenantKey, tenantSlot!);
    };
    if (slot.held >= slot.limit) onWait?.();
    if (!(await slot.acquire(this.stopSignal))) {
      releaseTenant();
      return null;
    }
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      slot.release();
      releaseTenant();
    };
  }

  /** A tenant's share nobody holds or awaits is dropped, so tenants that come and go leave nothing behind. */
  private forgetIdle(key: string, tenantSlot: SlotLimit): void {
    if (tenantSlot.held === 0 && tenantSlot.waiting === 0 && this.tenantSlots.get(key) === tenantSlot) this.tenantSlots.delete(key);
  }

  private start(members: GroupMember[], release: SlotRelease): void {
    const first = members[0]!;
    // Each member waits for the ones before it: kept for its unit's window (a group of one runs at once).
    if (members.length > 1) for (const m of members) keepForUnit(m.c, m.leaseMs);
    recordGroupCommit(first.c.unit!.name, members.length); // svc_group_commit_runs (src/observe)
    releaseAtSettle(
      members.map((m) => m.c),
      release,
    );
    void executeGroup(first.c.deps, members, release);
  }

  /** The worker stopped before these members' turn: each goes back to the queue untouched. */
  private giveBack(members: GroupMember[]): void {
    for (const m of members) giveBackUnstarted(m.c).then(m.resolve, m.reject);
  }
}

/**
 * A message of a `groupCommit` unit may wait for its unit's slot and then for the members before it in
 * its group, so the workers hold many at once (up to GROUP_COMMIT_MAX_RUNS per slot), each for up to
 * the queue's visibility timeout (15 minutes on `bulk`) if the process dies. Once it waits (its slot not
 * free, or members before it), it is kept for its unit's window instead: its lease (the unit's timeout
 * and the lease margin). The heartbeat keeps a live delivery's message invisible by that much, and a
 * dead worker's messages come back once it has passed (the consumer keeps it above three heartbeats and
 * at most the queue's; the changes of one turn share a call). A group of one whose slot is free runs at
 * once and costs no call.
 */
function keepForUnit(c: DeliveryContext, leaseMs: number): void {
  c.port.keepFor?.(Math.ceil(leaseMs / 1000));
}

/** One delivery with the transaction to itself, in the slot it was given (released once it settles). */
function runAlone(c: DeliveryContext, early: Failure | null, gate: GateState, payload: unknown, leaseMs: number, release: SlotRelease): Promise<DeliveryResult> {
  releaseAtSettle([c], release);
  return deliverAlone(c, early, gate, payload, leaseMs).finally(release);
}

/**
 * Gives the slot back once every one of these deliveries has settled, at its first ack, retry,
 * dead-letter or give-back (its database writes are done by then), so the slot never waits for a
 * delete's linger (consumer.ts). The caller still releases it when they return, in case one never
 * calls its port.
 */
function releaseAtSettle(contexts: DeliveryContext[], release: SlotRelease): void {
  let unsettled = contexts.length;
  for (const c of contexts) {
    const port = c.port;
    let settled = false;
    const settle = () => {
      if (settled) return;
      settled = true;
      unsettled -= 1;
      if (unsettled === 0) release();
    };
    const wrapped: DeliveryPort = {
      ack: () => (settle(), port.ack()),
      retryAfter: (seconds) => (settle(), port.retryAfter(seconds)),
      deadLetter: (context) => (settle(), port.deadLetter(context)),
      giveBack: () => (settle(), port.giveBack()),
      waitTurn: (seconds, turn) => (settle(), port.waitTurn(seconds, turn)),
    };
    if (port.handlerReturned) wrapped.handlerReturned = () => port.handlerReturned!();
    if (port.keepFor) wrapped.keepFor = (seconds) => port.keepFor!(seconds);
    c.port = wrapped;
  }
}
