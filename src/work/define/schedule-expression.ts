// Schedule expressions of the form `rate(<n> <unit>)`, as cloud schedulers write them: a positive whole
// number and `minute`, `hour` or `day` (singular for 1, plural otherwise). Scheduled moments are the
// multiples of the interval since the Unix epoch, so every scheduler (in-process, cron, cloud) agrees on
// which moment a firing belongs to and the database's unique (schedule_name, scheduled_for) holds.
import { CodedError } from '../../errors/coded-error.ts';

export type RateUnit = 'minute' | 'hour' | 'day';

export interface ScheduleRate {
  expression: string;
  every: number;
  unit: RateUnit;
  intervalMs: number;
}

const UNIT_MS: Record<RateUnit, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 };
const RATE = /^rate\((\d{1,6}) (minute|minutes|hour|hours|day|days)\)$/;

export class InvalidScheduleExpression extends CodedError<'SCHEDULE_INVALID'> {
  constructor(expression: string, reason: string) {
    super('SCHEDULE_INVALID', `invalid schedule '${expression}': ${reason}; write rate(<n> <unit>), e.g. rate(1 hour) or rate(5 minutes)`);
    this.name = 'InvalidScheduleExpression';
  }
}

export function parseScheduleExpression(expression: string): ScheduleRate {
  const match = RATE.exec(expression);
  if (!match) throw new InvalidScheduleExpression(expression, 'not of the form rate(<n> <unit>) with unit minute, hour or day');
  const every = Number(match[1]);
  const word = match[2]!;
  if (every < 1) throw new InvalidScheduleExpression(expression, 'the number must be at least 1');
  const plural = word.endsWith('s');
  if (every === 1 && plural) throw new InvalidScheduleExpression(expression, `use the singular '${word.slice(0, -1)}' with 1`);
  if (every > 1 && !plural) throw new InvalidScheduleExpression(expression, `use the plural '${word}s' with ${every}`);
  const unit = (plural ? word.slice(0, -1) : word) as RateUnit;
  return { expression, every, unit, intervalMs: every * UNIT_MS[unit] };
}

export function isValidScheduleExpression(expression: string): boolean {
  return scheduleExpressionProblem(expression) === null;
}

/** Why `expression` is not a schedule (the parser's own reason, naming the expression), or null when it is one. */
export function scheduleExpressionProblem(expression: string): string | null {
  try {
    parseScheduleExpression(expression);
    return null;
  } catch (error) {
    if (error instanceof InvalidScheduleExpression) return error.message;
    throw error;
  }
}

/** The scheduled moment a firing at `atMs` belongs to: the latest multiple of the interval not after it. */
export function scheduledMomentAt(rate: ScheduleRate, atMs: number): number {
  return Math.floor(atMs / rate.intervalMs) * rate.intervalMs;
}

/** The first scheduled moment strictly after `atMs`. */
export function nextScheduledMoment(rate: ScheduleRate, atMs: number): number {
  return scheduledMomentAt(rate, atMs) + rate.intervalMs;
}
