// Schedule expressions, as cloud schedulers write them:
// - `rate(<n> <unit>)`: a positive whole number and `minute`, `hour` or `day` (singular for 1, plural
//   otherwise). Its scheduled moments are the multiples of the interval since the Unix epoch.
// - `cron(<minute> <hour> <day of month> <month> <day of week>)`: five fields in UTC, each `*`, a number,
//   a range `a-b`, a step `*/n` or `a-b/n` or `a/n`, or a comma list of those (day of week 0..7, 0 and 7
//   Sunday; numbers only). As in cron, when both day fields are restricted a day matching either fires.
//   Its scheduled moments are the minutes it matches.
// Either way a moment is a pure function of the instant, so every scheduler (in-process, cron, cloud)
// agrees on which moment a firing belongs to and the database's unique (schedule_name, scheduled_for) holds.
import { CodedError } from '../../errors/coded-error.ts';

export type RateUnit = 'minute' | 'hour' | 'day';

export interface ScheduleRate {
  kind: 'rate';
  expression: string;
  every: number;
  unit: RateUnit;
  intervalMs: number;
}

export interface ScheduleCron {
  kind: 'cron';
  expression: string;
  /** The values each field admits, ascending (day of week 0..6, Sunday 0). */
  minutes: number[];
  hours: number[];
  daysOfMonth: number[];
  months: number[];
  daysOfWeek: number[];
  /** True when the field was `*` (or a step over it): cron's OR of the day fields applies only when both are restricted. */
  anyDayOfMonth: boolean;
  anyDayOfWeek: boolean;
  /** Only rate() has a fixed interval. */
  intervalMs?: undefined;
}

export type Schedule = ScheduleRate | ScheduleCron;

const UNIT_MS: Record<RateUnit, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 };
const RATE = /^rate\((\d{1,6}) (minute|minutes|hour|hours|day|days)\)$/;
const CRON = /^cron\((.*)\)$/;
const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
// A cron expression fires at least once in any 8 years (29 February comes back within them) or never.
const SEARCH_DAYS = 8 * 366 + 1;

export class InvalidScheduleExpression extends CodedError<'SCHEDULE_INVALID'> {
  constructor(expression: string, reason: string) {
    super(
      'SCHEDULE_INVALID',
      `invalid schedule '${expression}': ${reason}; write rate(<n> <unit>), e.g. rate(1 hour) or rate(5 minutes), or cron(<minute> <hour> <day of month> <month> <day of week>) in UTC, e.g. cron(30 2 * * 1-5)`,
    );
    this.name = 'InvalidScheduleExpression';
  }
}

const CRON_FIELDS = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day of month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12 },
  { name: 'day of week', min: 0, max: 7 },
] as const;

function cronField(expression: string, text: string, field: (typeof CRON_FIELDS)[number]): { values: number[]; any: boolean } {
  const bad = (why: string) => new InvalidScheduleExpression(expression, `${field.name} '${text}': ${why}`);
  const range = `${field.min}..${field.max}`;
  const number = (s: string) => {
    if (!/^\d{1,2}$/.test(s)) throw bad(`write numbers in ${range}, '*', ranges a-b and steps /n`);
    const n = Number(s);
    if (n < field.min || n > field.max) throw bad(`${n} is outside ${range}`);
    return n;
  };
  const values = new Set<number>();
  for (const item of text.split(',')) {
    const [span, stepText, extra] = item.split('/');
    if (extra !== undefined || span === undefined || span === '') throw bad(`write numbers in ${range}, '*', ranges a-b and steps /n`);
    let step = 1;
    if (stepText !== undefined) {
      if (!/^\d{1,2}$/.test(stepText) || Number(stepText) < 1) throw bad('a step must be a whole number of at least 1');
      step = Number(stepText);
    }
    let from: number;
    let to: number;
    if (span === '*') [from, to] = [field.min, field.max];
    else if (span.includes('-')) {
      const [a, b, more] = span.split('-');
      if (more !== undefined) throw bad(`write numbers in ${range}, '*', ranges a-b and steps /n`);
      [from, to] = [number(a!), number(b!)];
      if (from > to) throw bad(`the range ${from}-${to} runs backwards`);
    } else {
      from = number(span);
      to = stepText === undefined ? from : field.max;
    }
    for (let v = from; v <= to; v += step) values.add(v);
  }
  const any = text.split(',').some((item) => item.startsWith('*'));
  return { values: [...values].sort((a, b) => a - b), any };
}

