// Stage 1 of a delivery: the checks made before the run is touched. A failure found here (unknown
// unit, receives exhausted, wrong context, invalid payload, bad key, reused key) is carried to the
// registration, which records it against the run.
import { maxReceivesOf } from '../complete/backoff.ts';
import { randomUUID } from 'node:crypto';
import { RUNTIME_MAX_RECEIVES } from '../../../config/limits.ts';
import { knownDatabaseIdentity } from '../../../kv/database-identity.ts';
import { parseEnvelope, type Envelope } from '../produce/envelope.ts';
import { boundStage } from '../../../db/stage-deadline.ts';
import { acquireGate, confirmCompletedGate, releaseGate, fingerprintOf, gateKeyOf, idempotencyKeyOf, type GateState } from '../store/idempotency.ts';
import type { RunScope } from '../store/scope-tables.ts';
import { classifyFailure, IdempotencyKeyReused, PermanentFailure, UnitNotRegistered, ValidationFailure } from '../../define/unit-errors.ts';
import type { Delivery, DeliveryContext, DeliveryPort, DeliveryResult, Failure, RunnerDeps } from './context.ts';

/** What the checks found: the delivery's context, a failure already known (or none), the gate's answer. */
export type CheckedDelivery =
  | { kind: 'settled'; result: DeliveryResult }
  | { kind: 'checked'; context: DeliveryContext; early: Failure | null; gate: GateState; payload: unknown; leaseMs: number };

/**
 * Checks a delivery before anything is registered: the envelope (a malformed one is dead-lettered
 * here), the unit, the receive count, the context, the payload, the idempotency key and the Redis gate.
 */
export async function checkDelivery(deps: RunnerDeps, delivery: Delivery, port: DeliveryPort): Promise<CheckedDelivery> {
  const maxReceives = deps.maxReceives ?? RUNTIME_MAX_RECEIVES;
  let envelope: Envelope;
  try {
    envelope = parseEnvelope(delivery.body, delivery.json);
  } catch (error) {
    // Not a run envelope: no run to record and no retry can fix it.
    const f = classifyFailure(error);
    deps.logger.error({ messageId: delivery.messageId, code: f.code }, 'message is not a run envelope: dead-lettered');
    await port.deadLetter({
      runId: null,
      unit: null,
      errorCode: 'MESSAGE_MALFORMED',
      errorType: f.type,
      errorMessage: f.message,
      receiveCount: delivery.receiveCount,
      workerInstance: deps.workerInstance,
    });
    await port.ack();
    return { kind: 'settled', result: 'failed' };
  }
  const scope: RunScope = envelope.tenant_id === undefined ? 'platform' : 'tenant';
  const tenantId = envelope.tenant_id ?? null;
  const unit = deps.units.get(envelope.name);
  const c: DeliveryContext = {
    deps,
    delivery,
    port,
    envelope,
    scope,
    tenantId,
    unit,
    maxReceives: maxReceivesOf(unit, maxReceives), // the unit's retry policy may allow fewer
    // Built on first use: most deliveries never log, and a pino child costs its bindings' serialization.
    get log() {
      const log = deps.logger.child({ runId: envelope.run_id, unit: envelope.name, receiveCount: delivery.receiveCount });
      Object.defineProperty(this, 'log', { value: log });
      return log;
    },
    // Every statement runs as the worker process, bound to the run's tenant.
    actor: { kind: 'system', tenantId, label: `worker:${envelope.name}`.slice(0, 128) },
  };

  // Failures known before anything runs.
  let early: Failure | null = null;
  let payload: unknown;
  if (!unit) {
    early = classifyFailure(new UnitNotRegistered(envelope.name));
  } else if ((unit.context === 'tenant') !== (scope === 'tenant')) {
    early = classifyFailure(
      new PermanentFailure('RUN_CONTEXT_MISMATCH', `unit '${unit.name}' has context ${unit.context} but the message is a ${scope} run`),
    );
  } else {
    const parsed = unit.payload.safeParse(envelope.payload);
    if (!parsed.success) {
      early = classifyFailure(new ValidationFailure(`payload of '${unit.name}' is invalid: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(payload)'} ${i.message}`).join('; ')}`));
    } else {
      payload = parsed.data;
      try {
        const source = unit.idempotencyKey ? unit.idempotencyKey(payload as never) : envelope.run_id;
        c.key = idempotencyKeyOf(unit.name, source);
        c.fingerprint = fingerprintOf(envelope.payload);
        // The gate's key names the database; until its identity is known (read at boot, in the
        // background) a delivery takes no gate and the database decides: no wait on the database here.
        const database = knownDatabaseIdentity(deps.sql);
        c.gateKey = database === undefined ? undefined : gateKeyOf(database, scope, tenantId, c.key);
      } catch (error) {
        early = classifyFailure(error);
      }
    }
  }
  if (!early && unit && delivery.receiveCount > c.maxReceives) {
    early = {
      code: 'RECEIVES_EXHAUSTED',
      type: 'ReceivesExhausted',
      message: `the message was received ${delivery.receiveCount} times, more than the ${c.maxReceives} allowed: the handler is not run again`,
      permanent: true,
    };
    // The handler will not run for this delivery, so the key is not claimed nor failed; it is kept
    // only to see whether another delivery is executing it (registration then holds this one back).
    c.probeKey = c.key;
    c.key = undefined;
    c.fingerprint = undefined;
    c.gateKey = undefined;
  }

  // The Redis gate: a concurrent duplicate sees it held; a finished key replays from it.
  let gate: GateState = { state: 'unavailable' };
  if (!early && unit && c.gateKey) {
    const token = randomUUID();
    // Bounded (SVC_STAGE_TIMEOUT_MS) as every wait of a delivery; a gate taken after the deadline is given back.
    const gateKey = c.gateKey;
    gate = await boundStage('checks', acquireGate(deps.redis, gateKey, token, unit.timeoutSeconds * 1000 + deps.leaseMarginMs), (late) => {
      if (late.state === 'acquired') void releaseGate(deps.redis, gateKey, token);
    });
    if (gate.state === 'acquired') c.gateToken = token;
    // A held gate is only a hint: its holder may have crashed (the gate outlives it by the lease,
    // often longer than the queue's visibility). The key's advisory lock, released when a holder's
    // connection dies, decides: a live holder still makes this delivery wait its turn, a dead one is
    // taken over at once, so a crash costs one extra receive, not one per redelivery until the lease.
    if (gate.state === 'held') gate = { state: 'unavailable' };
    // A completed gate only says where to look: the ledger's completed row is what replays (or refuses
    // a reused key); without one this delivery executes as if Redis had nothing.
    if (gate.state === 'completed') gate = await boundStage('checks', confirmCompletedGate(deps.sql, { scope, tenantId }, c.key!));
    if (gate.state === 'completed' && gate.fingerprintHex !== c.fingerprint!.toString('hex')) {
      early = classifyFailure(new IdempotencyKeyReused(unit.name));
    }
  }

  const leaseMs = unit ? unit.timeoutSeconds * 1000 + deps.leaseMarginMs : deps.leaseMarginMs;
  return { kind: 'checked', context: c, early, gate, payload, leaseMs };
}
