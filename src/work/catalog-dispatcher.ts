// The API's dispatcher: tasks and event subscribers come from the catalog (tasks.json), never from unit
// code, so the API publishes an event to every subscriber the workers' build knows without importing a
// single unit file. Payloads are checked at catalog level only (JSON, at most 64 KiB): the unit's own
// schema runs in the worker before its handler, where a refusal fails the run as a ValidationFailure.
import type { Catalog, CatalogSubscription, CatalogTask } from './catalog.ts';
import { createDispatcher, type DispatchTarget, type Dispatcher } from './dispatch.ts';

export interface CatalogDispatcherOptions {
  /** Names this process in trail rows (1..128 chars); default `<hostname>:<pid>`. */
  instance?: string;
}

function targetOf(entry: CatalogTask | CatalogSubscription): DispatchTarget {
  // No `payload` schema: the catalog carries none, and dispatch then checks JSON and size only.
  return { name: entry.name, queue: entry.queue, context: entry.context };
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