function parseCron(expression: string, body: string): ScheduleCron {
  const parts = body.trim().split(/\s+/);
  if (parts.length !== 5 || body !== parts.join(' ')) {
    throw new InvalidScheduleExpression(expression, 'a cron expression has 5 fields separated by single spaces (minute hour day-of-month month day-of-week)');
  }
  const [minute, hour, dom, month, dow] = parts.map((p, i) => cronField(expression, p, CRON_FIELDS[i]!));
  const cron: ScheduleCron = {
    kind: 'cron',
    expression,
    minutes: minute!.values,
    hours: hour!.values,
    daysOfMonth: dom!.values,
    months: month!.values,
    daysOfWeek: [...new Set(dow!.values.map((d) => d % 7))].sort((a, b) => a - b),
    anyDayOfMonth: dom!.any,
    anyDayOfWeek: dow!.any,
  };
  if (nextCronMoment(cron, Date.UTC(2000, 0, 1) - 1) === null) {
    throw new InvalidScheduleExpression(expression, 'it never fires (no such day in any month it names)');
  }
  return cron;
}

export function parseScheduleExpression(expression: string): Schedule {
  const cron = CRON.exec(expression);
  if (cron) return parseCron(expression, cron[1]!);
  const match = RATE.exec(expression);
  if (!match) throw new InvalidScheduleExpression(expression, 'not of the form rate(<n> <unit>) with unit minute, hour or day, nor cron(...)');
  const every = Number(match[1]);
  const word = match[2]!;
  if (every < 1) throw new InvalidScheduleExpression(expression, 'the number must be at least 1');
  const plural = word.endsWith('s');
  if (every === 1 && plural) throw new InvalidScheduleExpression(expression, `use the singular '${word.slice(0, -1)}' with 1`);
  if (every > 1 && !plural) throw new InvalidScheduleExpression(expression, `use the plural '${word}s' with ${every}`);
  const unit = (plural ? word.slice(0, -1) : word) as RateUnit;
  return { kind: 'rate', expression, every, unit, intervalMs: every * UNIT_MS[unit] };
}

function cronDayMatches(cron: ScheduleCron, dayMs: number): boolean {
  const d = new Date(dayMs);
  if (!cron.months.includes(d.getUTCMonth() + 1)) return false;
  const dom = cron.daysOfMonth.includes(d.getUTCDate());
  const dow = cron.daysOfWeek.includes(d.getUTCDay());
  if (cron.anyDayOfMonth && cron.anyDayOfWeek) return true;
  if (cron.anyDayOfMonth) return dow;
  if (cron.anyDayOfWeek) return dom;
  return dom || dow;
}

/** The latest matching minute of `dayMs`'s day at or before `limitMinute` (minutes into the day), or null. */
function lastMinuteOfDay(cron: ScheduleCron, limitMinute: number): number | null {
  for (let h = cron.hours.length - 1; h >= 0; h--) {
    for (let m = cron.minutes.length - 1; m >= 0; m--) {
      const minute = cron.hours[h]! * 60 + cron.minutes[m]!;
      if (minute <= limitMinute) return minute;
    }
  }
  return null;
}

/** The first matching minute of a day at or after `fromMinute`, or null. */
function firstMinuteOfDay(cron: ScheduleCron, fromMinute: number): number | null {
  for (const h of cron.hours) {
    for (const m of cron.minutes) {
      const minute = h * 60 + m;
      if (minute >= fromMinute) return minute;
    }
  }
  return null;
}

function previousCronMoment(cron: ScheduleCron, atMs: number): number | null {
  const day0 = Math.floor(atMs / DAY_MS) * DAY_MS;
  let limit = Math.floor((atMs - day0) / MINUTE_MS);
  for (let i = 0; i < SEARCH_DAYS; i++, limit = 24 * 60 - 1) {
    const day = day0 - i * DAY_MS;
    if (!cronDayMatches(cron, day)) continue;
    const minute = lastMinuteOfDay(cron, limit);
    if (minute !== null) return day + minute * MINUTE_MS;
  }
  return null;
}

function nextCronMoment(cron: ScheduleCron, atMs: number): number | null {
  const after = Math.floor(atMs / MINUTE_MS) * MINUTE_MS + MINUTE_MS;
  const day0 = Math.floor(after / DAY_MS) * DAY_MS;
  let from = (after - day0) / MINUTE_MS;
  for (let i = 0; i < SEARCH_DAYS; i++, from = 0) {
    const day = day0 + i * DAY_MS;
    if (!cronDayMatches(cron, day)) continue;
    const minute = firstMinuteOfDay(cron, from);
    if (minute !== null) return day + minute * MINUTE_MS;
  }
  return null;
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

/**
 * The scheduled moment a firing at `atMs` belongs to: for rate(), the latest multiple of the interval not
 * after it; for cron(), the latest minute it matches not after it.
 */
export function scheduledMomentAt(schedule: Schedule, atMs: number): number {
  if (schedule.kind === 'rate') return Math.floor(atMs / schedule.intervalMs) * schedule.intervalMs;
  // Parsing proved a moment in every 8 years, so one lies within the search window.
  return previousCronMoment(schedule, atMs)!;
}

/** The first scheduled moment strictly after `atMs`. */
export function nextScheduledMoment(schedule: Schedule, atMs: number): number {
  if (schedule.kind === 'rate') return scheduledMomentAt(schedule, atMs) + schedule.intervalMs;
  return nextCronMoment(schedule, atMs)!;
}
