// Stage 3 for a group commit (group-commit.ts): several deliveries of one unit, tenant and actor in
// ONE effect transaction, with every guarantee of a delivery that has the transaction to itself:
//
// - Each member's effect, `started` and `succeeded` commit together (the finish writes both rows for
//   every member, `started` at its claim's instant) or not at all. A member whose key the opening
//   claimed fresh has its registration (`running`, attempts + 1, `received` at its receive's instant)
//   in that finish too; a handler that outlives RUNNING_VISIBLE_AFTER_MS or reports progress registers
//   it on its own first, and a member whose effect does not commit registers before it settles.
// - A member whose handler fails, times out or is cancelled rolls back to its own savepoint; its
//   fresh claim is taken back (its ledger row deleted, as a rollback would) and it settles after the
//   commit exactly as a rolled-back attempt does (`started` with `effect: rolled_back`, then
//   `retry_scheduled` or `failed`). Its neighbours commit.
// - After its handler, a member locks its run row and checks it is still `running` (or, registration
//   deferred, still active), before releasing
//   its savepoint: the group's finish is never refused for one run (an operator's cancel that lands
//   later waits for the commit and finds the run succeeded).
// - Nothing cancels a member's statement from outside (the backend is shared with its neighbours):
//   a timeout or a cancel aborts `run.signal`, and the transaction's statement_timeout (the unit's
//   timeout) bounds a statement that ignores it. A group of one has no neighbour: an operator's cancel
//   cancels its statement, as for a delivery alone. A release on shutdown releases the whole group.
// - A member's settings for the rest of the transaction (SET LOCAL) are put back before its savepoint
//   is released (restoreGroupSettings, group-opening.ts): no later member, nor the finish, runs under them.
// - If the group fails as a whole (its finish, its COMMIT: a deferred constraint of one member's write),
//   or a member's statement fails for the group's sake (a deadlock on a lock the group holds for an
//   earlier member, a statement timeout that is not the member's own deadline), the members concerned
//   run again, each alone (rerunAlone): no attempt is charged to a member for its group's failure. A
//   failure alone settles as for any delivery, so the culprit fails its attempt there. A failure of the
//   opening (before any member registered) is retried by the consumer, as one delivery's would be.
import type { TxSql } from '../../../db/client.ts';
import { beginPipelined } from '../../../db/pipelined-begin.ts';
import { RUNNING_VISIBLE_AFTER_MS } from '../../../config/limits.ts';
import { recordRunStarted } from '../../../observe/delivery-metrics.ts';
import { traceStage } from '../../../observe/work-tracing.ts';
import { advisoryKeyOf, claimExistingKey, unclaimFreshKey, type FreshClaim, type GateState } from '../store/idempotency.ts';
import { evictRunStatus } from '../../../kv/run-status-cache.ts';
import { finishDeliveries, lockRunningRun, type RunRow, type RunStatus } from '../store/run-store.ts';
import type { UnitOutcome } from '../../define/unit.ts';
import { actOnClaim, claimInstant } from './claim.ts';
import { actorSettingsOf, ledgerScope, ReleasedOnShutdown, RunMovedOn, type DeliveryContext, type DeliveryResult, type RunnerDeps, type SlotRelease } from './context.ts';
import { EffectStatement } from './cancel-statement.ts';
import { openAttempt, type AttemptLifetime } from './attempt.ts';
import { deliverAlone } from './execution.ts';
import { registerOnItsOwn } from './deferred-registration.ts';
import { callHandler } from './handler-call.ts';
import { groupOpening, openedGroup, restoreGroupSettings } from './group-opening.ts';
import type { Started } from './start-coalescer.ts';
import { register, type Registration } from './registration.ts';
import {
  gateResultOf,
  giveBackUnstarted,
  recordMovedOnAttempt,
  recordResults,
  settleExecuted,
  settleMovedOn,
  settleRegistration,
  settleSuccess,
} from '../complete/settlement.ts';

export interface GroupMember {
  c: DeliveryContext;
  gate: GateState;
  payload: unknown;
  leaseMs: number;
  resolve(result: DeliveryResult): void;
  reject(error: unknown): void;
}

