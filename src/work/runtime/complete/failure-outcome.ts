// What a failed run's `outcome` says about why it failed: `{ "error": { "code", "type", "message" } }`,
// readable through GET /task-runs/{runId} and `svc runs show`. The outcome is public: the message is
// one line of at most 200 characters (never a stack), and an error that is not one of the unit error
// classes (a driver error, a bug's TypeError) gets a fixed message, since its text may carry values.
// The full message stays on the trail's `failed` event and in the worker log.

/** Longest public message kept in a failed run's outcome. */
export const PUBLIC_MESSAGE_MAX_CHARS = 200;

export interface FailureFacts {
  code: string;
  type: string;
  message: string;
}

export interface FailedOutcome {
  error: { code: string; type: string; message: string };
  [key: string]: unknown;
}

/** Error types whose message is written by a unit author or by the runtime for the public. */
function isPublicType(type: string): boolean {
  return /Failure$|^UnitNotRegistered$|^UnitTimedOut$|^IdempotencyKeyReused$|^MalformedMessage$|^ReceivesExhausted$|^RunCancelled$|^RunFailed$/.test(type);
}

/** The failed outcome of a failure (classifyFailure's facts, or an operator's cancel). */
export function failedOutcome(f: FailureFacts): FailedOutcome {
  const firstLine = (f.message.split('\n')[0] ?? '').trim();
  const message = isPublicType(f.type)
    ? firstLine.length > PUBLIC_MESSAGE_MAX_CHARS
      ? `${firstLine.slice(0, PUBLIC_MESSAGE_MAX_CHARS - 1)}…`
      : firstLine
    : `the handler failed with ${f.type.slice(0, 64)} (${f.code.slice(0, 64)}): see the run's trail and the worker log`;
  return { error: { code: f.code.slice(0, 128), type: f.type.slice(0, 128), message } };
}
