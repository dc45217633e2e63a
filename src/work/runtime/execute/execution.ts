// Stage 3 of a delivery: execution. Opens the effect transaction (actor context, statement deadline,
// the key's advisory lock, the run's execution lock), registers the delivery, runs the handler and, in
// the same transaction, claims the key in the ledger and records its success: a key new to the ledger
// in the finish statement itself, one already there before the handler. The usual delivery's
// registration is deferred to that finish (deferred-registration.ts). Every way out other than
// success goes to the settlement stage. A handler that sent nothing on the effect transaction may have
// its finish committed with other runs' instead, while this transaction holds the locks (finish-coalescer.ts).
import { recordRunStarted } from '../../../observe/delivery-metrics.ts';
import { traceStage } from '../../../observe/work-tracing.ts';
import type { TxSql } from '../../../db/client.ts';
import type postgres from 'postgres';
import { beginPipelinedAll, endWithNextBegin } from '../../../db/pipelined-begin.ts';
import { boundStage, isStageTimeout } from '../../../db/stage-deadline.ts';
import { advisoryKeyOf, claimKeyAndStart, tryLockRunExecution, type GateState } from '../store/idempotency.ts';
import { finishDelivery, isKeyClaimedMeanwhile, isRunMovedOnRefusal } from '../store/run-store.ts';
import { RUNNING_VISIBLE_AFTER_MS } from '../../../config/limits.ts';
import { TransientFailure } from '../../define/unit-errors.ts';
import { EffectStatement } from './cancel-statement.ts';
import { openAttempt } from './attempt.ts';
import {
  actorSettingsOf,
  evict,
  ledgerScope,
  trail,
  releaseOwnGate,
  ReleasedOnShutdown,
  RunMovedOn,
  type DeliveryContext,
  type DeliveryResult,
  type Failure,
} from './context.ts';
import { register, type Registration } from './registration.ts';
import { deferralRead, deferredRegistrationOf, registerOnItsOwn, type DeferralRow, type Deferred } from './deferred-registration.ts';
import type { Started } from './start-coalescer.ts';
import { actOnClaim, startNow } from './claim.ts';
import { callHandler } from './handler-call.ts';
import { SERIAL_WAIT_HERE_AHEAD, SerialTurnNotYet, serialTurnColumn, serialTurnId, serialTurnNotice, serialTurnOf } from './serial-turn.ts';
import { gateResultOf, giveBackUnstarted, recordMovedOnAttempt, recordResults, settleExecuted, settleMovedOn, settleRegistration, settleSuccess } from '../complete/settlement.ts';

type PendingRows = postgres.PendingQuery<postgres.Row[]>;

function keyClaimedMeanwhile(): TransientFailure {
  return new TransientFailure(
    'IDEMPOTENCY_KEY_CLAIMED_MEANWHILE',
    'another execution claimed the idempotency key while this one ran: its effect was rolled back, and the next delivery reads what that execution recorded',
  );
}

/** The effect transaction's opening row. */
interface Opened {
  locked: boolean;
  /** 0 when the run may execute now, else how many earlier runs of its serial key are still active (serial-turn.ts). */
  serial_wait: number;
  pid: number;
  xact_start: string;
  /** This transaction holds the run's execution lock (tryLockRunExecution); false also when none was tried. */
  run_locked: boolean;
}

/**
 * Opens the effect transaction first and takes the key's advisory lock in it, then registers the
 * delivery in its own transaction, then runs the handler in the effect transaction. Holding the lock
 * from before registration to the end of the effect leaves no window in which a concurrent duplicate
 * could register a second attempt (each slot holds at most these two transactions at once).
 */