interface MemberState {
  m: GroupMember;
  registration?: Registration;
  registrationError?: { error: unknown };
  /** Its signal, deadline and cancel watch (attempt.ts): from the group's start to its transaction's end. */
  lifetime: AttemptLifetime;
  /** This member's key had no ledger row: claimed by the group's opening. */
  fresh?: FreshClaim;
  /**
   * Set when the opening claimed this member's key fresh: its registration (run `running`, attempts + 1,
   * `received`) is deferred to the group's finish, at this instant of its receive. A handler that
   * outlives RUNNING_VISIBLE_AFTER_MS or reports progress registers it on its own first (`late`).
   */
  deferred?: { receivedAt: string; seenStatus: RunStatus };
  /** The registration of a deferred member written on its own (the start coalescer): the run as started, or null when it was final or gone. */
  late?: Promise<Started>;
  /** The instant of this attempt's `started` once its turn came (for settlement), else null. */
  startedAt: string | null;
  /** `unchecked`: the handler sent no statement, so no savepoint was opened and the run row is not locked before the finish. */
  done?: { outcome: UnitOutcome; replayed: boolean; followUpsSince: number | null; startedToWrite: string | null; unchecked: boolean };
  failure?: { error: unknown; reason: unknown };
  /** Its place in the consumer was given back for the group's commit tail (GroupCommits.enterTail): set on every finishing member when the group entered it. */
  gaveBack?: boolean;
}

type Executing = MemberState & { registration: Extract<Registration, { kind: 'execute' }> };

/**
 * Runs one group (1 to GROUP_COMMIT_MAX_RUNS members) in the unit slot it was given, and settles each
 * member with its own result. `releaseSlot` gives that slot back: when the group enters its commit
 * tail, else once its members have settled. Never rejects.
 */
