// Discovery of work units and the catalog `tasks.json` built from them. Discovery imports every `.ts`
// file under units/: files named `*.task.ts` must export exactly one task, `*.handler.ts` exactly one
// event subscriber, and any other file exporting a unit is an error (a unit discovery would not see).
// The API reads only the catalog (loadCatalog), never unit code, to find subscribers and contexts.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { DEFAULT_IDEMPOTENCY_LEASE_MARGIN_MS, SQS_MAX_VISIBILITY_SECONDS } from '../config/limits.ts';
import { CodedError } from '../errors/coded-error.ts';
import { compilePayloadSchema, payloadJsonSchema } from './define/payload-schema.ts';
import { isWorkUnit, RATE_LIMIT_SCOPES, unitProblems, UNIT_CONTEXTS, UNIT_NAME_MAX, UNIT_NAME_RULE, UNIT_QUEUES, type WorkUnit } from './define/unit.ts';

export const CATALOG_VERSION = 1;
export const TASK_FILE_SUFFIX = '.task.ts';
export const HANDLER_FILE_SUFFIX = '.handler.ts';
/** Where `svc tasks emit` writes the catalog, relative to the project root. */
export const DEFAULT_CATALOG_PATH = path.join('dist', 'tasks.json');

const unitName = z.string().regex(UNIT_NAME_RULE).max(UNIT_NAME_MAX);
const queue = z.enum(UNIT_QUEUES);
/**
 * JSON Schema (draft 2020-12) of the unit's payload as a dispatcher sends it; the API checks payloads
 * against it. Always emitted; optional when read, so a hand-written catalog without it still loads
 * (its payloads are then checked for JSON and size only).
 */
const payloadSchema = z.record(z.string(), z.unknown()).optional();
/**
 * The unit's rate limit (null: none), for operators and tools reading the catalog; the workers take it
 * from the unit itself. Optional when read, as payloadSchema.
 */
const rateLimit = z
  .object({ max: z.number().int().min(1), perSeconds: z.number().positive(), scope: z.enum(RATE_LIMIT_SCOPES) })
  .nullable()
  .optional();

export const catalogSchema = z
  .object({
    version: z.literal(CATALOG_VERSION),
    tasks: z.array(
      z.object({
        name: unitName,
        queue,
        context: z.enum(UNIT_CONTEXTS),
        concurrency: z.number().int().min(1),
        timeoutSeconds: z.number().int().min(1),
        schedule: z.string().nullable(),
        overlap: z.enum(['skip', 'allow']).nullable(),
        /** The payload field that orders the task's runs (one at a time per value); null or absent: none. */
        serialKey: z.string().min(1).nullable().optional(),
        rateLimit,
        payloadSchema,
        file: z.string().min(1),
      }),
    ),
    subscriptions: z.array(
      z.object({
        name: unitName,
        event: z.object({ type: unitName, version: z.number().int().min(1) }),
        queue,
        context: z.enum(UNIT_CONTEXTS),
        concurrency: z.number().int().min(1),
        timeoutSeconds: z.number().int().min(1),
        rateLimit,
        payloadSchema,
        file: z.string().min(1),
      }),
    ),
  })
  .superRefine((catalog, ctx) => {
    const seen = new Set<string>();
    for (const entry of [...catalog.tasks, ...catalog.subscriptions]) {
      if (seen.has(entry.name)) ctx.addIssue({ code: 'custom', message: `unit name '${entry.name}' appears twice` });
      seen.add(entry.name);
    }
  });

export type Catalog = z.infer<typeof catalogSchema>;
export type CatalogTask = Catalog['tasks'][number];
export type CatalogSubscription = Catalog['subscriptions'][number];

export class CatalogError extends CodedError<'TASKS_CATALOG_MISSING' | 'TASKS_CATALOG_INVALID'> {}

export interface CatalogProblem {
  /** Path relative to the project root, with forward slashes. */
  file: string;
  problem: string;
}

export class TasksCheckFailed extends CodedError<'TASKS_CHECK_FAILED'> {
  readonly problems: CatalogProblem[];
  constructor(problems: CatalogProblem[]) {
    super('TASKS_CHECK_FAILED', `tasks:check found ${problems.length} problem(s):\n` + problems.map((p) => `  ${p.file}: ${p.problem}`).join('\n'));
    this.name = 'TasksCheckFailed';
    this.problems = problems;
  }
}

