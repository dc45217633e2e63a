// Units the outbox and relay tests dispatch: one of each context, and two subscribers of one event.
import { z } from 'zod';
import type { DispatchTarget } from '../../src/work/runtime/produce/dispatch.ts';
import { createDispatcher } from '../../src/work/runtime/produce/dispatch.ts';

export const TEST_UNITS: Record<string, DispatchTarget> = {
  'demo.tenant_task': { name: 'demo.tenant_task', queue: 'default', context: 'tenant', payload: z.object({ n: z.number() }) },
  'demo.any_payload': { name: 'demo.any_payload', queue: 'default', context: 'tenant' },
  'demo.bulk_task': { name: 'demo.bulk_task', queue: 'bulk', context: 'tenant', payload: z.object({ n: z.number() }) },
  'demo.platform_task': { name: 'demo.platform_task', queue: 'critical', context: 'platform' },
  'demo.system_task': { name: 'demo.system_task', queue: 'maintenance', context: 'system' },
  'demo.sub_a': { name: 'demo.sub_a', queue: 'critical', context: 'tenant' },
  'demo.sub_b': { name: 'demo.sub_b', queue: 'bulk', context: 'tenant', payload: z.object({ who: z.string() }) },
};

export function testDispatcher(instance = 'test-dispatcher') {
  return createDispatcher({
    resolve: (name) => TEST_UNITS[name],
    subscribers: (type, version) =>
      type === 'demo.happened' && version === 1 ? [TEST_UNITS['demo.sub_a']!, TEST_UNITS['demo.sub_b']!] : [],
    instance,
  });
}
