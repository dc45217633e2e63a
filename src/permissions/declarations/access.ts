// Permissions of the access area (what members of a tenant may read about their own work).
import { declarePermissions } from '../declaration.ts';

/** Checked by GET /task-runs/{runId} (use case `task-runs.read`). */
export const TASK_RUNS_READ = 'access.task_runs.read';

export const accessPermissions = declarePermissions('src/permissions/declarations/access.ts', [
  {
    code: TASK_RUNS_READ,
    scope: 'tenant',
    description: 'Read the status of background runs of the tenant (GET /task-runs/{runId}).',
    useCases: ['task-runs.read'],
  },
]);
