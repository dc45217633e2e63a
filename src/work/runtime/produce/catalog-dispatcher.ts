// The API's dispatcher: tasks and event subscribers come from the catalog (tasks.json), never from unit
// code, so the API publishes an event to every subscriber the workers' build knows without importing a
// single unit file. Payloads are checked before anything is written: JSON, at most 64 KiB, and the
// unit's `payloadSchema` from the catalog (compiled once per unit, when the dispatcher is built), so a
// bad payload is refused with PAYLOAD_INVALID here instead of failing in the worker and landing in the
// dead-letter queue. Refinements written as code still run only in the worker, before the handler.
import type { Catalog, CatalogSubscription, CatalogTask } from '../../catalog.ts';
import { createDispatcher, type DispatchTarget, type Dispatcher } from './dispatch.ts';
import { compilePayloadSchema } from '../../define/payload-schema.ts';

export interface CatalogDispatcherOptions {
  /** Names this process in trail rows (1..128 chars); default `<hostname>:<pid>`. */
  instance?: string;
}

function targetOf(entry: CatalogTask | CatalogSubscription): DispatchTarget {
  // A catalog entry without payloadSchema (hand-written) is checked for JSON and size only.
  const check = entry.payloadSchema ? compilePayloadSchema(entry.payloadSchema) : undefined;
  const serialKey = 'serialKey' in entry ? (entry.serialKey ?? null) : null;
  return { name: entry.name, queue: entry.queue, context: entry.context, ...(check ? { check } : {}), ...(serialKey ? { serialKey } : {}) };
}

const eventKey = (type: string, version: number) => `${type}@${version}`;

/** A dispatcher resolving task names and event subscribers from `catalog`; lookups are built once. */
export function catalogDispatcher(catalog: Catalog, options: CatalogDispatcherOptions = {}): Dispatcher {
  const tasks = new Map<string, DispatchTarget>(catalog.tasks.map((t) => [t.name, targetOf(t)]));
  const subscribers = new Map<string, DispatchTarget[]>();
  // In name order (the catalog's order), so the runs of one publish are written in a stable order.
  for (const s of [...catalog.subscriptions].sort((a, b) => a.name.localeCompare(b.name))) {
    const key = eventKey(s.event.type, s.event.version);
    const list = subscribers.get(key) ?? [];
    list.push(targetOf(s));
    subscribers.set(key, list);
  }
  return createDispatcher({
    resolve: (name) => tasks.get(name),
    subscribers: (type, version) => subscribers.get(eventKey(type, version)) ?? [],
    ...(options.instance !== undefined ? { instance: options.instance } : {}),
  });
}