export async function executeGroup(deps: RunnerDeps, members: GroupMember[], releaseSlot: SlotRelease): Promise<void> {
  const first = members[0]!.c;
  const { scope, tenantId } = first;
  const unit = first.unit!;
  const timeoutMs = unit.timeoutSeconds * 1000;
  const leaseMs = members[0]!.leaseMs;
  // The group's effect transaction while it is open: a release cancels its statement (and a cancel, in a group of one).
  const statement = new EffectStatement(deps.sql, first.log);
  // Alone in its group, the backend is this run's only: an operator's cancel cancels its statement at once.
  const cancelsStatement = members.length === 1;
  const states: MemberState[] = members.map((m) => ({ m, lifetime: openAttempt({ deps, log: m.c.log, statement, cancelsStatement }), startedAt: null }));
  // The opening's settings, and the session's as it read them: put back after each member (restoreGroupSettings).
  const groupSettings = { settings: actorSettingsOf(first.actor), timeoutMs };
  let kept: string[] = [];
  // The group gave its unit slot back when it entered its commit tail.
  let slotGivenBack = false;
  // The executing members' cached statuses, evicted in one DEL once they registered (settlement waits for it).
  let evicted: Promise<void> = Promise.resolve();
  let released = false;
  // Set once this function is past its transaction: beginPipelined gives up on a lost connection
  // while the callback may still be running its members, and such a late group must not enter the tail.
  let ended = false;
  const onRelease = () => {
    released = true;
    for (const s of states) s.lifetime.abort(new ReleasedOnShutdown());
    // The whole group goes back to the queue: cancelling its current statement hurts no neighbour.
    statement.cancel('a released group');
  };
  if (deps.releaseSignal?.aborted) released = true;
  else deps.releaseSignal?.addEventListener('abort', onRelease, { once: true });
  let groupError: { error: unknown } | null = null;
  try {
    // The opening goes out with BEGIN (src/db/pipelined-begin.ts): context, locks, runs, fresh claims (group-opening.ts).
    const opening = {
      scope,
      tenantId,
      ...groupSettings,
      leaseMs,
      members: states.map((s) => ({ runId: s.m.c.envelope.run_id, advisoryKey: advisoryKeyOf(s.m.c.key!), key: s.m.c.key!, fingerprint: s.m.c.fingerprint! })),
    };
    const result = await beginPipelined(
      deps.sql,
      (tx) => groupOpening(tx, opening),
      async (tx, rows, beforeCommit) => {
        const opened = openedGroup(rows);
        statement.open({ pid: opened.pid, xactStart: opened.xactStart });
        kept = opened.kept;
        // A member claimed fresh executes with its registration deferred; the others register as
        // ordinary deliveries do (the start coalescer makes it one statement).
        await Promise.all(
          states.map(async (s, i) => {
            const o = opened.members[i]!;
            if (o.fresh) s.fresh = o.fresh;
            if (o.fresh && o.run && !o.unsent) {
              s.deferred = { receivedAt: opened.receivedAt, seenStatus: o.run.status };
              s.registration = deferredRegistration(o.run, o.scheduledFor, opened.receivedAtMs);
              return;
            }
            try {
              // A member claimed fresh registers at its receive's instant, before its claim's `started`.
              const receivedAt = o.fresh ? opened.receivedAt : undefined;
              s.registration = await traceStage('registration', unit.name, () => register(s.m.c, null, s.m.gate, o.locked, leaseMs, receivedAt)); // span (src/observe)
            } catch (error) {
              s.registrationError = { error };
            }
          }),
        );
        // A fresh claim of a member that will not execute (its run moved on meanwhile) is taken back.
        for (const s of states) {
          if (!s.fresh || s.registration?.kind === 'execute') continue;
          await unclaimFreshKey(tx, ledgerScope(s.m.c), s.m.c.key!);
          s.fresh = undefined;
        }
        const executing = states.filter((s): s is Executing => s.registration?.kind === 'execute');
        for (const s of executing) recordRunStarted(s.registration.run, s.registration.attempt); // svc_run_pickup_seconds (src/observe)
        // The registered members' cached statuses (a deferred member's status changes at the commit, evicted then).
        const registered = executing.filter((s) => !s.deferred);
        if (registered.length > 0) evicted = evictRunStatus(deps.redis, registered.map((s) => s.m.c.envelope.run_id)); // not awaited
        if (executing.length === 0) return null;
        if (released) throw new ReleasedOnShutdown();
        for (const [n, s] of executing.entries()) {
          if (released) throw new ReleasedOnShutdown();
          await executeMember(tx, s, `group_member_${n}`);
        }
        const finishing = executing.filter((s) => s.done && !s.done.replayed);
        if (finishing.length === 0) return null;
        // What is left runs no unit code: the group's unit slot takes the next group, and the finishing
        // members' places in the consumer the next receive, while this group commits. A member that
        // failed or replayed keeps its place until it settles.
        if (!released && !ended && deps.groups.enterTail(unit.name)) {
          slotGivenBack = true;
          releaseSlot();
          for (const s of finishing) {
            s.gaveBack = true;
            s.m.c.port.handlerReturned?.();
          }
        }
        // Sent before COMMIT without waiting; if it fails, beginPipelined throws its error.
        const finished = beforeCommit(
          finishDeliveries(
            tx,
            scope,
            { tenantId, workerInstance: deps.workerInstance, retentionMs: deps.retentionMs },
            finishing.map((s) => ({
              runId: s.registration.run.runId,
              key: s.m.c.key!,
              fingerprint: s.m.c.fingerprint!,
              attempt: s.registration.attempt,
              receiveCount: s.m.c.delivery.receiveCount,
              outcome: s.done!.outcome,
              startedAt: s.done!.startedToWrite,
              leaveClaim: s.done!.unchecked ? s.fresh!.row : null,
              receivedAt: finishRegisters(s)?.receivedAt ?? null,
              seenStatus: finishRegisters(s)?.seenStatus ?? null,
            })),
          ),
        );
        return { finished };
      },
      // The opening claims keys only inside the transaction (group-opening.ts).
      { markTransaction: true },
    );
    if (result) {
      // A member that wrote nothing and whose run moved on before the finish was left out of it.
      const left = await result.finished;
      for (const s of states) {
        if (s.registration?.kind !== 'execute' || !left.has(s.registration.run.runId)) continue;
        s.done = undefined;
        s.failure = { error: new RunMovedOn(), reason: s.lifetime.abortReason };
      }
    }
  } catch (error) {
    groupError = { error };
  }
  ended = true;
  // A failure of the group, not of a member (its COMMIT refused, a deadlock or a statement timeout its
  // transaction caused), must not cost its healthy members an attempt: they run again, each alone,
  // once this transaction has ended (rerunAlone). A member that executed alone in its group had no
  // neighbour to fail it: its failure is its own, as a delivery alone's.
  const executed = states.filter((s) => s.registration?.kind === 'execute').length;
  const reruns = executed > 1 ? states.filter((s) => rerunsAlone(s, groupError, released)) : [];
  const settling = states.filter((s) => !reruns.includes(s));
  // A committed group leaves its tail now. If a member that gave its place back settles as a failed
  // attempt instead (the group failed, or the member was left out of the finish), that settlement
  // writes to the database outside the group's slot: the tail then lasts until every member has
  // settled, so the next group keeps its slot meanwhile. A member run again alone takes a slot of its own.
  const inTail = states.some((s) => s.gaveBack);
  const tailUntilSettled = settling.some((s) => s.gaveBack && (groupError !== null || s.failure !== undefined));
  if (inTail && !tailUntilSettled) deps.groups.leaveTail(unit.name);
  deps.releaseSignal?.removeEventListener('abort', onRelease);
  // Nothing aborts a member from here on: its reason, if any, is what its settlement reads.
  for (const s of states) s.lifetime.end();
  // The committed members' results go to Redis in one pipeline; each member's settlement waits for it.
  const succeeded = groupError ? [] : states.filter((s) => s.registration?.kind === 'execute' && s.done);
  const recorded = recordResults(deps, evicted, succeeded.map((s) => gateResultOf(s.m.c, s.done!.outcome)));
  try {
    try {
      await Promise.all(settling.map((s) => settleMember(s, groupError, leaseMs, evicted, recorded, registerLate)));
    } finally {
      if (tailUntilSettled) deps.groups.leaveTail(unit.name);
    }
    if (reruns.length > 0) {
      // One after another in the group's slot, or, if it was given back for the tail, in one taken again
      // (after the tail was left, so a group that kept its slot for want of the tail can settle and free it).
      const slot = slotGivenBack ? await deps.groups.slotForRerun(first) : releaseSlot;
      try {
        for (const s of reruns) await rerunAlone(s, slot !== null);
      } finally {
        slot?.();
      }
    }
  } finally {
    releaseSlot();
  }

  /**
   * A member whose attempt failed for its group's sake runs again in a transaction of its own
   * (deliverAlone), under the attempt it was registered with, or registered now if its registration
   * was deferred to the group's finish (nothing of it was written): no retry, no second attempt. What
   * happens to it alone settles it as for any delivery, so a member that fails alone too (the culprit)
   * fails that attempt. Given back untouched, or released, when the worker stopped before a slot freed.
   */
  async function rerunAlone(s: MemberState, inSlot: boolean): Promise<void> {
    const { c } = s.m;
    try {
      let registered: Executing['registration'] | undefined;
      if (!s.deferred) {
        registered = s.registration as Executing['registration'];
      } else if (s.late) {
        const started = await s.late;
        // Registered on its own and then settled by someone else (an operator's cancel): that settlement stands.
        if (!started) return await settleMember(s, groupError ?? { error: new RunMovedOn() }, leaseMs, evicted, recorded, registerLate);
        registered = { kind: 'execute', run: started.run, attempt: started.run.attempts, scheduledFor: s.registration!.kind === 'execute' ? s.registration!.scheduledFor : null };
      }
      if (!inSlot) {
        s.m.resolve(registered ? await settleExecuted(c, registered.run, registered.attempt, new ReleasedOnShutdown(), undefined, null, leaseMs) : await giveBackUnstarted(c));
        return;
      }
      c.log.warn({ err: s.failure?.error ?? groupError?.error }, 'its group commit failed as a whole: the run executes again alone, under the same attempt');
      s.m.resolve(await deliverAlone(c, null, s.m.gate, s.m.payload, leaseMs, registered));
    } catch (error) {
      s.m.reject(error);
    }
  }

  /**
   * One member's turn: its claim when not fresh, its handler, and, once the handler has sent a
   * statement, its own savepoint. The savepoint opens just before the handler's first statement (or,
   * for a take-over of an existing key, before its claim): a handler that sends nothing has nothing of
   * its own to roll back, so it pays for no savepoint, and its run row is checked after the last
   * handler, by the group's finish, which leaves it out if the run moved on. A member with a
   * savepoint locks its run row after its handler and releases its savepoint (not awaited: it goes out
   * with the next member's first statement). Kept unreleased, the savepoints would nest and the group's
   * finish would run in the last member's subtransaction; measured, that was no cheaper
   * (bench/results/hot-path-levers-2026-11-24.md).
   */
  async function executeMember(tx: TxSql, s: Executing, savepoint: string): Promise<void> {
    const { c } = s.m;
    const { run, attempt, scheduledFor } = s.registration;
    // Typed by assertion: openSavepoint sets it, and a plain `= null` would narrow it to null below.
    let opened = null as Promise<unknown> | null;
    const openSavepoint = () => {
      opened = tx.unsafe(`SAVEPOINT ${savepoint}`);
      opened.catch(() => {}); // awaited below; sent in the same write as the statement that needed it
    };
    if (!s.fresh) openSavepoint();
    // The deadline and the cancel watch start with the member's turn, not with its group.
    s.lifetime.start({ unit, scope, run: { runId: run.runId, tenantId } });
    // A deferred member whose handler outlives RUNNING_VISIBLE_AFTER_MS is registered on its own, so a
    // poller sees its run `running` while it runs.
    let visible: NodeJS.Timeout | undefined;
    try {
      let startedToWrite: string | null = null;
      if (s.fresh) {
        s.startedAt = startedToWrite = s.fresh.claimedAt;
      } else {
        await opened;
        const claim = await claimExistingKey(tx, ledgerScope(c), c.key!, c.fingerprint!, leaseMs);
        const replay = await actOnClaim(tx, c, run, attempt, claim);
        if (replay) {
          s.done = { outcome: replay.replayed, replayed: true, followUpsSince: null, startedToWrite: null, unchecked: false };
          tx.unsafe(`RELEASE SAVEPOINT ${savepoint}`).catch(() => {}); // a failure aborts the transaction: the COMMIT reports it
          return;
        }
        // As a fresh claim's, this attempt's `started` is written by the group's finish, at this instant.
        s.startedAt = startedToWrite = await claimInstant(tx);
      }
      if (s.deferred) visible = setTimeout(() => void registerLate(s).catch(() => {}), deps.runningVisibleAfterMs ?? RUNNING_VISIBLE_AFTER_MS);
      const { outcome, followUps } = await callHandler(c, tx, {
        run,
        attempt,
        scheduledFor,
        payload: s.m.payload,
        signal: s.lifetime.signal,
        beforeFirstStatement: opened ? undefined : openSavepoint,
        // progress() writes `running` rows of its own: the run must be registered first.
        beforeProgress: s.deferred
          ? async () => {
              if (!(await registerLate(s))) throw new RunMovedOn();
            }
          : undefined,
      });
      clearTimeout(visible);
      // Registered on its own meanwhile: the finish then finds the run `running`, as for any member.
      if (s.late && !(await s.late)) throw new RunMovedOn();
      if (!opened) {
        s.done = { outcome, replayed: false, followUpsSince: followUps.writtenSince(), startedToWrite, unchecked: true };
        return;
      }
      await opened;
      // The handler's settings (SET LOCAL) survive RELEASE SAVEPOINT: put the group's back first, in
      // the same write as the run-row check, so the check, the next member and the finish run under them.
      const restored = restoreGroupSettings(tx, groupSettings, kept);
      restored.catch(() => {}); // awaited below; sent first
      const locked = lockRunningRun(tx, scope, { runId: run.runId, tenantId }, finishRegisters(s)?.seenStatus ?? null);
      locked.catch(() => {});
      await restored;
      if (!(await locked)) throw new RunMovedOn();
      tx.unsafe(`RELEASE SAVEPOINT ${savepoint}`).catch(() => {}); // as above; sent with the next member's first statement
      s.done = { outcome, replayed: false, followUpsSince: followUps.writtenSince(), startedToWrite, unchecked: false };
    } catch (error) {
      s.failure = { error, reason: s.lifetime.abortReason };
      if (released) throw error; // the whole group goes back to the queue
      // This member's effect (and a take-over of its key) rolls back alone; a fresh claim is taken back.
      if (opened) await tx.unsafe(`ROLLBACK TO SAVEPOINT ${savepoint}`);
      if (s.fresh) await unclaimFreshKey(tx, ledgerScope(c), c.key!);
    } finally {
      clearTimeout(visible);
      s.lifetime.stop();
    }
  }

  /**
   * Registers a deferred member on its own, once (the start coalescer: run `running`, attempts + 1,
   * `received` at the instant of its receive), and evicts its cached status. Resolves to the run as
   * started, or null when it was final or gone.
   */
  function registerLate(s: MemberState): Promise<Started> {
    s.late ??= registerOnItsOwn(s.m.c, s.deferred!.receivedAt);
    return s.late;
  }
}

