// The executor: where a checked delivery runs. A delivery of a unit with `groupCommit` joins the
// forming group of its unit, tenant and actor (group-commit.ts) or, when it may not, runs alone in a
// slot of its unit taken there; any other has the effect transaction to itself (execution.ts), in the
// slot the consumer took for it.
import type { GateState } from '../store/idempotency.ts';
import type { DeliveryContext, DeliveryResult, Failure } from './context.ts';
import { deliverAlone } from './execution.ts';
import { groupCommitEligible } from './group-commit.ts';

/**
 * Executes one checked delivery. A delivery of a unit with `groupCommit` joins the forming group of
 * its unit, tenant and actor (group-commit.ts), or, when it may not, runs alone in a slot of its unit
 * taken there; any other has the effect transaction to itself, in the slot the consumer took for it.
 */
export function deliver(c: DeliveryContext, early: Failure | null, gate: GateState, payload: unknown, leaseMs: number): Promise<DeliveryResult> {
  if (groupCommitEligible(c, early, gate)) return c.deps.groups.join({ c, gate, payload, leaseMs });
  if (c.unit?.groupCommit) return c.deps.groups.alone(c, early, gate, payload, leaseMs);
  return deliverAlone(c, early, gate, payload, leaseMs);
}

