// GET /health (alive) and GET /ready (database, Redis and schema) — both public, both name this
// build's newest migration so a deploy can confirm the new version is live.
import type { FastifyInstance } from 'fastify';
import { errorRef, ok, successSchema } from '../envelope.ts';
import { HttpError, localTerm } from '../errors.ts';
import { checkReadiness } from '../readiness.ts';
import type { AppDeps } from '../app-deps.ts';

const latestMigration = { type: 'string', description: 'Newest migration name of this build.' } as const;

export function healthRoutes(app: FastifyInstance, deps: AppDeps, readinessTimeoutMs: number): void {
  // Why the database is unreachable is logged when it starts or changes, not on every probe.
  let databaseProblem: string | null = null;
  app.get(
    '/health',
    {
      config: { public: true },
      schema: {
        summary: 'Process is alive',
        tags: ['operations'],
        response: {
          200: successSchema(
            {
              type: 'object',
              required: ['status', 'latestMigration'],
              properties: { status: { type: 'string', const: 'alive' }, latestMigration },
            },
            'The process answers.',
          ),
        },
      },
    },
    async () => ok({ status: 'alive', latestMigration: deps.latestMigration }),
  );

  app.get(
    '/ready',
    {
      config: { public: true },
      schema: {
        summary: 'Ready to serve',
        description:
          'Ready when the database and Redis are reachable and the database holds this build\'s newest migration. ' +
          'Otherwise 503 NOT_READY with error.details {database, redis, pendingMigration, latestMigration}.',
        tags: ['operations'],
        response: {
          200: successSchema(
            {
              type: 'object',
              required: ['status', 'latestMigration', 'database', 'redis'],
              properties: {
                status: { type: 'string', const: 'ready' },
                latestMigration,
                database: { type: 'string', enum: ['ok'] },
                redis: { type: 'string', enum: ['ok'] },
              },
            },
            'Database and Redis answer and the schema is current.',
          ),
          503: errorRef,
        },
      },
    },
    async (request) => {
      const r = await checkReadiness(deps, readinessTimeoutMs);
      if (r.databaseProblem !== databaseProblem) {
        if (r.databaseProblem) request.log.warn({ code: r.databaseProblem }, 'database unreachable: the readiness probe failed');
        else request.log.info('database reachable again');
        databaseProblem = r.databaseProblem;
      }
      if (r.ready) return ok({ status: 'ready', latestMigration: deps.latestMigration, database: 'ok', redis: 'ok' });
      const reasons = [
        r.database === 'unreachable' ? localTerm(request, 'database_unreachable') : null,
        r.redis === 'unreachable' ? localTerm(request, 'redis_unreachable') : null,
        r.database === 'ok' && r.pendingMigration ? localTerm(request, 'migration_pending', { name: r.pendingMigration }) : null,
      ].filter(Boolean);
      throw new HttpError(503, 'NOT_READY', {
        params: { reasons: reasons.join('; ') },
        details: {
          database: r.database,
          redis: r.redis,
          pendingMigration: r.pendingMigration,
          latestMigration: deps.latestMigration,
        },
      });
    },
  );
}
