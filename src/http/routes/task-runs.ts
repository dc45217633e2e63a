// GET /task-runs/{runId}: status of a background run of the caller's tenant. Protected by the
// permission access.task_runs.read; the runId is validated after authentication (onRequest runs first).
import type { FastifyInstance } from 'fastify';
import { errorRef, successSchema } from '../envelope.ts';
import { HttpError } from '../errors.ts';
import { runStatusJson } from '../run-status.ts';
import type { AppDeps } from '../app-deps.ts';
import { TASK_RUNS_READ } from '../../permissions/declarations/access.ts';

const UUID = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
const instant = (description: string, nullable = false) =>
  ({ type: nullable ? ['string', 'null'] : 'string', format: 'date-time', description: `${description} ISO 8601 UTC with Z.` }) as const;

export const runStatusSchema = {
  type: 'object',
  required: ['runId', 'name', 'queue', 'status', 'progress', 'attempts', 'outcome', 'queuedAt', 'startedAt', 'finishedAt', 'updatedAt'],
  properties: {
    runId: { type: 'string', format: 'uuid', description: 'Id of the run.' },
    name: { type: 'string', description: 'Unit name, e.g. maintenance.purge.' },
    queue: { type: 'string', enum: ['critical', 'default', 'bulk', 'maintenance'] },
    status: { type: 'string', enum: ['queued', 'running', 'retrying', 'succeeded', 'failed', 'skipped'] },
    progress: { type: 'integer', minimum: 0, maximum: 100, description: 'Percent reported by the handler.' },
    attempts: { type: 'integer', minimum: 0, description: 'Executions started so far.' },
    outcome: { type: 'object', additionalProperties: true, description: 'Result or error context (at most 2048 bytes).' },
    queuedAt: instant('When the run was queued.'),
    startedAt: instant('When the last execution started; null before.', true),
    finishedAt: instant('Set exactly when status is succeeded, failed or skipped.', true),
    updatedAt: instant('Last change.'),
  },
} as const;

export function taskRunRoutes(app: FastifyInstance, deps: AppDeps): void {
  app.get<{ Params: { runId: string } }>(
    '/task-runs/:runId',
    {
      config: { permission: TASK_RUNS_READ },
      schema: {
        summary: 'Status of a background run',
        description:
          'Status of a run of the caller\'s tenant. Read from Redis first, then the database; cached 5 s while in ' +
          'progress and 1 day once finished. A run of another tenant answers 404 exactly like a missing one.',
        tags: ['task runs'],
        params: {
          type: 'object',
          required: ['runId'],
          properties: { runId: { type: 'string', format: 'uuid', pattern: UUID, description: 'Run id (uuid).' } },
        },
        response: {
          200: successSchema(runStatusSchema, 'The run.'),
          400: errorRef,
          404: errorRef,
        },
      },
    },
    async (request, reply) => {
      const json = await runStatusJson(deps.sql, deps.redis, request.session!, request.params.runId.toLowerCase());
      if (json === null) throw new HttpError(404, 'RUN_NOT_FOUND');
      // Already-serialized data (from the cache or the row) is spliced in, not re-serialized.
      return reply.type('application/json; charset=utf-8').send(`{"success":true,"data":${json},"meta":{}}`);
    },
  );
}
