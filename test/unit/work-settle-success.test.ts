// A success's settlement (settlement.ts settleSuccess): its place in the consumer is given back as soon
// as it starts, before the result's copy to Redis and the message's delete, which run no unit code and
// need no connection; the delete still waits for the copy. The port and the copy are stubs (pure order).
import { describe, expect, it } from 'vitest';
import { settleSuccess } from '../../src/work/runtime/complete/settlement.ts';
import type { DeliveryContext, DeliveryPort } from '../../src/work/runtime/execute/context.ts';
import type { RunRow } from '../../src/work/runtime/store/run-store.ts';

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('a success settles', () => {
  it('giving its slot back before its result reaches Redis, and deleting its message after', async () => {
    const steps: string[] = [];
    let copied!: () => void;
    const recorded = new Promise<void>((resolve) => {
      copied = resolve;
    }).then(() => {
      steps.push('result copied to Redis');
    });
    const port = {
      handlerReturned: () => steps.push('slot given back'),
      ack: async () => {
        steps.push('message deleted');
      },
    } as unknown as DeliveryPort;
    const c = { port, deps: {} } as unknown as DeliveryContext;
    const run = { runId: 'r', name: 'fixture.unit', queue: 'default', startedAt: null } as unknown as RunRow;
    const settled = settleSuccess(c, run, { outcome: {}, replayed: false, followUpsSince: null }, recorded);
    await turn();
    // The copy is still pending: the slot is free already, the message not deleted yet.
    expect(steps).toEqual(['slot given back']);
    copied();
    await expect(settled).resolves.toBe('succeeded');
    expect(steps).toEqual(['slot given back', 'result copied to Redis', 'message deleted']);
  });
});