/**
 * Errors of a member's statement that its group causes, not the member: a deadlock or a serialization
 * failure (the group holds every earlier member's locks until its COMMIT), a statement cancelled by
 * the statement timeout without the member's own deadline or cancel behind it (a setting an earlier
 * member left), a transaction or savepoint some earlier statement of the group broke.
 */
const GROUP_CAUSED_CODES = new Set(['40P01', '40001', '57014', '25P02', '3B001']);

function causedByGroup(error: unknown): boolean {
  for (let e = error, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth += 1) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && GROUP_CAUSED_CODES.has(code)) return true;
  }
  return false;
}

/**
 * A member that executed runs again alone (rerunAlone) when its group failed as a whole and it did not
 * fail on its own, or when its own failure was its group's doing (causedByGroup, with no deadline,
 * cancel or release behind it). Never on a release: the whole group goes back to the queue.
 */
function rerunsAlone(s: MemberState, groupError: { error: unknown } | null, released: boolean): boolean {
  if (released || s.registration?.kind !== 'execute') return false;
  if (s.failure) return s.failure.reason === undefined && causedByGroup(s.failure.error);
  return groupError !== null && !(groupError.error instanceof ReleasedOnShutdown);
}

/**
 * The deferred registration the group's finish writes for this member, or undefined when it is written
 * already (registered up front, or on its own once its handler outlived RUNNING_VISIBLE_AFTER_MS or
 * reported progress). Settled once its handler has returned: nothing registers a member after that
 * until its group's transaction has ended.
 */