export interface DiscoveredUnit {
  unit: WorkUnit;
  file: string;
}

export interface DiscoveryOptions {
  /** Folder of the units, relative to root. Default `units`. */
  dir?: string;
}

/** The unit files under `dir` (every `.ts` but declarations and tests), in name order; none when it does not exist. */
export function listTsFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...listTsFiles(full));
    else if (entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') && !entry.name.endsWith('.test.ts')) {
      out.push(full);
    }
  }
  return out;
}

/** Imports every unit file under root/dir; returns the units found and every problem, each naming its file. */
export async function discoverUnits(
  root: string,
  options: DiscoveryOptions = {},
): Promise<{ units: DiscoveredUnit[]; problems: CatalogProblem[] }> {
  const base = path.resolve(root, options.dir ?? 'units');
  const units: DiscoveredUnit[] = [];
  const problems: CatalogProblem[] = [];
  if (!fs.existsSync(base)) {
    problems.push({ file: path.relative(root, base).split(path.sep).join('/'), problem: 'the units folder does not exist' });
    return { units, problems };
  }
  for (const full of listTsFiles(base)) {
    const file = path.relative(root, full).split(path.sep).join('/');
    const expected = full.endsWith(TASK_FILE_SUFFIX) ? 'task' : full.endsWith(HANDLER_FILE_SUFFIX) ? 'subscriber' : null;
    let exports: Record<string, unknown>;
    try {
      exports = (await import(pathToFileURL(full).href)) as Record<string, unknown>;
    } catch (error) {
      problems.push({ file, problem: `cannot be loaded: ${(error as Error).message ?? String(error)}` });
      continue;
    }
    const found = [...new Set(Object.values(exports).filter(isWorkUnit))];
    if (expected === null) {
      if (found.length > 0) {
        problems.push({
          file,
          problem: `defines unit '${found[0]!.name}' in a file discovery does not see: name it *${TASK_FILE_SUFFIX} (task) or *${HANDLER_FILE_SUFFIX} (subscriber)`,
        });
      }
      continue;
    }
    const maker = expected === 'task' ? 'defineTask' : 'defineSubscriber';
    if (found.length === 0) {
      problems.push({ file, problem: `exports no unit definition: export one object built by ${maker}` });
      continue;
    }
    if (found.length > 1) {
      problems.push({ file, problem: `exports ${found.length} unit definitions: one file holds exactly one unit` });
      continue;
    }
    const unit = found[0]!;
    if (unit.kind !== expected) {
      problems.push({
        file,
        problem: `a *${expected === 'task' ? TASK_FILE_SUFFIX : HANDLER_FILE_SUFFIX} file must export a ${expected === 'task' ? 'task' : 'subscriber'} built by ${maker}`,
      });
      continue;
    }
    const unitIssues = unitProblems(unit);
    const visibility = visibilityProblem(unit);
    if (visibility) unitIssues.push(visibility);
    if (unitIssues.length === 0) {
      const problem = payloadSchemaProblem(unit);
      if (problem) unitIssues.push(problem);
    }
    for (const problem of unitIssues) problems.push({ file, problem });
    if (unitIssues.length === 0) units.push({ unit, file });
  }
  const byName = new Map<string, string>();
  for (const { unit, file } of units) {
    const other = byName.get(unit.name);
    if (other) problems.push({ file, problem: `duplicate unit name '${unit.name}' (also defined in ${other})` });
    else byName.set(unit.name, file);
  }
  return { units, problems };
}

/**
 * A unit's execution, with its idempotency lease margin, must fit the longest invisibility SQS allows
 * (12 hours from the first receive): past it the message comes back while the handler still runs.
 * Named with the unit, its queue and the numbers. (Its queue's configured visibility need not hold
 * the lease: a redelivery after a crash takes over as soon as the dead holder's lock is gone.)
 */
