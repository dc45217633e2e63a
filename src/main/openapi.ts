// `svc openapi emit [--out <file>]`: builds the app with stub dependencies (nothing is connected) and
// writes its OpenAPI description to dist/openapi.json. A broken route rule fails buildApp and a
// document that breaks the contract fails the check, so the image build fails with the cause.
import fs from 'node:fs';
import path from 'node:path';
import type { Redis } from 'ioredis';
import type { Sql } from '../db/client.ts';
import { noSessionResolver } from '../auth/session-resolver.ts';
import { sessionCookie } from '../auth/session-cookie.ts';
import { buildApp } from '../http/app.ts';
import { openApiProblems } from '../http/openapi.ts';

const PROJECT_ROOT = path.resolve(import.meta.dirname, '..', '..');
export const OPENAPI_FILE = path.join(PROJECT_ROOT, 'dist', 'openapi.json');

export class OpenApiEmitError extends Error {
  readonly code = 'OPENAPI_EMIT_FAILED';
}

/** A dependency that must not be touched while describing routes. */
function unused<T>(name: string): T {
  return new Proxy(
    {},
    {
      get() {
        throw new OpenApiEmitError(`${name} is not available while emitting openapi.json`);
      },
    },
  ) as T;
}

export async function buildOpenApiDocument(): Promise<Record<string, unknown>> {
  const app = await buildApp({
    sql: unused<Sql>('the database'),
    redis: unused<Redis>('Redis'),
    resolver: noSessionResolver,
    catalog: { version: 1, tasks: [], subscriptions: [] },
    latestMigration: 'emit',
    config: { corsOrigins: [], corsCredentials: false },
    logger: false,
  });
  try {
    await app.ready();
    const doc = app.swagger() as Record<string, unknown>;
    const problems = openApiProblems(doc, sessionCookie().name);
    if (problems.length > 0) throw new OpenApiEmitError(`openapi.json breaks the route rules:\n  ${problems.join('\n  ')}`);
    return doc;
  } finally {
    await app.close();
  }
}

export async function run(args: string[]): Promise<number> {
  const [command, flag, out] = args;
  if (command !== 'emit' || (flag !== undefined && (flag !== '--out' || !out)) || args.length > 3) {
    console.error('usage: svc openapi emit [--out <file>]');
    return 2;
  }
  const file = path.resolve(out ?? OPENAPI_FILE);
  const doc = await buildOpenApiDocument();
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(doc, null, 2)}\n`);
  console.log(`openapi: wrote ${path.relative(process.cwd(), file) || file}`);
  return 0;
}
