// Follow-up runs from inside a handler: `run.dispatch(unit, payload)` and `run.publish(event, payload)`
// write the new runs, their `queued` events and outbox rows through the effect transaction, so they
// commit with the handler's effect or not at all (a failed or retried attempt leaves no follow-up
// behind). The new runs are caused by the current run (causation_id) and carry its correlation id;
// the context rules of any dispatch apply (a tenant run dispatches tenant tasks for its own tenant).
// The runner builds these through createFollowUps (testUnit drives the same runner) and wakes the relay after commit.
import type { TxSql } from '../../../db/client.ts';
import type { Actor } from '../../../db/unit-of-work.ts';
import { createDispatcher, DispatchError, targetOfUnit, type DispatchOptions, type DispatchTarget } from './dispatch.ts';
import { PermanentFailure } from '../../define/unit-errors.ts';
import type { UnitRun, WorkUnit } from '../../define/unit.ts';

export interface FollowUpContext {
  /** The effect transaction of the current attempt. */
  tx: TxSql;
  runId: string;
  correlationId: string;
  /** The current run's tenant, null for platform and system runs. */
  tenantId: string | null;
  /** Units loaded in this process: publish reaches the subscribers among them. */
  units: ReadonlyMap<string, WorkUnit>;
  /** Names this process in trail rows. */
  instance: string;
}

export interface FollowUps {
  /** The two UnitRun members. */
  api: Pick<UnitRun, 'dispatch' | 'publish'>;
  /**
   * When the first follow-up began to be written (performance.now()), null when none was: after the
   * effect commits, signal the relay once, saying how old the rows may be (src/kv/wake.ts `since`).
   */
  writtenSince(): number | null;
}

/**
 * A refused follow-up (bad payload, context mismatch, unknown unit) refuses again on every retry: it
 * fails the current run at once, with the dispatch's code, instead of being retried five times.
 */
async function permanentOnRefusal<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof DispatchError) throw new PermanentFailure(error.code, `follow-up refused: ${error.message}`, { cause: error });
    throw error;
  }
}

export function createFollowUps(ctx: FollowUpContext): FollowUps {
  let since: number | null = null;
  // `started` is taken before a write's inserts go out, so its rows' available_at is no older than it.
  const wrote = (started: number) => (since = since === null ? started : Math.min(since, started));
  // The follow-up's actor: a system process bound to the current run's tenant (or none).
  const actor: Actor = { kind: 'system', tenantId: ctx.tenantId, label: `run:${ctx.runId}` };
  const lineage = { actor, correlationId: ctx.correlationId, causationId: ctx.runId };
  const subscribersOf = (type: string, version: number): DispatchTarget[] =>
    [...ctx.units.values()]
      .filter((u) => u.kind === 'subscriber' && u.event.type === type && u.event.version === version)
      .sort((a, b) => a.name.localeCompare(b.name))
      .map(targetOfUnit);
  return {
    api: {
      async dispatch(unit, payload, options = {}) {
        const started = performance.now();
        const dispatcher = createDispatcher({
          resolve: (name) => (name === unit.name && unit.kind === 'task' ? targetOfUnit(unit) : undefined),
          instance: ctx.instance,
        });
        const { delaySeconds, uniqueKey, uniqueFor, uniqueStates, debounceSeconds, debouncePayload } = options;
        const unique = { uniqueKey, uniqueFor, uniqueStates, debounceSeconds, debouncePayload } as DispatchOptions;
        const run = await permanentOnRefusal(dispatcher.dispatchTask(ctx.tx, unit.name, payload, { ...lineage, ...unique, delaySeconds }));
        if (!run.deduplicated) wrote(started);
        return run;
      },
      async publish(event, payload, options = {}) {
        const started = performance.now();
        const dispatcher = createDispatcher({ resolve: () => undefined, subscribers: subscribersOf, instance: ctx.instance });
        const runs = await permanentOnRefusal(dispatcher.publishEvent(ctx.tx, event.type, event.version, payload, { ...lineage, delaySeconds: options.delaySeconds }));
        if (runs.length > 0) wrote(started);
        return runs;
      },
    },
    writtenSince: () => since,
  };
}