function finishRegisters(s: MemberState): MemberState['deferred'] {
  return s.late === undefined ? s.deferred : undefined;
}

/**
 * A member whose key the opening claimed fresh, before its registration is written: the run as it will
 * be once registered (`running`, attempts + 1, started now if never before).
 */
function deferredRegistration(run: RunRow, scheduledFor: string | null, receivedAtMs: number): Extract<Registration, { kind: 'execute' }> {
  const attempt = run.attempts + 1;
  const started: RunRow = { ...run, status: 'running', attempts: attempt, startedAt: run.startedAt ?? new Date(receivedAtMs), finishedAt: null };
  return { kind: 'execute', run: started, attempt, scheduledFor };
}

/** Settles one member after the group's transaction ended: `groupError` set means it rolled back as a whole. */
async function settleMember(
  s: MemberState,
  groupError: { error: unknown } | null,
  leaseMs: number,
  evicted: Promise<void>,
  recorded: Promise<void>,
  registerLate: (s: MemberState) => Promise<Started>,
): Promise<void> {
  const { c } = s.m;
  try {
    // A registration that failed (or never ran, the group failing first) is retried by the consumer, as one delivery's would be.
    if (s.registrationError) throw s.registrationError.error;
    if (!s.registration) throw groupError!.error;
    if (s.registration.kind !== 'execute') {
      const registration = s.registration;
      s.m.resolve(await traceStage('settlement', c.envelope.name, () => settleRegistration(c, registration, null))); // span (src/observe)
      return;
    }
    let { run, attempt } = s.registration;
    if (!groupError && s.done) {
      s.m.resolve(await settleSuccess(c, run, s.done, recorded));
      return;
    }
    await evicted;
    // A deferred member whose effect rolled back is registered now, at the instant of its receive, and
    // settles as any rolled-back attempt: the trail shows its `received`, `started` and why it ended.
    if (s.deferred) {
      const started = await registerLate(s);
      if (!started) {
        await recordMovedOnAttempt(c, s.deferred.receivedAt, s.startedAt);
        s.m.resolve(await settleMovedOn(c, 0));
        return;
      }
      run = started.run;
      attempt = started.run.attempts;
    }
    const own = s.failure ?? { error: groupError!.error, reason: s.lifetime.abortReason };
    s.m.resolve(await settleExecuted(c, run, attempt, own.error, own.reason, s.startedAt, leaseMs));
  } catch (error) {
    s.m.reject(error);
  }
}
