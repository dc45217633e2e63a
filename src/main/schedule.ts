// `svc schedule fire <name> [--at <iso instant>]`: fires one scheduled moment of a scheduled task, for
// an external scheduler (cron, a cloud scheduler) where no in-process scheduler runs. The moment is the
// latest moment of the schedule not after --at (default: the database clock), so repeated
// or concurrent firings of the same moment yield one run. Example crontab line for rate(1 hour):
//   0 * * * *  cd /app && npm run svc -- schedule fire maintenance.purge
import path from 'node:path';
import { z } from 'zod';
import { booleanFlag, databaseUrl, parseEnv, redisUrl } from '../config/parse.ts';
import { resolveDatabase } from '../db/connect.ts';
import { createSql } from '../db/client.ts';
import { createRedis } from '../kv/client.ts';
import { loadUnits } from '../work/catalog.ts';
import { fireSchedule, scheduledTask } from '../work/runtime/maintain/scheduler.ts';

const PROJECT_ROOT = path.resolve(import.meta.dirname, '..', '..');

const scheduleEnv = z.object({
  DATABASE_URL: databaseUrl,
  SVC_DATA_DIR: z.string().default('.data'),
  SVC_EMBEDDED_PG_PORT: z.string().default('54329'),
  REDIS_URL: redisUrl,
  /** false skips the wake signal (the relay's sweep still sends the run). Default true. */
  SVC_SCHEDULE_WAKE: booleanFlag.default(true),
});

export async function run(args: string[]): Promise<number> {
  const [command, name, ...rest] = args;
  const atIndex = rest.indexOf('--at');
  const atText = atIndex >= 0 ? rest[atIndex + 1] : undefined;
  if (command !== 'fire' || !name || (atIndex >= 0 && !atText) || rest.length !== (atIndex >= 0 ? 2 : 0)) {
    console.error('usage: svc schedule fire <schedule-name> [--at <iso instant>]');
    return 2;
  }
  let at: Date | undefined;
  if (atText) {
    at = new Date(atText);
    if (Number.isNaN(at.getTime()) || !/^\d{4}-\d{2}-\d{2}T/.test(atText)) {
      console.error(`svc schedule fire: --at must be an ISO instant such as 2030-01-01T10:00:00Z, got '${atText}'`);
      return 2;
    }
  }
  const env = parseEnv('schedule', scheduleEnv, process.env);
  const units = await loadUnits(process.env.SVC_UNITS_ROOT ?? PROJECT_ROOT, { dir: process.env.SVC_UNITS_DIR ?? 'units' });
  const unit = scheduledTask(units, name);
  const database = await resolveDatabase({ DATABASE_URL: env.DATABASE_URL, SVC_DATA_DIR: env.SVC_DATA_DIR, SVC_EMBEDDED_PG_PORT: env.SVC_EMBEDDED_PG_PORT });
  const sql = createSql(database.url, { max: 1, applicationName: 'svc-schedule' });
  const redis = env.SVC_SCHEDULE_WAKE ? createRedis(env.REDIS_URL, { name: 'svc-schedule' }) : undefined;
  redis?.on('error', () => {});
  // The wake signal is a hint: wait briefly for the connection, never for long.
  if (redis) await Promise.race([new Promise((resolve) => redis.once('ready', resolve)), new Promise((resolve) => setTimeout(resolve, 1000))]);
  try {
    const result = await fireSchedule(sql, unit, at, { redis });
    console.log(JSON.stringify({ schedule: unit.name, ...result }));
    return 0;
  } finally {
    await sql.end({ timeout: 5 });
    redis?.disconnect();
    await database.stop();
  }
}
