// The one error of the operator functions (runs list/show/redrive/cancel, dead-letter redrive): a
// stable code the CLI prints on one line and a future admin route maps to a status, and a message
// that says what to do next. Never a payload value or a credential.
import { CodedError } from '../../errors/coded-error.ts';

export type OperateErrorCode =
  /** The run id is not a uuid. */
  | 'RUN_ID_INVALID'
  /** No tenant or platform run has this id. */
  | 'RUN_NOT_FOUND'
  /** Redrive of a run whose status is not `failed`. */
  | 'RUN_NOT_FAILED'
  /** Cancel of a run already succeeded, failed or skipped. */
  | 'RUN_ALREADY_FINAL'
  /** The run's envelope (payload) is no longer in the outbox and none was given. */
  | 'RUN_PAYLOAD_GONE'
  /** A filter or option is malformed (status, queue, instant, duration, limit, unit, tenant, label). */
  | 'RUN_FILTER_INVALID'
  /** A bulk operation would touch more runs or messages than allowed without --max. */
  | 'BULK_LIMIT_EXCEEDED';

export class OperateError extends CodedError<OperateErrorCode> {}

/** Canonical text form of a uuid (any case accepted, lower case returned). */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Refuses anything but a uuid before it reaches SQL (a cast error would be a confusing message). */
export function checkRunId(runId: string): string {
  if (!UUID.test(runId)) throw new OperateError('RUN_ID_INVALID', `'${runId.slice(0, 64)}' is not a run id: a run id is a uuid such as 0190c7d2-4b7e-4a59-9f8e-2f1f0c1e4d11`);
  return runId.toLowerCase();
}

/** Who performs an operator action, as recorded on runs and trails: 1..100 printable characters. */
export function checkOperatorLabel(by: string | undefined): string {
  if (by === undefined || by.trim() === '') {
    throw new OperateError('RUN_FILTER_INVALID', '--by <label> is required: name who performs this (e.g. --by alice@ops), it is recorded on the run');
  }
  if (by.length > 100 || /[\u0000-\u001f]/.test(by)) {
    throw new OperateError('RUN_FILTER_INVALID', '--by must be 1 to 100 printable characters');
  }
  return by.trim();
}