export function visibilityProblem(unit: WorkUnit, leaseMarginMs = DEFAULT_IDEMPOTENCY_LEASE_MARGIN_MS): string | null {
  const marginSeconds = Math.ceil(leaseMarginMs / 1000);
  const total = unit.timeoutSeconds + marginSeconds;
  if (total <= SQS_MAX_VISIBILITY_SECONDS) return null;
  return (
    `unit '${unit.name}' on queue '${unit.queue}': timeoutSeconds ${unit.timeoutSeconds} + lease margin ${marginSeconds} s = ${total} s ` +
    `exceeds the SQS maximum visibility of ${SQS_MAX_VISIBILITY_SECONDS} s (12 hours); lower timeoutSeconds to at most ${SQS_MAX_VISIBILITY_SECONDS - marginSeconds}`
  );
}

/** Why the unit's payload cannot go into tasks.json as JSON Schema (naming the unit), or null. */
export function payloadSchemaProblem(unit: WorkUnit): string | null {
  try {
    compilePayloadSchema(payloadJsonSchema(unit.payload));
    return null;
  } catch (error) {
    return `unit '${unit.name}': field payload: ${(error as Error).message}`;
  }
}

export function buildCatalog(discovered: DiscoveredUnit[]): Catalog {
  const sorted = [...discovered].sort((a, b) => a.unit.name.localeCompare(b.unit.name));
  const catalog: Catalog = { version: CATALOG_VERSION, tasks: [], subscriptions: [] };
  for (const { unit, file } of sorted) {
    if (unit.kind === 'task') {
      catalog.tasks.push({
        name: unit.name,
        queue: unit.queue,
        context: unit.context,
        concurrency: unit.concurrency,
        timeoutSeconds: unit.timeoutSeconds,
        schedule: unit.schedule,
        overlap: unit.overlap,
        // Only a unit that has one: the catalogs of every other unit stay as they were.
        ...(unit.serialKey ? { serialKey: unit.serialKey } : {}),
        rateLimit: unit.rateLimit,
        payloadSchema: payloadJsonSchema(unit.payload),
        file,
      });
    } else {
      catalog.subscriptions.push({
        name: unit.name,
        event: { type: unit.event.type, version: unit.event.version },
        queue: unit.queue,
        context: unit.context,
        concurrency: unit.concurrency,
        timeoutSeconds: unit.timeoutSeconds,
        rateLimit: unit.rateLimit,
        payloadSchema: payloadJsonSchema(unit.payload),
        file,
      });
    }
  }
  return catalogSchema.parse(catalog);
}

/** Discovers, checks and builds the catalog; throws TasksCheckFailed naming every bad file. */
export async function emitCatalog(root: string, options: DiscoveryOptions = {}): Promise<Catalog> {
  const { units, problems } = await discoverUnits(root, options);
  if (problems.length > 0) throw new TasksCheckFailed(problems);
  return buildCatalog(units);
}

/** Discovers and checks units and returns them by name, for the workers (which do run unit code). */
export async function loadUnits(root: string, options: DiscoveryOptions = {}): Promise<Map<string, WorkUnit>> {
  const { units, problems } = await discoverUnits(root, options);
  if (problems.length > 0) throw new TasksCheckFailed(problems);
  return new Map(units.map(({ unit }) => [unit.name, unit]));
}

export function writeCatalog(file: string, catalog: Catalog): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(catalog, null, 2) + '\n');
}

/** Reads and validates tasks.json; the API refuses to start when this throws. */
export function loadCatalog(file: string): Catalog {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    throw new CatalogError(
      'TASKS_CATALOG_MISSING',
      `the task catalog ${file} cannot be read: run \`npm run tasks:emit\` (or point SVC_TASKS_CATALOG at the build's tasks.json)`,
      { cause: error },
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new CatalogError('TASKS_CATALOG_INVALID', `the task catalog ${file} is not JSON: regenerate it with \`npm run tasks:emit\``, {
      cause: error,
    });
  }
  const parsed = catalogSchema.safeParse(json);
  if (!parsed.success) {
    const where = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new CatalogError('TASKS_CATALOG_INVALID', `the task catalog ${file} is invalid (${where}): regenerate it with \`npm run tasks:emit\``);
  }
  return parsed.data;
}

/** The subscriptions of one event type and version, in name order. */
export function subscribersOf(catalog: Catalog, type: string, version: number): CatalogSubscription[] {
  return catalog.subscriptions.filter((s) => s.event.type === type && s.event.version === version);
}