export async function deliverAlone(
  c: DeliveryContext,
  early: Failure | null,
  gate: GateState,
  payload: unknown,
  leaseMs: number,
  /** The delivery is registered already (a group member re-run alone, group-execution.ts): not registered again. */
  registered?: Extract<Registration, { kind: 'execute' }>,
): Promise<DeliveryResult> {
  const { deps, scope, tenantId } = c;
  const unit = c.unit;
  const timeoutMs = (unit?.timeoutSeconds ?? 60) * 1000;
  // The effect transaction's backend while it is open: a release or a cancel cancels its current
  // statement, or the ROLLBACK would queue behind a handler statement (pg_sleep, a lock wait) past the stop budget.
  const statement = new EffectStatement(deps.sql, c.log);
  // Aborted by the deadline, a release on shutdown or an operator's cancel (attempt.ts); callHandler
  // closes run.transaction on abort, before the rollback is sent, so no late statement reaches the database.
  const lifetime = openAttempt({ deps, log: c.log, statement, cancelsStatement: true, releaseSignal: deps.releaseSignal });
  let registration: Registration | undefined;
  let evicted: Promise<void> = Promise.resolve();
  let startedAt: string | null = null;
  let followUpsSince: number | null = null; // run.dispatch/run.publish: their rows commit with the effect
  // The finish went out with others' (finish-coalescer.ts) and committed: the effect transaction held
  // only this run's locks, and whatever becomes of it now, the run has succeeded.
  let finishedTogether: { outcome: Record<string, unknown> } | null = null;
  let finishing: { shared: boolean; done(): void } | undefined;
  const needsLock = Boolean(c.key) && !early && gate.state !== 'held' && gate.state !== 'completed';
  // Runs in order per key (serial-turn.ts): a delivery that will execute waits for its key's turn.
  const serial = early || registered ? null : serialTurnOf(unit, scope, tenantId, c.envelope.run_id, c.envelope.payload); // the payload as dispatched, as its key was read then
  // The usual delivery may leave its registration to its finish (deferred-registration.ts); a delivery
  // whose rate window the database holds takes its place at registration, one in a serial line
  // registers as its turn comes.
  const deferrable = needsLock && !serial && !registered && c.fingerprint !== undefined && !c.delivery.rateWindow && (gate.state === 'acquired' || gate.state === 'unavailable');
  let deferred: Deferred | null = null;
  // A deferred registration written on its own (registerOnItsOwn), once: by the 100 ms rule, a progress report or the settlement.
  let late: Promise<Started> | undefined;
  const registerLate = () => (late ??= registerOnItsOwn(c, deferred!.receivedAt));
  // The deferred registration was written on its own (a long handler, progress): the finish finds the run `running`.
  let registeredLate = false;
  try {
    // The opening statement goes out with BEGIN (src/db/pipelined-begin.ts). It is harmless outside a
    // transaction: settings local to the transaction, and a lock held for the transaction. It applies
    // the actor context (as inUnitOfWork), the deadline of every statement of this transaction (a
    // handler statement cannot outlive the unit's timeout even if the handler ignores the signal) and
    // takes the key's advisory lock. Behind it, in the same write, the read that decides whether the
    // registration is deferred to the finish (deferred-registration.ts: after the locks, in a snapshot of its own).
    const settings = actorSettingsOf(c.actor);
    const opening = (tx: TxSql) =>
      tx<Opened[]>`
        SELECT set_config('app.tenant_id', ${settings.tenantId}, true), set_config('app.user_id', ${settings.userId}, true),
               set_config('app.process', ${settings.process}, true), set_config('statement_timeout', ${String(timeoutMs)}, true),
               ${needsLock ? tx`pg_try_advisory_xact_lock(${advisoryKeyOf(c.key!)}::bigint)` : tx`true`} AS locked,
               ${needsLock ? tryLockRunExecution(tx, c.envelope.run_id) : tx`false`} AS run_locked,
               ${serial ? serialTurnColumn(tx, serial) : tx`0 AS serial_wait`},
               pg_backend_pid() AS pid, (extract(epoch FROM now()) * 1000000)::int8::text AS xact_start` as unknown as PendingRows;
    const result = await beginPipelinedAll(
      deps.sql,
      (tx) => (deferrable ? [opening(tx), deferralRead(tx, c) as unknown as PendingRows] : [opening(tx)]),
      (tx, [opened, read], beforeCommit) => effect(tx, opened![0] as unknown as Opened, read?.[0] as DeferralRow | undefined, beforeCommit),
    );
    async function effect(tx: TxSql, opened: Opened, read: DeferralRow | undefined, beforeCommit: <S>(statement: Promise<S>) => Promise<S>) {
      // Not its turn: rolled back before anything is registered; the message waits (below).
      if (opened.serial_wait > 0) throw new SerialTurnNotYet(opened.serial_wait);
      statement.open({ pid: opened.pid, xactStart: opened.xact_start });
      // Bounded (SVC_STAGE_TIMEOUT_MS): a registration that answers after its deadline may have committed
      // `received` and `running`; the message comes back and the next delivery registers again.
      const deferral = deferrable ? deferredRegistrationOf(opened, read) : null;
      if (deferral) deferred = deferral.deferred;
      registration =
        deferral?.registration ??
        registered ??
        (await traceStage('registration', c.envelope.name, () => boundStage('registration', register(c, early, gate, opened.locked, leaseMs)))); // span (src/observe)
      if (registration.kind !== 'execute') return null;
      recordRunStarted(registration.run, registration.attempt); // svc_run_pickup_seconds (src/observe)
      // Not awaited: later Redis commands of this delivery go down the same connection after it. A
      // deferred registration changes the run's status only at the commit, which evicts it then.
      if (!deferred) evicted = evict(c);
      const { run, attempt, scheduledFor } = registration;
      // The deadline starts with the execution, as the cancel watch and the release do.
      lifetime.start({ unit: unit!, scope, run: { runId: run.runId, tenantId } });
      lifetime.signal.throwIfAborted();
      // The usual delivery: its key has no ledger row (as the registration read it, after this
      // transaction took the key's lock), so it is claimed by the finish, which inserts it `completed`
      // with the effect (and `started`, at the `received` instant): no statement before the handler.
      // It also needs the run's execution lock, the only sign of its execution until then for a
      // delivery that will not execute (registration.ts executingElsewhere); without it (held by such a
      // delivery, or by a run whose id hashes alike) `started` is written before the handler, whose
      // row's lock on the run tells the same. A row written without the key's lock (a failed attempt's
      // settlement, failKey) makes the finish refuse, and nothing commits.
      const fresh =
        registration.keyed === false && opened.run_locked && registration.receivedAt !== undefined && !registered
          ? { fingerprint: c.fingerprint!, startedAt: registration.receivedAt }
          : undefined;
      // Written ahead of the finish only if the handler reports progress, whose row must follow it.
      let startedWritten = false;
      const writeStarted = async () => {
        if (!fresh || startedWritten) return;
        startedWritten = true;
        await trail(tx, c, run, 'started', attempt, { occurredAt: fresh.startedAt });
      };
      // A key already in the ledger is claimed now. The claim's statements are bounded as one stage; past
      // the deadline the effect transaction is abandoned (rolled back), nothing of it committed.
      const claimed = fresh ? { replay: null, startedAt: fresh.startedAt } : await boundStage(
        'claim',
        (async () => {
          const claim = await claimKeyAndStart(tx, ledgerScope(c), c.key!, c.fingerprint!, leaseMs, {
            runId: run.runId,
            attempt,
            receiveCount: c.delivery.receiveCount,
            queue: run.queue,
            workerInstance: deps.workerInstance,
          });
          const replay = await actOnClaim(tx, c, run, attempt, claim);
          if (replay) return { replay, startedAt: null };
          // `started` was written with a fresh claim; a claim that took over an existing row writes it now.
          return { replay: null, startedAt: claim.startedAt ?? (await startNow(tx, c, run, attempt)) };
        })(),
      );
      if (claimed.replay) return { replayed: true, outcome: claimed.replay.replayed };
      startedAt = claimed.startedAt;
      let wrote = false; // the handler (or a follow-up) sent a statement on the effect transaction
      // A deferred registration is written on its own once the handler outlives RUNNING_VISIBLE_AFTER_MS
      // (a poller then sees the run `running` while it runs) or before its first progress report.
      let registering: Promise<void> | undefined;
      const registerNow = () =>
        (registering ??= (async () => {
          if (!(await traceStage('registration', c.envelope.name, () => boundStage('registration', registerLate())))) throw new RunMovedOn(); // span (src/observe)
          registeredLate = true;
        })());
      const visible = deferred ? setTimeout(() => void registerNow().catch(() => {}), deps.runningVisibleAfterMs ?? RUNNING_VISIBLE_AFTER_MS) : undefined;
      let outcome: Record<string, unknown>;
      let followUps: Awaited<ReturnType<typeof callHandler>>['followUps'];
      try {
        ({ outcome, followUps } = await callHandler(c, tx, {
          run, attempt, scheduledFor, payload, signal: lifetime.signal,
          beforeProgress: fresh && (deferred ? async () => { await registerNow(); await writeStarted(); } : writeStarted),
          beforeFirstStatement: () => {
            wrote = true;
          },
        }));
      } finally {
        clearTimeout(visible);
      }
      // Registered on its own meanwhile: the finish then finds the run `running`, as for any delivery.
      if (registering) await registering;
      const finishRegisters = deferred && !registeredLate ? deferred : null;
      followUpsSince = followUps.writtenSince();
      finishing = deps.finishes.begin();
      // Nothing to commit but the finish, while another finish is under way: it goes with the others
      // (one statement and one flushed commit for all), this transaction still holding the locks.
      if (fresh && !startedWritten && !wrote && !serial && finishing.shared) {
        const together = await boundStage(
          'finish',
          deps.finishes.finish(scope, settings, { tenantId, workerInstance: deps.workerInstance, retentionMs: deps.retentionMs }, {
            runId: run.runId,
            attempt,
            receiveCount: c.delivery.receiveCount,
            queue: run.queue,
            outcome,
            key: c.key!,
            fingerprint: fresh.fingerprint,
            startedAt: fresh.startedAt,
            deferred: finishRegisters,
          }),
        );
        if (together) {
          finishedTogether = { outcome };
          // Only the locks are left to let go of: the COMMIT rides with the pool's next BEGIN (pipelined-begin.ts).
          endWithNextBegin(tx);
          return { replayed: false, outcome };
        }
      }
      // Ledger `completed`, run `succeeded`, trail `succeeded`: one statement, committed with the effect.
      // Sent before COMMIT without waiting (one round trip, not two); if it fails, beginPipelined
      // throws its error, which takes the failure path exactly as a throw in here would (so `void`).
      void beforeCommit(
        finishDelivery(tx, scope, {
          runId: run.runId,
          tenantId,
          attempt,
          receiveCount: c.delivery.receiveCount,
          queue: run.queue,
          workerInstance: deps.workerInstance,
          outcome,
          ledger: { key: c.key!, retentionMs: deps.retentionMs },
          fresh: fresh && { fingerprint: fresh.fingerprint, startedAt: startedWritten ? null : fresh.startedAt, deferred: finishRegisters },
        }).catch((error: unknown) => {
          // A fresh key claimed meanwhile: nothing committed, and the next delivery claims the key as it
          // is (a replay, a hold or a takeover). Only this statement's refusal, never a handler's error.
          throw fresh && isKeyClaimedMeanwhile(error) ? keyClaimedMeanwhile() : error;
        }),
      );
      // Its successors of the key, waiting in their processes, look again once this commits (serial-turn.ts).
      if (serial) void beforeCommit(serialTurnNotice(tx, serial));
      return { replayed: false, outcome };
    }
    finishing?.done();
    lifetime.end();
    if (result && registration?.kind === 'execute') {
      const recorded = recordResults(deps, evicted, [gateResultOf(c, result.outcome)]);
      return await settleSuccess(c, registration.run, { outcome: result.outcome, replayed: result.replayed, followUpsSince }, recorded);
    }
  } catch (error) {
    finishing?.done();
    lifetime.end();
    const together = finishedTogether as { outcome: Record<string, unknown> } | null; // set inside effect()
    if (together && registration?.kind === 'execute') {
      // Only the end of a transaction that held locks failed (its connection lost): the finish committed.
      const recorded = recordResults(deps, evicted, [gateResultOf(c, together.outcome)]);
      return await settleSuccess(c, registration.run, { outcome: together.outcome, replayed: false, followUpsSince }, recorded);
    }
    await evicted;
    if (error instanceof SerialTurnNotYet) {
      // Nothing was written: the gate goes back and the message returns shortly, keeping its receives.
      await releaseOwnGate(c);
      await c.port.waitTurn(error.queueSeconds, error.ahead <= SERIAL_WAIT_HERE_AHEAD ? { id: serialTurnId(serial!), ahead: error.ahead } : undefined);
      return 'held';
    }
    if (registration?.kind !== 'execute') throw error; // the registration itself failed: the consumer retries
    if (isStageTimeout(error)) {
      // A wait outlived its deadline (the database is away or the connection stalled): nothing is
      // settled, since settling would wait on the same database; the consumer sends the message back,
      // and the ledger decides on the next delivery (an effect that did commit is replayed, not redone).
      void releaseOwnGate(c).catch(() => {});
      throw error;
    }
    const deferredHere = deferred as Deferred | null; // set inside effect()
    if (deferredHere && !registeredLate && startedAt === null && error instanceof ReleasedOnShutdown) {
      // Released before its handler started, its registration still to be written: nothing of it was
      // written, so its message goes back untouched, its receive not spent (as a group's waiting members).
      return giveBackUnstarted(c);
    }
    if (deferredHere) {
      // A deferred registration whose effect rolled back is written now (once: the same as a late one),
      // at the instant of its read, and the attempt settles as any rolled-back attempt. Unless the run
      // moved on while it executed unregistered (an operator's cancel, another delivery's settlement, a
      // rescue): then its attempt is recorded, and it settles as moved on, never as a failure of its own.
      const movedOn = !registeredLate && (error instanceof RunMovedOn || isRunMovedOnRefusal(error));
      const started = movedOn ? null : await traceStage('registration', c.envelope.name, () => boundStage('registration', registerLate())); // span (src/observe)
      if (!started) {
        await recordMovedOnAttempt(c, deferredHere.receivedAt, startedAt);
        return settleMovedOn(c, 0);
      }
      return settleExecuted(c, started.run, started.run.attempts, error, lifetime.abortReason, startedAt, leaseMs);
    }
    return settleExecuted(c, registration.run, registration.attempt, error, lifetime.abortReason, startedAt, leaseMs);
  }
  return traceStage('settlement', c.envelope.name, () => settleRegistration(c, registration!, early)); // span (src/observe)
}
