// Failures a unit handler (or the runtime around it) can raise. The worker only asks one question of
// an error: is it `permanent`? Permanent failures (validation, forbidden, not found and alike) go to
// the dead-letter queue at once; everything else is transient and retried with backoff until the
// fifth receive. An unknown error (a bug, a dropped connection) is transient: retrying is safe because
// every handler runs behind the idempotency runner.
//
// A unit's definition can be wrong too: that is the author's error, raised where the unit is defined
// (RateLimitInvalid), never a run's failure.
import { CodedError } from '../../errors/coded-error.ts';

export interface UnitFailure {
  readonly code: string;
  readonly permanent: boolean;
}

/** The shape of a failure code: upper-case letters, digits and underscores, 2 to 64 characters. */
export const FAILURE_CODE = /^[A-Z][A-Z0-9_]{1,63}$/;

/** A failure described as one object: `code` defaults to the class's code. */
export interface FailureInit {
  code?: string;
  message: string;
  cause?: unknown;
}

type FailureOptions = { cause?: unknown };

// Accepts the natural `(message)`, the explicit `(code, message)` and `{ code?, message }`. A code that is
// not code-shaped never becomes the outcome's code (a sentence there would be matched on by operators and
// alerts): it is kept as the head of the message and the class's default code applies.
function failureArgs(
  defaultCode: string,
  first: string | FailureInit,
  second?: string | FailureOptions,
  third?: FailureOptions,
): { code: string; message: string; options: FailureOptions | undefined } {
  if (typeof first === 'object' && first !== null) {
    const options = 'cause' in first ? { cause: first.cause } : undefined;
    const shaped = typeof first.code === 'string' && FAILURE_CODE.test(first.code);
    const message = first.code !== undefined && !shaped ? `${String(first.code)}: ${first.message}` : first.message;
    return { code: shaped ? first.code! : defaultCode, message, options };
  }
  if (typeof second === 'string') {
    if (FAILURE_CODE.test(first)) return { code: first, message: second, options: third };
    return { code: defaultCode, message: `${first}: ${second}`, options: third };
  }
  // A lone code-shaped argument is a code (the message repeats it, so the outcome is never empty).
  return { code: FAILURE_CODE.test(first) ? first : defaultCode, message: first, options: second };
}

/**
 * Base for failures that will not succeed on retry: `new PermanentFailure('amount -5 is negative')`,
 * `new PermanentFailure('AMOUNT_NEGATIVE', 'amount -5 is negative')` or `new PermanentFailure({ code, message })`.
 * The code defaults to PERMANENT_FAILURE.
 */
export class PermanentFailure extends Error implements UnitFailure {
  readonly code: string;
  readonly permanent = true;
  constructor(message: string, options?: FailureOptions);
  constructor(code: string, message: string, options?: FailureOptions);
  constructor(init: FailureInit);
  constructor(first: string | FailureInit, second?: string | FailureOptions, third?: FailureOptions) {
    const { code, message, options } = failureArgs('PERMANENT_FAILURE', first, second, third);
    super(message, options);
    this.code = code;
    this.name = 'PermanentFailure';
  }
}

/**
 * Base for failures worth retrying (a dependency is down, a lock timed out); called like PermanentFailure.
 * The code defaults to TRANSIENT_FAILURE.
 */
export class TransientFailure extends Error implements UnitFailure {
  readonly code: string;
  readonly permanent = false;
  constructor(message: string, options?: FailureOptions);
  constructor(code: string, message: string, options?: FailureOptions);
  constructor(init: FailureInit);
  constructor(first: string | FailureInit, second?: string | FailureOptions, third?: FailureOptions) {
    const { code, message, options } = failureArgs('TRANSIENT_FAILURE', first, second, third);
    super(message, options);
    this.code = code;
    this.name = 'TransientFailure';
  }
}

export class ValidationFailure extends PermanentFailure {
  constructor(message: string, options?: { cause?: unknown }) {
    super('VALIDATION_FAILED', message, options);
    this.name = 'ValidationFailure';
  }
}

export class ForbiddenFailure extends PermanentFailure {
  constructor(message: string, options?: { cause?: unknown }) {
    super('FORBIDDEN', message, options);
    this.name = 'ForbiddenFailure';
  }
}

export class NotFoundFailure extends PermanentFailure {
  constructor(message: string, options?: { cause?: unknown }) {
    super('NOT_FOUND', message, options);
    this.name = 'NotFoundFailure';
  }
}

/** The message names a unit this worker build does not know (deploy workers before the API). */
export class UnitNotRegistered extends TransientFailure {
  constructor(name: string) {
    super(
      'UNIT_NOT_REGISTERED',
      `no unit named '${name}' is registered in this worker build: deploy workers that know it before the API publishes it`,
    );
    this.name = 'UnitNotRegistered';
  }
}

/** The handler ran past the unit's timeoutSeconds and was aborted. */
export class UnitTimedOut extends TransientFailure {
  constructor(name: string, timeoutSeconds: number) {
    super('UNIT_TIMED_OUT', `unit '${name}' exceeded its timeout of ${timeoutSeconds} s and was aborted`);
    this.name = 'UnitTimedOut';
  }
}

/** A business idempotency key was reused with a different payload. */
export class IdempotencyKeyReused extends PermanentFailure {
  constructor(name: string) {
    super(
      'IDEMPOTENCY_KEY_REUSED',
      `unit '${name}': the idempotency key was already used with a different payload; use a new key for a different request`,
    );
    this.name = 'IdempotencyKeyReused';
  }
}

/** The message body is not a valid envelope: no retry can fix it. */
export class MalformedMessage extends PermanentFailure {
  constructor(message: string, options?: { cause?: unknown }) {
    super('MESSAGE_MALFORMED', message, options);
    this.name = 'MalformedMessage';
  }
}

/**
 * A unit's `rateLimit` is not usable (thrown by defineTask/defineSubscriber): the unit file does not
 * load, so `tasks:check` and the workers name the file with this message.
 */
export class RateLimitInvalid extends CodedError<'UNIT_RATE_LIMIT_INVALID'> {
  readonly problems: readonly string[];
  constructor(unit: string, problems: readonly string[]) {
    super('UNIT_RATE_LIMIT_INVALID', `unit '${String(unit)}': ${problems.join('; ')}`);
    this.name = 'RateLimitInvalid';
    this.problems = problems;
  }
}

/** Classifies any thrown value: explicit `permanent` flag wins; zod validation errors are permanent. */
export function classifyFailure(error: unknown): { code: string; type: string; message: string; permanent: boolean } {
  const e = error as { code?: unknown; permanent?: unknown; name?: unknown; message?: unknown; issues?: unknown };
  const type = typeof e?.name === 'string' ? e.name : typeof error;
  const message = typeof e?.message === 'string' ? e.message : String(error);
  if (e && typeof e === 'object' && typeof e.permanent === 'boolean') {
    return { code: typeof e.code === 'string' ? e.code : 'UNIT_FAILED', type, message, permanent: e.permanent };
  }
  if (type === 'ZodError' || Array.isArray(e?.issues)) {
    return { code: 'VALIDATION_FAILED', type, message, permanent: true };
  }
  // PostgreSQL data exceptions (22xxx) and integrity violations (23xxx) repeat identically on retry;
  // serialization failures, deadlocks and lost connections do not.
  if (type === 'PostgresError' && typeof e.code === 'string' && /^2[23]/.test(e.code)) {
    return { code: `PG_${e.code}`, type, message, permanent: true };
  }
  return { code: typeof e?.code === 'string' ? e.code : 'UNIT_FAILED', type, message, permanent: false };
}
